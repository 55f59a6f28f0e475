import Foundation

/// JSON text read straight from its bytes into a Lua value, with no intermediate document (what `luastore run`
/// reads actions with, a line at a time): an object is a table with string keys (a `null` member is absent; an object naming a
/// member twice is refused), an array a list (`null` leaves a hole), a number without fraction or exponent that fits in
/// 64 bits an integer and any other number a float. Strict RFC 8259: no comments, no trailing commas, strings
/// valid UTF-8 without raw control characters, nothing after the value but white space. Nesting is capped.
public struct LuaJSON {
    /// Why text is not JSON, and at which byte (from 1; for a string, where it opens).
    public struct Malformed: Error, CustomStringConvertible {
        /// What is wrong.
        public let reason: String
        /// The byte it was found at, from 1.
        public let column: Int
        public var description: String { "not valid JSON: \(reason) at column \(column)" }
    }

    /// Tables nested deeper than this are refused (the VM would refuse them anyway).
    public static let maximumDepth = 200

    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    private init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// The value `text` holds.
    public static func parse(_ text: String) throws(Malformed) -> LuaValue {
        let result = Array(text.utf8).withUnsafeBytes { bytes in Result { () throws(Malformed) in try parse(bytes) } }
        return try result.get()
    }

    /// The value `bytes` (UTF-8) hold.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(Malformed) -> LuaValue {
        var parser = LuaJSON(bytes)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.position == bytes.count else { throw parser.fail("text after the value") }
        return value
    }

    private func fail(_ reason: String) -> Malformed { Malformed(reason: reason, column: position + 1) }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func value(depth: Int) throws(Malformed) -> LuaValue {
        guard let byte = current else { throw fail("a value was expected") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return true
        case UInt8(ascii: "f"): try literal("false"); return false
        case UInt8(ascii: "n"): try literal("null"); return .nil
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw fail("unexpected '\(Self.shown(byte))'")
        }
    }

    private mutating func literal(_ word: StaticString) throws(Malformed) {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count,
              memcmp(bytes.baseAddress! + position, word.utf8Start, count) == 0 else {
            throw fail("unexpected '\(Self.shown(bytes[position]))'")
        }
        position += count
    }

    private mutating func object(depth: Int) throws(Malformed) -> LuaValue {
        guard depth <= Self.maximumDepth else { throw fail("nested deeper than \(Self.maximumDepth)") }
        position += 1 // {
        skipSpace()
        if current == UInt8(ascii: "}") {
            position += 1
            return .table(LuaTable())
        }
        // The members in a list first, then the table at once: a few kept as they are, many hashed into a
        // dictionary made to their number (growing one member by member rehashed every key at each doubling).
        var members: [(String, LuaValue)] = []
        var names: Set<LuaKey>? // (the names met so far, once there are more than a few to look through)
        while true {
            guard current == UInt8(ascii: "\"") else { throw fail("a member name (a string) was expected") }
            let opening = position
            let name = try string()
            if Self.repeats(name, in: members, names: &names) {
                position = opening
                throw fail("the name \(LuaPath.quoted(name)) appears twice in one object (JSON leaves open which value counts)")
            }
            skipSpace()
            guard current == UInt8(ascii: ":") else { throw fail("':' was expected after a member name") }
            position += 1
            skipSpace()
            members.append((name, try value(depth: depth)))
            if try closes(with: UInt8(ascii: "}"), in: "an object") { return .table(LuaTable(stringFields: members)) }
        }
    }

    /// Whether an object whose members so far are `members` has a member named `name` already (names compared by
    /// their bytes: two spellings of one character are two Lua keys). Up to a few members are looked through; past
    /// them `names` holds them all.
    private static func repeats(_ name: String, in members: [(String, LuaValue)], names: inout Set<LuaKey>?) -> Bool {
        if members.count < 8 { return members.contains { String.sameBytes($0.0, name) } }
        if names == nil { names = Set(members.map { LuaKey.string($0.0) }) }
        return !names!.insert(.string(name)).inserted
    }

    private mutating func array(depth: Int) throws(Malformed) -> LuaValue {
        guard depth <= Self.maximumDepth else { throw fail("nested deeper than \(Self.maximumDepth)") }
        position += 1 // [
        var table = LuaTable()
        skipSpace()
        if current == UInt8(ascii: "]") {
            position += 1
            return .table(table)
        }
        var index: Int64 = 0
        while true {
            index += 1
            let element = try value(depth: depth)
            if element != .nil { table[.integer(index)] = element }
            if try closes(with: UInt8(ascii: "]"), in: "an array") { return .table(table) }
        }
    }

    /// After a member or an element: true at the closing bracket, false after a comma (both passed).
    private mutating func closes(with closing: UInt8, in container: String) throws(Malformed) -> Bool {
        skipSpace()
        switch current {
        case UInt8(ascii: ","):
            position += 1
            skipSpace()
            return false
        case closing:
            position += 1
            return true
        default:
            throw fail("',' or '\(Character(UnicodeScalar(closing)))' was expected in \(container)")
        }
    }

    private mutating func string() throws(Malformed) -> String {
        position += 1 // "
        let start = position
        // The common case: no escapes; the bytes are the string.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let text = String(utf8: UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
                guard let text else { throw Malformed(reason: "a string is not valid UTF-8", column: start) }
                position += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw fail("a control character in a string (write it escaped)") }
            position += 1
        }
        var decoded = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
        while true {
            guard let byte = current else { throw Malformed(reason: "a string is not closed", column: start) }
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(utf8: decoded) else {
                    throw Malformed(reason: "a string is not valid UTF-8", column: start)
                }
                return text
            case UInt8(ascii: "\\"):
                try escape(into: &decoded)
            case 0..<0x20:
                position -= 1
                throw fail("a control character in a string (write it escaped)")
            default:
                decoded.append(byte)
            }
        }
    }

    private mutating func escape(into decoded: inout [UInt8]) throws(Malformed) {
        guard let byte = current else { throw fail("an escape is not finished") }
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(byte)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) { // a high surrogate: its low half must follow
                guard current == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                    throw fail("a lone surrogate in a \\u escape")
                }
                position += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw fail("a lone surrogate in a \\u escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw fail("a lone surrogate in a \\u escape")
            }
            decoded.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
        default:
            position -= 1
            throw fail("unknown escape '\\\(Self.shown(byte))'")
        }
    }

    private mutating func hex4() throws(Malformed) -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("a \\u escape needs four hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("a \\u escape needs four hex digits")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    private var atDigit: Bool { current.map { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } ?? false }

    /// Skips a run of digits; `reason` when there is none.
    private mutating func digits(or reason: String) throws(Malformed) {
        guard atDigit else { throw fail(reason) }
        while atDigit { position += 1 }
    }

    private mutating func number() throws(Malformed) -> LuaValue {
        let start = position
        var negative = false
        if current == UInt8(ascii: "-") {
            negative = true
            position += 1
        }
        guard let first = current, atDigit else { throw fail("a digit was expected") }
        // Integer digits, accumulated as a negative number (its range is one larger).
        var magnitude: Int64 = 0
        var fits = true
        if first == UInt8(ascii: "0") {
            position += 1
        } else {
            while atDigit, let byte = current {
                let (times, overflowTimes) = magnitude.multipliedReportingOverflow(by: 10)
                let (next, overflowMinus) = times.subtractingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                if overflowTimes || overflowMinus { fits = false } else { magnitude = next }
                position += 1
            }
        }
        var integral = true
        if current == UInt8(ascii: ".") {
            integral = false
            position += 1
            try digits(or: "a digit was expected after '.'")
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            integral = false
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            try digits(or: "a digit was expected in the exponent")
        }
        if integral, fits {
            if negative { return .integer(magnitude) }
            if magnitude != .min { return .integer(-magnitude) }
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        guard let number = Double(text), number.isFinite else { throw Malformed(reason: "a number too large", column: start + 1) }
        return .number(number)
    }

    private static func shown(_ byte: UInt8) -> String {
        (0x21..<0x7F).contains(byte) ? String(UnicodeScalar(byte)) : String(format: "\\x%02X", byte)
    }
}
