extension LuaValue: ExpressibleByNilLiteral {
    public init(nilLiteral: ()) { self = .nil }
}

extension LuaValue: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .boolean(value) }
}

extension LuaValue: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) { self = .integer(value) }
}

extension LuaValue: ExpressibleByFloatLiteral {
    public init(floatLiteral value: Double) { self = .number(value) }
}

extension LuaValue: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
}

extension LuaValue: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: LuaValue...) {
        self = .table(LuaTable(array: elements))
    }
}

extension LuaValue: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, LuaValue)...) {
        self = .table(LuaTable(literal: elements))
    }
}

extension LuaKey: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
}

extension LuaKey: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) { self = .integer(value) }
}

extension LuaValue: CustomStringConvertible {
    /// Lua source that reads back as this value, keys in order: `{1, 2, done = true, ["a b"] = "x"}` (what
    /// messages show, and what a written spec holds).
    public var description: String {
        switch self {
        case .nil: return "nil"
        case .boolean(let value): return String(value)
        case .integer(let value): return value == .min ? "math.mininteger" : String(value)
        case .number(let value):
            if value.isNaN { return "(0/0)" }
            if value.isInfinite { return value < 0 ? "-math.huge" : "math.huge" }
            return String(value)
        case .string(let value): return LuaPath.quoted(value)
        case .table(let table):
            let items = table.array.map(\.description)
                + table.sortedFields.map { entry -> String in
                    if case .string(let name) = entry.key, LuaPath.isIdentifier(name) {
                        return "\(name) = \(entry.value)"
                    }
                    return "[\(entry.key.value)] = \(entry.value)"
                }
            return "{" + items.joined(separator: ", ") + "}"
        }
    }
}

/// A string with interpolations is a string value: `["type": "add", "title": "\(title)"]`.
extension LuaValue: ExpressibleByStringInterpolation {}

/// A string with interpolations is a string key: `state["items"]["c\(i)"]`.
extension LuaKey: ExpressibleByStringInterpolation {}

extension LuaValue {
    /// A string value (`["title": LuaValue(title)]` for a `String` variable).
    public init(_ value: String) { self = .string(value) }
    /// An integer value.
    public init(_ value: Int) { self = .integer(Int64(value)) }
    /// An integer value.
    public init(_ value: Int64) { self = .integer(value) }
    /// A number value (Lua's float).
    public init(_ value: Double) { self = .number(value) }
    /// A boolean value.
    public init(_ value: Bool) { self = .boolean(value) }
    /// A sequence: a table of `values` at 1, 2, ….
    public init(_ values: [LuaValue]) { self = .table(LuaTable(array: values)) }
    /// A table of string-keyed fields (a `nil` value leaves its key out).
    public init(_ fields: [String: LuaValue]) { self = .table(LuaTable(literal: Array(fields))) }
}
