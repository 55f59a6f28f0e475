/// A type of an app's contract, in LuaLS's notation (`---@field title string`): the subset LuaStore checks values
/// against (docs/contracts.md).
public indirect enum ContractType: Sendable, Equatable, CustomStringConvertible {
    /// `string`, `number` (an integer or a float), `integer` (a Lua integer only) and `boolean`.
    case string, number, integer, boolean
    /// A string literal: `"add"`.
    case literal(String)
    /// `T[]`: a list (a table with keys 1…n only).
    case array(ContractType)
    /// `table<string, T>`: a table with string keys only.
    case map(ContractType)
    /// `T?`: `nil`, or a `T`.
    case optional(ContractType)
    /// `A|B|C`.
    case union([ContractType])
    /// A class or an alias the contract declares.
    case named(String)

    public var description: String {
        switch self {
        case .string: "string"
        case .number: "number"
        case .integer: "integer"
        case .boolean: "boolean"
        case .literal(let text): "\"\(text)\""
        case .array(let element): element.isCompound ? "(\(element))[]" : "\(element)[]"
        case .map(let value): "table<string, \(value)>"
        case .optional(let inner): inner.isCompound ? "(\(inner))?" : "\(inner)?"
        case .union(let members): members.map(\.description).joined(separator: "|")
        case .named(let name): name
        }
    }

    private var isCompound: Bool {
        if case .union = self { return true }
        return false
    }

    /// The names of classes and aliases it mentions.
    var names: [String] {
        switch self {
        case .string, .number, .integer, .boolean, .literal: []
        case .array(let inner), .map(let inner), .optional(let inner): inner.names
        case .union(let members): members.flatMap(\.names)
        case .named(let name): [name]
        }
    }
}

/// Reads a type in LuaLS's notation from the start of a text; what follows it (a description) is left.
struct ContractTypeParser {
    /// A type that is not one the contract checks, in words.
    struct Unsupported: Error {
        let reason: String
    }

    private let bytes: [UInt8]
    private(set) var index = 0

    init(_ text: Substring) {
        bytes = Array(text.utf8)
    }

    /// The text after the type (its description), trimmed.
    var rest: String {
        String(decoding: bytes[index...], as: UTF8.self).trimmingCharacters(in: .whitespaces)
    }

    /// The type at the start; nil when the text is empty.
    mutating func parse() throws(Unsupported) -> ContractType? {
        skipSpaces()
        guard index < bytes.count else { return nil }
        return try union()
    }

    private mutating func union() throws(Unsupported) -> ContractType {
        var members = [try postfix()]
        while true {
            let mark = index
            skipSpaces()
            guard peek() == UInt8(ascii: "|") else {
                index = mark
                break
            }
            index += 1
            skipSpaces()
            members.append(try postfix())
        }
        return members.count == 1 ? members[0] : .union(members)
    }

    private mutating func postfix() throws(Unsupported) -> ContractType {
        var type = try primary()
        while true {
            if peek() == UInt8(ascii: "["), peek(1) == UInt8(ascii: "]") {
                index += 2
                type = .array(type)
            } else if peek() == UInt8(ascii: "?") {
                index += 1
                type = .optional(type)
            } else {
                return type
            }
        }
    }

    /// A union between spaces, then `end` (passed over); `reason` when something else comes.
    private mutating func union(endingAt end: Unicode.Scalar, else reason: String) throws(Unsupported) -> ContractType {
        skipSpaces()
        let inner = try union()
        skipSpaces()
        guard peek() == UInt8(ascii: end) else { throw Unsupported(reason: reason) }
        index += 1
        return inner
    }

    private mutating func primary() throws(Unsupported) -> ContractType {
        guard let first = peek() else { throw Unsupported(reason: "a type is missing") }
        switch first {
        case UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "`"):
            index += 1
            let start = index
            while let byte = peek(), byte != first { index += 1 }
            guard peek() == first else { throw Unsupported(reason: "a string literal is not closed") }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            index += 1
            return .literal(text)
        case UInt8(ascii: "("):
            index += 1
            return try union(endingAt: ")", else: "a '(' is not closed")
        default:
            let name = identifier()
            guard !name.isEmpty else {
                throw Unsupported(reason: "'\(String(decoding: bytes[index...].prefix(12), as: UTF8.self))' is not a type")
            }
            switch name {
            case "string": return .string
            case "number": return .number
            case "integer": return .integer
            case "boolean": return .boolean
            case "table":
                guard peek() == UInt8(ascii: "<") else {
                    throw Unsupported(reason: "'table' says nothing of what it holds: write T[] (a list) or table<string, T>")
                }
                index += 1
                let key = try union(endingAt: ",", else: "table<K, V> needs a key and a value type")
                let value = try union(endingAt: ">", else: "a 'table<' is not closed")
                guard key == .string else {
                    throw Unsupported(reason: "table<\(key), …> is outside the contract's types: its keys are strings (table<string, T>), or it is a list (T[])")
                }
                return .map(value)
            case "any", "unknown", "nil", "function", "fun", "userdata", "lightuserdata", "thread", "self":
                throw Unsupported(reason: "'\(name)' is outside the contract's types (string, number, integer, boolean, \"literal\", T[], table<string, T>, T?, A|B, a declared class or alias)")
            default:
                return .named(name)
            }
        }
    }

    private mutating func identifier() -> String {
        let start = index
        while let byte = peek(),
              (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") && index > start) || byte == UInt8(ascii: "_")
                || (byte == UInt8(ascii: ".") && index > start) {
            index += 1
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private func peek(_ offset: Int = 0) -> UInt8? {
        index + offset < bytes.count ? bytes[index + offset] : nil
    }

    private mutating func skipSpaces() {
        while let byte = peek(), byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") { index += 1 }
    }
}
