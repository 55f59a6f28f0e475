/// Decodes `Decodable` Swift values from `LuaValue`s.
///
/// Integers must be exact: a float with a fraction, NaN or infinity, or a value out of the type's range is an
/// error, and every error names the path of the bad value (`state.todos[3].title`).
///
/// ```swift
/// struct Todo: Decodable { var title: String; var done: Bool }
/// let todos = try LuaDecoder().decode([Todo].self, from: value, root: "state.todos")
/// ```
public struct LuaDecoder: Sendable {
    /// Creates a decoder.
    public init() {}

    /// Decodes `type` from `value`; errors name paths starting at `root`.
    public func decode<T: Decodable>(_ type: T.Type, from value: LuaValue, root: String = "value") throws(LuaError) -> T {
        do {
            return try T(from: ValueDecoder(value: value, codingPath: []))
        } catch let error as DecodingError {
            throw Self.luaError(error, root: root)
        } catch let error as LuaError {
            throw error
        } catch {
            throw LuaError(.conversion, String(describing: error), path: root)
        }
    }

    static func luaError(_ error: DecodingError, root: String) -> LuaError {
        let (context, summary): (DecodingError.Context, String) = switch error {
        case .typeMismatch(let type, let context): (context, "expected \(type)")
        case .valueNotFound(let type, let context): (context, "expected \(type), found nil")
        case .keyNotFound(let key, let context): (context, "missing field '\(key.stringValue)'")
        case .dataCorrupted(let context): (context, "invalid value")
        @unknown default: (DecodingError.Context(codingPath: [], debugDescription: ""), "invalid value")
        }
        let keys = context.codingPath.map { key -> LuaKey in key.intValue.map { .integer(Int64($0 + 1)) } ?? .string(key.stringValue) }
        let detail = context.debugDescription.isEmpty ? summary : context.debugDescription
        return LuaError(.conversion, detail, path: LuaPath.render(root: root, keys: keys))
    }
}

private struct IndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String { String((intValue ?? 0) + 1) }
    init(_ index: Int) { intValue = index }
    init?(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}

private struct ValueDecoder: Decoder {
    let value: LuaValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func table() throws -> LuaTable {
        switch value {
        case .table(let table): return table
        default:
            throw DecodingError.typeMismatch(LuaTable.self, .init(codingPath: codingPath, debugDescription: "expected a table, found \(value.typeName)"))
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(KeyedContainer<Key>(table: try table(), codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let table = try table()
        guard table.fields.isEmpty else {
            throw DecodingError.typeMismatch([LuaValue].self, .init(codingPath: codingPath, debugDescription: "expected a sequence, found a table with other keys"))
        }
        return UnkeyedContainer(elements: table.array, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleValue(value: value, codingPath: codingPath) }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let table: LuaTable
    let codingPath: [any CodingKey]

    var allKeys: [Key] {
        table.fields.keys.compactMap { key in
            switch key {
            case .string(let name): Key(stringValue: name)
            case .integer(let index): Key(intValue: Int(index))
            default: nil
            }
        } + table.array.indices.compactMap { Key(intValue: $0 + 1) }
    }

    func lookup(_ key: Key) -> LuaValue {
        if let index = key.intValue, table.fields[.string(key.stringValue)] == nil { return table[.integer(Int64(index))] }
        return table[.string(key.stringValue)]
    }

    func contains(_ key: Key) -> Bool { lookup(key) != .nil }

    func decodeNil(forKey key: Key) throws -> Bool { lookup(key) == .nil }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let value = lookup(key)
        if value == .nil, !(T.self is any OptionalProtocol.Type) {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing field '\(key.stringValue)'"))
        }
        return try T(from: ValueDecoder(value: value, codingPath: codingPath + [key]))
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try ValueDecoder(value: lookup(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(value: lookup(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { ValueDecoder(value: .table(table), codingPath: codingPath) }

    func superDecoder(forKey key: Key) throws -> any Decoder { ValueDecoder(value: lookup(key), codingPath: codingPath + [key]) }
}

private protocol OptionalProtocol {}
extension Optional: OptionalProtocol {}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [LuaValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [LuaValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    mutating func next() throws -> ValueDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(LuaValue.self, .init(codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "the sequence has only \(elements.count) elements"))
        }
        defer { currentIndex += 1 }
        return ValueDecoder(value: elements[currentIndex], codingPath: codingPath + [IndexKey(currentIndex)])
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else { return true }
        if elements[currentIndex] == .nil {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: next()) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try next() }
}

private struct SingleValue: SingleValueDecodingContainer {
    let value: LuaValue
    let codingPath: [any CodingKey]

    func mismatch(_ type: Any.Type, _ detail: String? = nil) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: detail ?? "expected \(type), found \(value.typeName)"))
    }

    func decodeNil() -> Bool { value == .nil }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .boolean(let flag) = value else { throw mismatch(type) }
        return flag
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let text) = value else { throw mismatch(type) }
        return text
    }

    func decode(_ type: Double.Type) throws -> Double {
        guard let number = value.number else { throw mismatch(type) }
        return number
    }

    func decode(_ type: Float.Type) throws -> Float {
        guard let number = value.number else { throw mismatch(type) }
        return Float(number)
    }

    func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        switch value {
        case .integer(let integer):
            guard let exact = I(exactly: integer) else { throw mismatch(type, "\(integer) is out of range for \(type)") }
            return exact
        case .number(let number):
            guard number.isFinite else { throw mismatch(type, "\(number) is not a finite number, \(type) expected") }
            guard number.rounded(.towardZero) == number else { throw mismatch(type, "\(number) is not an integer, \(type) expected") }
            guard let exact = I(exactly: number) else { throw mismatch(type, "\(number) is out of range for \(type)") }
            return exact
        default:
            throw mismatch(type)
        }
    }

    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == LuaValue.self { return value as! T }
        return try T(from: ValueDecoder(value: value, codingPath: codingPath))
    }
}

extension LuaValue: Decodable {
    /// Decodes any JSON-like structure (from any decoder) as a Lua value.
    public init(from decoder: any Decoder) throws {
        if let container = try? decoder.singleValueContainer() {
            if container.decodeNil() { self = .nil; return }
            if let flag = try? container.decode(Bool.self) { self = .boolean(flag); return }
            if let integer = try? container.decode(Int64.self) { self = .integer(integer); return }
            if let number = try? container.decode(Double.self) { self = .number(number); return }
            if let text = try? container.decode(String.self) { self = .string(text); return }
        }
        if var sequence = try? decoder.unkeyedContainer() {
            var array: [LuaValue] = []
            while !sequence.isAtEnd { array.append(try sequence.decode(LuaValue.self)) }
            self = .table(LuaTable(array: array))
            return
        }
        let keyed = try decoder.container(keyedBy: AnyKey.self)
        var table = LuaTable()
        for key in keyed.allKeys { table[key.stringValue] = try keyed.decode(LuaValue.self, forKey: key) }
        self = .table(table)
    }
}

/// A coding key for any string.
struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { stringValue = String(intValue) }
}
