import LuaKit
import LuaStoreContract

/// A declared class laid out for checking a value at each dispatch: the fields' names and what each takes in
/// arrays of plain values, so that checking an action of a few fields compares a few strings and copies no type.
/// Names and literals compare as Lua compares strings: byte for byte (`find`, `same`).
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

    /// `conforms(_:in:)` of a table's fields as they lie (`LuaTable.withStringPairs`; no list items). Each key is
    /// looked for first at its own position (a literal lists an action's fields as its class does, mostly), and
    /// compared first by its bits (`sameBits`); values are looked at where they lie, not copied. (Comparing keys as
    /// strings and copying each pair, a four-field action cost ≈ 130 ns.)
    func conforms(pairs: UnsafeBufferPointer<(String, LuaValue)>, in contract: ContractChecker) -> Bool {
        guard laidOut else { return false }
        guard let base = pairs.baseAddress else { return required == 0 }
        return names.withUnsafeBufferPointer { names in
            kinds.withUnsafeBufferPointer { kinds in
                var seen: UInt64 = 0
                for position in 0..<pairs.count {
                    let pair = base + position
                    guard let index = Self.find(pair.pointee.0, in: names, from: position) else { return false }
                    seen |= 1 << UInt64(index)
                    switch kinds[index] {
                    case .string:
                        guard case .string = pair.pointee.1 else { return false }
                    case .number:
                        switch pair.pointee.1 {
                        case .integer, .number: break
                        default: return false
                        }
                    case .integer:
                        guard case .integer = pair.pointee.1 else { return false }
                    case .boolean:
                        guard case .boolean = pair.pointee.1 else { return false }
                    case .literal:
                        guard case .string(let text) = pair.pointee.1, Self.same(text, literals[index]) else { return false }
                    case .other:
                        guard let type = others[index], contract.conforms(pair.pointee.1, type) else { return false }
                    }
                }
                return seen & required == required
            }
        }
    }

    /// The index of the declared name that `key` is (nil: none), tried first at `guess`, and by bits first.
    @inline(__always)
    static func find(_ key: String, in names: UnsafeBufferPointer<String>, from guess: Int) -> Int? {
        if guess < names.count, sameBits(key, names[guess]) { return guess }
        for index in 0..<names.count where sameBits(key, names[index]) { return index }
        for index in 0..<names.count where String.sameBytes(key, names[index]) { return index }
        return nil
    }

    /// Whether `text` is the same bytes as `declared`, as Lua compares strings.
    @inline(__always)
    static func same(_ text: String, _ declared: String) -> Bool {
        sameBits(text, declared) || String.sameBytes(text, declared)
    }

    /// Whether two strings are the same value bit for bit: then they are the same bytes. A string of at most 15
    /// bytes is kept within its own bits, so two such strings of the same bytes have the same bits — a key, a tag,
    /// a `type` is compared so in two integer comparisons. Different bits say nothing (two copies of a long
    /// string): `String.sameBytes` decides.
    @inline(__always)
    static func sameBits(_ first: String, _ second: String) -> Bool {
        withUnsafeBytes(of: first) { a in
            withUnsafeBytes(of: second) { b in
                a.loadUnaligned(as: UInt64.self) == b.loadUnaligned(as: UInt64.self)
                    && a.loadUnaligned(fromByteOffset: 8, as: UInt64.self) == b.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            }
        }
    }
}
