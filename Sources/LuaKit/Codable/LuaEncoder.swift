/// Encodes `Encodable` Swift values as `LuaValue`s: structs and dictionaries with string keys become tables
/// with fields, arrays become sequences, `nil` leaves a field out.
///
/// ```swift
/// let action = try LuaEncoder().encode(TodoAdded(title: "Buy milk"))
/// ```
public struct LuaEncoder: Sendable {
    /// Creates an encoder.
    public init() {}

    /// Encodes `value`.
    public func encode<T: Encodable>(_ value: T) throws(LuaError) -> LuaValue {
        let root = Slot()
        do {
            try value.encode(to: ValueEncoder(slot: root, codingPath: []))
        } catch let error as EncodingError {
            if case .invalidValue(_, let context) = error {
                throw LuaError(.conversion, context.debugDescription, path: context.codingPath.map(\.stringValue).joined(separator: "."))
            }
            throw LuaError(.conversion, String(describing: error))
        } catch {
            throw LuaError(.conversion, String(describing: error))
        }
        return root.value
    }
}

/// A value under construction; containers fill it in as the encoder goes.
private final class Slot {
    enum Content {
        case value(LuaValue)
        case keyed([String: Slot])
        case unkeyed([Slot])
    }

    var content: Content = .value(.nil)

    var value: LuaValue {
        switch content {
        case .value(let value): return value
        case .keyed(let fields):
            var table = LuaTable()
            for (key, slot) in fields { table[key] = slot.value }
            return .table(table)
        case .unkeyed(let elements):
            return .table(LuaTable(array: elements.map(\.value)))
        }
    }
}

private struct ValueEncoder: Encoder {
    let slot: Slot
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .keyed = slot.content {} else { slot.content = .keyed([:]) }
        return KeyedEncodingContainer(KeyedContainer<Key>(slot: slot, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .unkeyed = slot.content {} else { slot.content = .unkeyed([]) }
        return UnkeyedContainer(slot: slot, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleValue(slot: slot, codingPath: codingPath) }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: Slot
    let codingPath: [any CodingKey]

    func child(_ key: Key) -> Slot {
        let child = Slot()
        if case .keyed(var fields) = slot.content {
            fields[key.stringValue] = child
            slot.content = .keyed(fields)
        }
        return child
    }

    mutating func encodeNil(forKey key: Key) throws {}

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try value.encode(to: ValueEncoder(slot: child(key), codingPath: codingPath + [key]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        ValueEncoder(slot: child(key), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        ValueEncoder(slot: child(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { ValueEncoder(slot: slot, codingPath: codingPath) }

    mutating func superEncoder(forKey key: Key) -> any Encoder { ValueEncoder(slot: child(key), codingPath: codingPath + [key]) }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]

    var count: Int {
        if case .unkeyed(let elements) = slot.content { return elements.count }
        return 0
    }

    func append() -> Slot {
        let child = Slot()
        if case .unkeyed(var elements) = slot.content {
            elements.append(child)
            slot.content = .unkeyed(elements)
        }
        return child
    }

    mutating func encodeNil() throws {
        throw EncodingError.invalidValue(Optional<Int>.none as Any, .init(codingPath: codingPath, debugDescription: "a Lua sequence cannot hold nil"))
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try value.encode(to: ValueEncoder(slot: append(), codingPath: codingPath + [AnyKey(String(count + 1))]))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        ValueEncoder(slot: append(), codingPath: codingPath).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        ValueEncoder(slot: append(), codingPath: codingPath).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { ValueEncoder(slot: append(), codingPath: codingPath) }
}

private struct SingleValue: SingleValueEncodingContainer {
    let slot: Slot
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.content = .value(.nil) }
    mutating func encode(_ value: Bool) throws { slot.content = .value(.boolean(value)) }
    mutating func encode(_ value: String) throws { slot.content = .value(.string(value)) }
    mutating func encode(_ value: Double) throws { slot.content = .value(.number(value)) }
    mutating func encode(_ value: Float) throws { slot.content = .value(.number(Double(value))) }
    mutating func encode(_ value: Int) throws { slot.content = .value(.integer(Int64(value))) }
    mutating func encode(_ value: Int8) throws { slot.content = .value(.integer(Int64(value))) }
    mutating func encode(_ value: Int16) throws { slot.content = .value(.integer(Int64(value))) }
    mutating func encode(_ value: Int32) throws { slot.content = .value(.integer(Int64(value))) }
    mutating func encode(_ value: Int64) throws { slot.content = .value(.integer(value)) }
    mutating func encode(_ value: UInt) throws { try encodeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { slot.content = .value(.integer(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { slot.content = .value(.integer(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { slot.content = .value(.integer(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { try encodeUnsigned(value) }

    mutating func encodeUnsigned(_ value: UInt64) throws {
        guard let integer = Int64(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "\(value) does not fit in a Lua integer"))
        }
        slot.content = .value(.integer(integer))
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        if let lua = value as? LuaValue {
            slot.content = .value(lua)
            return
        }
        try value.encode(to: ValueEncoder(slot: slot, codingPath: codingPath))
    }
}

extension LuaValue: Encodable {
    /// Encodes the value as the JSON-like structure it is (tables with a sequence part as arrays).
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .nil:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .boolean(let flag):
            var container = encoder.singleValueContainer()
            try container.encode(flag)
        case .integer(let integer):
            var container = encoder.singleValueContainer()
            try container.encode(integer)
        case .number(let number):
            var container = encoder.singleValueContainer()
            try container.encode(number)
        case .string(let text):
            var container = encoder.singleValueContainer()
            try container.encode(text)
        case .table(let table) where table.fieldCount == 0 && !table.array.isEmpty:
            var container = encoder.unkeyedContainer()
            for element in table.array { try container.encode(element) }
        case .table(let table):
            var container = encoder.container(keyedBy: AnyKey.self)
            for (index, element) in table.array.enumerated() { try container.encode(element, forKey: AnyKey(String(index + 1))) }
            for (key, element) in table.fields {
                try container.encode(element, forKey: AnyKey(key.text))
            }
        }
    }
}
