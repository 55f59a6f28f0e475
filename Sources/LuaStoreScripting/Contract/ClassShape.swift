import LuaKit
import LuaStoreContract

/// A declared class laid out for checking a value at each dispatch: the fields' names and what each takes in
/// arrays of plain values, so that checking an action of a few fields compares a few strings and copies no type.
/// Names and literals compare as Lua compares strings: byte for byte (`same`).
/// It only answers whether a value conforms; the words for one that does not come from `AppContract`'s checker,
/// which names the first difference in the order the class declares its fields.
final class ClassShape: Sendable {
    enum Kind: UInt8, Sendable {
        case string, number, integer, boolean, literal, other
    }

    let names: [String]
    let kinds: [Kind]
    /// A `literal` field's text ("" for other kinds).
    let literals: [String]
    /// Whether each name, each literal, is ASCII (`same`).
    let asciiNames: [Bool]
    let asciiLiterals: [Bool]
    /// The type of an `other` field (a list, a table, a union, a class, an optional one).
    let others: [ContractType?]
    /// The fields that must be present, as bits (the first 64; a class of more is always asked of the checker).
    let required: UInt64
    let laidOut: Bool

    init(_ fields: [AppContract.Class.Field]) {
        var kinds: [Kind] = [], literals: [String] = [], others: [ContractType?] = [], required: UInt64 = 0
        for (index, field) in fields.enumerated() {
            var kind = Kind.other, literal = "", other: ContractType? = field.type
            switch field.type {
            case .string: kind = .string
            case .number: kind = .number
            case .integer: kind = .integer
            case .boolean: kind = .boolean
            case .literal(let text): (kind, literal) = (.literal, text)
            default: break
            }
            if kind != .other { other = nil }
            kinds.append(kind)
            literals.append(literal)
            others.append(other)
            if !field.optional && !AppContract.admitsNil(field.type) && index < 64 { required |= 1 << UInt64(index) }
        }
        names = fields.map(\.name)
        self.kinds = kinds
        self.literals = literals
        asciiNames = names.map { $0.utf8.allSatisfy { $0 < 0x80 } }
        asciiLiterals = literals.map { $0.utf8.allSatisfy { $0 < 0x80 } }
        self.others = others
        self.required = required
        laidOut = fields.count <= 64
    }

    /// Whether `table` is an instance: no list items, every key a declared field whose value it takes, every
    /// required field present. False also when it cannot tell quickly (the checker then decides, and says why).
    func conforms(_ table: LuaTable, in contract: ContractChecker) -> Bool {
        guard table.array.isEmpty else { return false }
        return table.withStringPairs { conforms(pairs: $0, in: contract) } ?? false
    }

    /// `conforms(_:in:)` of a table's fields as they lie (`LuaTable.withStringPairs`; no list items).
    func conforms(pairs: UnsafeBufferPointer<(String, LuaValue)>, in contract: ContractChecker) -> Bool {
        guard laidOut else { return false }
        let (names, asciiNames, kinds) = (self.names, self.asciiNames, self.kinds) // (held once, not at each read)
        var seen: UInt64 = 0
        for pair in pairs.indices {
            let (key, value) = pairs[pair]
            var found: Int?
            for index in names.indices where Self.same(key, names[index], ascii: asciiNames[index]) {
                found = index
                break
            }
            guard let index = found else { return false }
            seen |= 1 << UInt64(index)
            switch kinds[index] {
            case .string:
                guard case .string = value else { return false }
            case .number:
                switch value {
                case .integer, .number: break
                default: return false
                }
            case .integer:
                guard case .integer = value else { return false }
            case .boolean:
                guard case .boolean = value else { return false }
            case .literal:
                guard case .string(let text) = value, Self.same(text, literals[index], ascii: asciiLiterals[index]) else { return false }
            case .other:
                guard let type = others[index], contract.conforms(value, type) else { return false }
            }
        }
        return seen & required == required
    }

    /// Whether `text` is the same bytes as `declared`. For an ASCII `declared` that is `==` at the same length —
    /// Swift's comparison of ASCII text, byte for byte, which has a fast path `sameBytes` has not; a string
    /// canonically equal to ASCII text but not ASCII itself (a Kelvin sign for `K`) is longer in UTF-8.
    @inline(__always)
    static func same(_ text: String, _ declared: String, ascii: Bool) -> Bool {
        ascii ? text.utf8.count == declared.utf8.count && text == declared : String.sameBytes(text, declared)
    }
}
