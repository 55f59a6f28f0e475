/// JSON written as it is built — objects field by field, arrays item by item — with its commas, quotes and escapes
/// made here rather than by hand (a server's answers: the devtools'). Strings are quoted as `LuaJSON.quote` quotes
/// them, floats written as `LuaJSON.encode` writes them; a fragment that is JSON already (a recording's line, a
/// value in the recording's lossless form) is placed as it is with `raw`.
///
///     var json = JSONWriter()
///     json.object { json in
///         json.field("app", name)
///         json.array("plugins", plugins) { json, plugin in json.value(plugin.key) }
///     }
public struct JSONWriter: Sendable {
    /// The JSON written so far.
    public var text: String { storage }
    @usableFromInline var storage = ""
    /// A value ends the text at this level: the next one needs a comma first.
    @usableFromInline var separated = false

    /// An empty writer: `text` is empty.
    public init() {}

    // (Inlinable: a server writes many fields per answer, and each specializes in its caller for the type it writes.)

    /// Writes an object whose fields `body` writes.
    @inlinable public mutating func object(_ body: (inout JSONWriter) throws -> Void) rethrows {
        open("{")
        try body(&self)
        close("}")
    }

    /// Writes an array of `items`, each written by `each`.
    @inlinable public mutating func array<Items: Sequence>(_ items: Items, _ each: (inout JSONWriter, Items.Element) throws -> Void) rethrows {
        open("[")
        for item in items { try each(&self, item) }
        close("]")
    }

    /// Writes a value.
    @inlinable public mutating func value(_ value: some JSONWritable) {
        separate()
        value.write(into: &storage)
        separated = true
    }

    /// Writes text that is JSON already, as it is.
    @inlinable public mutating func raw(_ json: String) {
        separate()
        storage += json
        separated = true
    }

    /// Writes a field of the object being written.
    @inlinable public mutating func field(_ name: String, _ value: some JSONWritable) {
        key(name)
        self.value(value)
    }

    /// Writes a field whose value is JSON already.
    @inlinable public mutating func field(_ name: String, raw json: String) {
        key(name)
        raw(json)
    }

    /// Writes a field whose value is an object.
    @inlinable public mutating func object(_ name: String, _ body: (inout JSONWriter) throws -> Void) rethrows {
        key(name)
        try object(body)
    }

    /// Writes a field whose value is an array.
    @inlinable public mutating func array<Items: Sequence>(_ name: String, _ items: Items,
                                                _ each: (inout JSONWriter, Items.Element) throws -> Void) rethrows {
        key(name)
        try array(items, each)
    }

    /// Writes a field's name: the next value written is its value.
    @inlinable public mutating func key(_ name: String) {
        separate()
        LuaJSON.quote(name, into: &storage)
        storage += ":"
        separated = false
    }

    @inlinable mutating func separate() {
        if separated { storage += "," }
    }

    @inlinable mutating func open(_ bracket: String) {
        separate()
        storage += bracket
        separated = false
    }

    @inlinable mutating func close(_ bracket: String) {
        storage += bracket
        separated = true
    }
}

/// A Swift value `JSONWriter` writes as a JSON scalar (an optional's nil as `null`).
public protocol JSONWritable {
    /// Appends this value to `text` as JSON.
    func write(into text: inout String)
}

extension String: JSONWritable {
    /// As a quoted JSON string, escaped as `LuaJSON.quote` escapes it.
    @inlinable public func write(into text: inout String) { LuaJSON.quote(self, into: &text) }
}

extension Bool: JSONWritable {
    /// As `true` or `false`.
    @inlinable public func write(into text: inout String) { text += self ? "true" : "false" }
}

extension Int: JSONWritable {
    /// As a decimal integer.
    @inlinable public func write(into text: inout String) { text += String(self) }
}

extension Int64: JSONWritable {
    /// As a decimal integer.
    @inlinable public func write(into text: inout String) { text += String(self) }
}

extension UInt64: JSONWritable {
    /// As a decimal integer.
    @inlinable public func write(into text: inout String) { text += String(self) }
}

extension Double: JSONWritable {
    /// As `LuaJSON.encode` writes a float (`2.0`); `null` for a number JSON cannot hold.
    @inlinable public func write(into text: inout String) { text += (try? LuaJSON.encode(.number(self))) ?? "null" }
}

extension Optional: JSONWritable where Wrapped: JSONWritable {
    /// As the wrapped value, or `null` for nil.
    @inlinable public func write(into text: inout String) {
        if let self { self.write(into: &text) } else { text += "null" }
    }
}
