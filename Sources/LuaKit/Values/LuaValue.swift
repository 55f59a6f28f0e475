/// A Lua value that can cross into Swift: nil, a boolean, a number, a string or a table of those.
///
/// Functions, userdata and threads stay inside the VM; converting them is a `.conversion` error.
///
/// ```swift
/// let action: LuaValue = ["type": "todoAdded", "title": "Buy milk"]
/// let results = try vm.call(reduce, state, action)
/// ```
public enum LuaValue: Sendable, Hashable {
    /// `nil`.
    case `nil`
    /// `true` or `false`.
    case boolean(Bool)
    /// A Lua integer (64-bit).
    case integer(Int64)
    /// A Lua float.
    case number(Double)
    /// A string; Lua strings that are not valid UTF-8 are refused on conversion. Two strings are equal when they are
    /// the same bytes, as in Lua (not when they are equal as Unicode, as `String`s are).
    case string(String)
    /// A table.
    case table(LuaTable)

    public static func == (lhs: LuaValue, rhs: LuaValue) -> Bool {
        switch (lhs, rhs) {
        case (.nil, .nil): true
        case (.boolean(let a), .boolean(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): String.sameBytes(a, b)
        case (.table(let a), .table(let b)): a == b
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .nil: hasher.combine(0)
        case .boolean(let flag): hasher.combine(1); hasher.combine(flag)
        case .integer(let integer): hasher.combine(2); hasher.combine(integer)
        case .number(let number): hasher.combine(3); hasher.combine(number)
        case .string(let text): hasher.combine(4); text.hashBytes(into: &hasher)
        case .table(let table): hasher.combine(5); hasher.combine(table)
        }
    }

    /// The Lua type name (`"nil"`, `"boolean"`, `"number"`, `"string"`, `"table"`).
    public var typeName: String {
        switch self {
        case .nil: "nil"
        case .boolean: "boolean"
        case .integer, .number: "number"
        case .string: "string"
        case .table: "table"
        }
    }

    /// The table, when this is one.
    public var table: LuaTable? {
        if case .table(let table) = self { return table }
        return nil
    }

    /// The string, when this is one.
    public var string: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    /// The integer, when this is an integer or a float with an exact integer value.
    public var integer: Int64? {
        switch self {
        case .integer(let value): value
        case .number(let value): Int64(exactly: value)
        default: nil
        }
    }

    /// The number, when this is one.
    public var number: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .number(let value): value
        default: nil
        }
    }

    /// The boolean, when this is one.
    public var boolean: Bool? {
        if case .boolean(let value) = self { return value }
        return nil
    }

    /// `t[key]` for tables, `nil` otherwise. Setting writes the field of a table (`nil` removes it); setting a
    /// field of `nil` makes it a table of that field, so nested paths can be written at once
    /// (`state["todos"][1]["done"] = true`). Setting a field of a boolean, number or string is a programming
    /// error.
    public subscript(key: LuaKey) -> LuaValue {
        get { table?[key] ?? .nil }
        set {
            var table: LuaTable
            switch self {
            case .table(let kept): table = kept
            case .nil: table = LuaTable()
            default: preconditionFailure("cannot set field \(LuaPath.render(key)) of a \(typeName) value")
            }
            // `self` lets go of the table only after the switch (whose subject keeps a reference while it runs), so
            // that `table` is the only reference and its storage is changed in place, not copied.
            self = .nil
            table[key] = newValue
            self = .table(table)
        }
    }
}

/// A key of a Lua table that can cross into Swift. Keys are ordered: booleans, then numbers, then strings.
public enum LuaKey: Sendable, Hashable, Comparable {
    /// A boolean key.
    case boolean(Bool)
    /// An integer key (Lua stores float keys with integral values as integers).
    case integer(Int64)
    /// A float key (never NaN).
    case number(Double)
    /// A string key (the same key as another when they are the same bytes, as in Lua).
    case string(String)

    public static func == (lhs: LuaKey, rhs: LuaKey) -> Bool {
        switch (lhs, rhs) {
        case (.boolean(let a), .boolean(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): String.sameBytes(a, b)
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .boolean(let flag): hasher.combine(0); hasher.combine(flag)
        case .integer(let integer): hasher.combine(1); hasher.combine(integer)
        case .number(let number): hasher.combine(2); hasher.combine(number)
        case .string(let text): hasher.combine(3); text.hashBytes(into: &hasher)
        }
    }

    /// The key as text: a string as it is, a number or a boolean as Lua writes it (`3`, `2.5`, `true`).
    public var text: String {
        switch self {
        case .boolean(let flag): String(flag)
        case .integer(let integer): String(integer)
        case .number(let number): String(number)
        case .string(let string): string
        }
    }

    /// The key as a value.
    public var value: LuaValue {
        switch self {
        case .boolean(let value): .boolean(value)
        case .integer(let value): .integer(value)
        case .number(let value): .number(value)
        case .string(let value): .string(value)
        }
    }

    private var rank: Int {
        switch self {
        case .boolean: 0
        case .integer, .number: 1
        case .string: 2
        }
    }

    public static func < (lhs: LuaKey, rhs: LuaKey) -> Bool {
        switch (lhs, rhs) {
        case (.boolean(let a), .boolean(let b)): return !a && b
        case (.integer(let a), .integer(let b)): return a < b
        case (.string(let a), .string(let b)): return a.utf8.lexicographicallyPrecedes(b.utf8)
        case (.integer(let a), .number(let b)): return Double(a) < b
        case (.number(let a), .integer(let b)): return a < Double(b)
        case (.number(let a), .number(let b)): return a < b
        default: return lhs.rank < rhs.rank
        }
    }
}

extension LuaValue {
    /// About how many bytes the value holds in memory (its strings' bytes and a few words per value and per
    /// table entry): what bounds in bytes, such as the devtools' kept history, count. Costs the value's size.
    public var estimatedBytes: Int {
        switch self {
        case .nil, .boolean, .integer, .number: return 16
        case .string(let text): return 32 + text.utf8.count
        case .table(let table):
            var total = 64 + table.array.reduce(0) { $0 + $1.estimatedBytes }
            table.forEachField { key, value in total += 16 + key.value.estimatedBytes + value.estimatedBytes }
            return total
        }
    }
}

/// A Lua table as a Swift value: its sequence `1...n` in `array`, every other key in `fields`.
///
/// Equality and hashing are structural, so two tables with the same contents are equal. A table written as a
/// literal with string keys (an action: `["type": "add", "title": title]`), or read from the VM with a few string
/// keys (props, most tables of a state), keeps its few fields as a list of pairs until it is changed or its
/// `fields` dictionary is asked for: making one costs an allocation, not a dictionary's hashing, and it crosses
/// into the VM from the list (`forEachField`).
public struct LuaTable: Sendable, Hashable {
    /// Values at keys `1...array.count`, in order. None of them is `nil`.
    public var array: [LuaValue]

    /// The fields: a few string-keyed pairs (distinct keys, no `nil` value), or a dictionary.
    private enum Fields: Sendable {
        case pairs([(String, LuaValue)])
        case dictionary([LuaKey: LuaValue])
    }
    private var storage: Fields

    /// Tables written as literals with at most this many fields keep them as pairs.
    static let pairsLimit = 8

    /// Every key that is not part of `array`.
    public var fields: [LuaKey: LuaValue] {
        get {
            switch storage {
            case .dictionary(let fields): return fields
            case .pairs(let pairs):
                var fields = [LuaKey: LuaValue](minimumCapacity: pairs.count)
                for (key, value) in pairs { fields[.string(key)] = value }
                return fields
            }
        }
        set { storage = .dictionary(newValue) }
        // (`table.fields[key] = value` changes the dictionary in place: the storage lets go of it while it is
        // changed, so it is not copied whole for each field — which made reading an object of n members O(n²).)
        _modify {
            var fields = takeFields()
            defer { storage = .dictionary(fields) }
            yield &fields
        }
    }

    /// The fields as a dictionary, moved out: the storage is left empty until the caller puts them back, so the
    /// dictionary is held only by the caller, and changed in place.
    private mutating func takeFields() -> [LuaKey: LuaValue] {
        var fields: [LuaKey: LuaValue]
        switch storage {
        case .dictionary(let kept): fields = kept
        case .pairs: fields = self.fields
        }
        // (After the switch, whose subject keeps a reference while it runs.)
        storage = .dictionary([:])
        return fields
    }

    /// The fields, when the table keeps them as a few string-keyed pairs (distinct keys, no `nil` value; in no
    /// particular order), without copying them; `nil` when it keeps a dictionary.
    public var stringPairs: [(String, LuaValue)]? {
        if case .pairs(let pairs) = storage { return pairs }
        return nil
    }

    /// Calls `body` with the fields where they lie, when the table keeps them as a few string-keyed pairs
    /// (distinct keys, no `nil` value; in no particular order); `nil` when it keeps a dictionary. (Unlike
    /// `stringPairs`, nothing is copied or retained: a conversion of each action reads them so, and a contract's check.)
    package func withStringPairs<Result, Failure: Error>(
        _ body: (UnsafeBufferPointer<(String, LuaValue)>) throws(Failure) -> Result
    ) throws(Failure) -> Result? {
        guard case .pairs(let pairs) = storage else { return nil }
        return try pairs.withUnsafeBufferPointer(body)
    }

    /// Creates a table from a sequence part and other fields.
    public init(array: [LuaValue] = [], fields: [LuaKey: LuaValue] = [:]) {
        self.array = array
        self.storage = .dictionary(fields)
    }

    /// A table of a sequence and at most `pairsLimit` string-keyed fields, distinct and none `nil` (as a table
    /// read from the VM has them).
    init(array: [LuaValue], distinctPairs pairs: [(String, LuaValue)]) {
        self.array = array
        self.storage = .pairs(pairs)
    }

    /// A table of string-keyed fields (a decoded JSON object, say): a later pair of the same key replaces an
    /// earlier one, and a `nil` value leaves its key out. Up to `pairsLimit` of them are kept as the list itself:
    /// no dictionary is made or hashed.
    public init(stringFields elements: [(String, LuaValue)]) {
        self.init(literal: elements)
    }

    /// A table of string-keyed fields, as a literal writes it: a later pair of the same key replaces an earlier
    /// one, and a `nil` value leaves its key out.
    init(literal elements: [(String, LuaValue)]) {
        array = []
        guard elements.count <= Self.pairsLimit else {
            var fields = [LuaKey: LuaValue](minimumCapacity: elements.count)
            for (key, value) in elements {
                if case .nil = value { fields[.string(key)] = Optional.none } else { fields[.string(key)] = value }
            }
            storage = .dictionary(fields)
            return
        }
        // Usually the keys are distinct and no value is nil: then the literal's own array is kept (no copy).
        if Self.arePlain(elements) {
            storage = .pairs(elements)
            return
        }
        var pairs: [(String, LuaValue)] = []
        pairs.reserveCapacity(elements.count)
        for (key, value) in elements {
            if let earlier = pairs.firstIndex(where: { String.sameBytes($0.0, key) }) { pairs.remove(at: earlier) }
            if case .nil = value { continue }
            pairs.append((key, value))
        }
        storage = .pairs(pairs)
    }

    /// Whether a literal's (at most `pairsLimit`) pairs have distinct keys and no `nil` value. Each key's length
    /// and first eight bytes are read once (`KeyPrint`) and compared as integers; only two keys longer than eight
    /// bytes that agree on those are compared whole. (Comparing every pair's bytes was a third of what a
    /// dispatching thread spent on a four-field action.)
    private static func arePlain(_ elements: [(String, LuaValue)]) -> Bool {
        withUnsafeTemporaryAllocation(of: KeyPrint.self, capacity: pairsLimit) { prints in
            for index in elements.indices {
                if case .nil = elements[index].1 { return false }
                let print = KeyPrint(elements[index].0)
                for earlier in 0..<index where prints[earlier] == print {
                    if print.count <= 8 || String.sameBytes(elements[earlier].0, elements[index].0) { return false }
                }
                prints.initializeElement(at: index, to: print)
            }
            return true
        }
    }

    /// A string's length and its first (up to) eight bytes: two strings of at most eight bytes are the same bytes
    /// exactly when their prints are equal.
    private struct KeyPrint: Equatable {
        let count: Int
        let head: UInt64

        init(_ key: String) {
            count = key.utf8.count
            head = key.utf8.withContiguousStorageIfAvailable { Self.head(of: $0) } ?? Self.head(of: key.utf8)
        }

        private static func head(of bytes: some Collection<UInt8>) -> UInt64 {
            var head: UInt64 = 0
            for (index, byte) in bytes.prefix(8).enumerated() { head |= UInt64(byte) << (8 * UInt64(index)) }
            return head
        }
    }

    /// Number of entries.
    public var count: Int { array.count + fieldCount }

    /// Number of entries that are not part of `array`.
    public var fieldCount: Int {
        switch storage {
        case .dictionary(let fields): fields.count
        case .pairs(let pairs): pairs.count
        }
    }

    /// Whether the table has no entries.
    public var isEmpty: Bool { array.isEmpty && fieldCount == 0 }

    /// Calls `body` with each field that is not part of `array`, in no particular order, without making a
    /// dictionary of them.
    public func forEachField<Failure: Error>(_ body: (LuaKey, LuaValue) throws(Failure) -> Void) throws(Failure) {
        switch storage {
        case .dictionary(let fields):
            for (key, value) in fields { try body(key, value) }
        case .pairs(let pairs):
            for (key, value) in pairs { try body(.string(key), value) }
        }
    }

    /// Fields in key order (the array part is not included).
    public var sortedFields: [(key: LuaKey, value: LuaValue)] {
        var sorted: [(key: LuaKey, value: LuaValue)] = []
        sorted.reserveCapacity(fieldCount)
        forEachField { key, value in sorted.append((key, value)) }
        sorted.sort { $0.key < $1.key }
        return sorted
    }

    /// `t[key]`, or `nil`. Setting `nil` removes the entry; setting `array.count + 1` appends.
    public subscript(key: LuaKey) -> LuaValue {
        get {
            if case .integer(let index) = key, index >= 1, index <= array.count { return array[Int(index) - 1] }
            switch storage {
            case .dictionary(let fields):
                return fields[key] ?? .nil
            case .pairs(let pairs):
                guard case .string(let name) = key else { return .nil }
                return pairs.first { String.sameBytes($0.0, name) }?.1 ?? .nil
            }
        }
        set { set(key, newValue) }
    }

    /// `t.name`.
    public subscript(name: String) -> LuaValue {
        get { self[.string(name)] }
        set { self[.string(name)] = newValue }
    }

    public static func == (lhs: LuaTable, rhs: LuaTable) -> Bool {
        guard lhs.array == rhs.array, lhs.fieldCount == rhs.fieldCount else { return false }
        switch (lhs.storage, rhs.storage) {
        case (.dictionary(let left), .dictionary(let right)):
            return left == right
        case (.pairs(let left), .pairs(let right)):
            // Two tables read from Lua with the same keys usually list them in the same order (a props function's
            // table, action after action): then pair by pair, without a search per key.
            var position = 0
            while position < left.count, String.sameBytes(left[position].0, right[position].0) {
                guard left[position].1 == right[position].1 else { return false }
                position += 1
            }
            if position == left.count { return true }
        default:
            break
        }
        var same = true
        lhs.forEachField { key, value in
            if same, rhs[key] != value { same = false }
        }
        return same
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(array)
        // Order-independent, and the same whichever way the fields are kept.
        var fieldsHash = 0
        forEachField { key, value in
            var field = Hasher()
            field.combine(key)
            field.combine(value)
            fieldsHash = fieldsHash &+ field.finalize()
        }
        hasher.combine(fieldCount)
        hasher.combine(fieldsHash)
    }

    private mutating func set(_ key: LuaKey, _ value: LuaValue) {
        var fields = takeFields()
        defer { storage = .dictionary(fields) }
        if case .integer(let index) = key, index >= 1, index <= array.count + 1 {
            let position = Int(index) - 1
            if value == .nil {
                guard position < array.count else { return }
                // The sequence ends before the removed entry; what follows becomes ordinary fields.
                for (offset, moved) in array[(position + 1)...].enumerated() {
                    fields[.integer(Int64(position + 2 + offset))] = moved
                }
                array.removeSubrange(position...)
            } else if position < array.count {
                array[position] = value
            } else {
                array.append(value)
                fields[key] = nil
                var next = Int64(array.count + 1)
                while let following = fields.removeValue(forKey: .integer(next)) {
                    array.append(following)
                    next += 1
                }
            }
            return
        }
        // (Not `value == .nil ? nil : value`: LuaValue is a nil literal itself, so that stores `.nil`.)
        if value == .nil {
            fields[key] = Optional.none
        } else {
            fields[key] = value
        }
    }
}

extension LuaKey {
    /// The key a value is when used as a table key: strings, booleans, integers, and floats (those with an
    /// integral value become integers, as Lua stores them); `nil` for nil, NaN and tables.
    public init?(exactly value: LuaValue) {
        switch value {
        case .string(let text): self = .string(text)
        case .boolean(let flag): self = .boolean(flag)
        case .integer(let integer): self = .integer(integer)
        case .number(let number) where number.isNaN: return nil
        case .number(let number): self = Int64(exactly: number).map(LuaKey.integer) ?? .number(number)
        case .nil, .table: return nil
        }
    }
}
