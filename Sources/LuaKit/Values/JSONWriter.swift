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
    public private(set) var text = ""
    /// A value ends the text at this level: the next one needs a comma first.
    private var separated = false

    public init() {}

    /// Writes an object whose fields `body` writes.
    public mutating func object(_ body: (inout JSONWriter) throws -> Void) rethrows {
        open("{")
        try body(&self)
        close("}")
    }

    /// Writes an array of `items`, each written by `each`.
    public mutating func array<Items: Sequence>(_ items: Items, _ each: (inout JSONWriter, Items.Element) throws -> Void) rethrows {
        open("[")
        for item in items { try each(&self, item) }
        close("]")
    }

    /// Writes a value.
    public mutating func value(_ value: some JSONWritable) {
        separate()
        value.write(into: &text)
        separated = true
    }

    /// Writes text that is JSON already, as it is.
    public mutating func raw(_ json: String) {
        separate()
        text += json
        separated = true
    }

    /// Writes a field of the object being written.
    public mutating func field(_ name: String, _ value: some JSONWritable) {
        key(name)
        self.value(value)
    }

    /// Writes a field whose value is JSON already.
    public mutating func field(_ name: String, raw json: String) {
        key(name)
        raw(json)
    }

    /// Writes a field whose value is an object.
    public mutating func object(_ name: String, _ body: (inout JSONWriter) throws -> Void) rethrows {
        key(name)
        try object(body)
    }

    /// Writes a field whose value is an array.
    public mutating func array<Items: Sequence>(_ name: String, _ items: Items,
                                                _ each: (inout JSONWriter, Items.Element) throws -> Void) rethrows {
        key(name)
        try array(items, each)
    }

    /// Writes a field's name: the next value written is its value.
    public mutating func key(_ name: String) {
        separate()
        LuaJSON.quote(name, into: &text)
        text += ":"
        separated = false
    }

    private mutating func separate() {
        if separated { text += "," }
    }

    private mutating func open(_ bracket: String) {
        separate()
        text += bracket
        separated = false
    }

    private mutating func close(_ bracket: String) {
        text += bracket
        separated = true
    }
}

/// A Swift value `JSONWriter` writes as a JSON scalar (an optional's nil as `null`).
public protocol JSONWritable {
    func write(into text: inout String)
}

extension String: JSONWritable {
    public func write(into text: inout String) { LuaJSON.quote(self, into: &text) }
}

extension Bool: JSONWritable {
    public func write(into text: inout String) { text += self ? "true" : "false" }
}

extension Int: JSONWritable {
    public func write(into text: inout String) { text += String(self) }
}

extension Int64: JSONWritable {
    public func write(into text: inout String) { text += String(self) }
}

extension UInt64: JSONWritable {
    public func write(into text: inout String) { text += String(self) }
}

extension Double: JSONWritable {
    /// As `LuaJSON.encode` writes a float (`2.0`); `null` for a number JSON cannot hold.
    public func write(into text: inout String) { text += (try? LuaJSON.encode(.number(self))) ?? "null" }
}

extension Optional: JSONWritable where Wrapped: JSONWritable {
    public func write(into text: inout String) {
        if let self { self.write(into: &text) } else { text += "null" }
    }
}
