/// Lua values as JSON text — the one plain-JSON writer (`luastore run --format json`'s props, `--state-out`, the
/// data `save` keeps, reports), and `LuaJSON.parse` reads what it writes back as the same values.
///
/// A table whose keys are exactly `1...n` (n ≥ 1) is an array; any other table is an object with its keys sorted
/// (by their UTF-8 bytes; non-string keys written as their decimal or `true`/`false` form); an empty table is `{}`
/// (or `[]`, for a format whose empty tables are lists);
/// integers print as integers and floats with a fraction or exponent (`2.0`, not `2`), so a float stays a float
/// when it is read back. NaN and infinities cannot be represented and are an error naming the path.
extension LuaJSON {
    /// A value JSON cannot hold, and where.
    public struct Unrepresentable: Error, CustomStringConvertible {
        /// Where the value sits, from the root the caller named (`props.items[3]`).
        public let path: String
        /// Why it cannot be written (`inf cannot be represented in JSON`).
        public let reason: String
        public var description: String { "\(path): \(reason)" }
    }

    /// What an empty table is written as: Lua cannot tell an empty list from an empty record, so the writer of a
    /// format whose empty tables are all lists (busted's JSON report: `"pendings": []`) says so.
    public enum EmptyTable: Sendable {
        /// `{}` (the default).
        case object
        /// `[]`.
        case array
    }

    /// `value` as JSON text; `root` names it in errors (`props.items[3]`); `emptyTable` says how an empty table is
    /// written.
    public static func encode(_ value: LuaValue, root: String = "value", emptyTable: EmptyTable = .object) throws(Unrepresentable)
        -> String {
        var output = ""
        try write(value, path: root, emptyTable: emptyTable, into: &output)
        return output
    }

    private static func write(_ value: LuaValue, path: @autoclosure () -> String, emptyTable: EmptyTable,
                              into output: inout String) throws(Unrepresentable) {
        switch value {
        case .nil: output += "null"
        case .boolean(let flag): output += flag ? "true" : "false"
        case .integer(let integer): output += String(integer)
        case .number(let number):
            guard number.isFinite else { throw Unrepresentable(path: path(), reason: "\(number) cannot be represented in JSON") }
            if number == 0, number.sign == .minus {
                output += "-0.0"
            } else if number == number.rounded(), abs(number) < 1e15 {
                output += String(Int64(number)) + ".0"
            } else {
                output += "\(number)"
            }
        case .string(let text): quote(text, into: &output)
        case .table(let table):
            let base = path()
            if table.fieldCount == 0, !table.array.isEmpty || emptyTable == .array {
                output += "["
                for (index, element) in table.array.enumerated() {
                    if index > 0 { output += "," }
                    try write(element, path: "\(base)[\(index + 1)]", emptyTable: emptyTable, into: &output)
                }
                output += "]"
                return
            }
            var entries: [(name: String, key: LuaKey, value: LuaValue)] = table.array.enumerated().map {
                (String($0.offset + 1), .integer(Int64($0.offset + 1)), $0.element)
            }
            table.forEachField { key, element in entries.append((key.text, key, element)) }
            entries.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
            output += "{"
            for (index, entry) in entries.enumerated() {
                if index > 0 {
                    // Two keys one JSON name (`1` and `"1"`, `true` and `"true"`): a reader would keep one value.
                    if String.sameBytes(entries[index - 1].name, entry.name) {
                        // (The one that is not a string first: the same words whichever order the table kept them in.)
                        var pair = [entries[index - 1].key, entry.key]
                        if case .string = pair[0] { pair.swapAt(0, 1) }
                        throw Unrepresentable(path: base, reason: "its keys \(LuaPath.render(pair[0])) and "
                            + "\(LuaPath.render(pair[1])) are both the JSON name \"\(entry.name)\", which keeps one value")
                    }
                    output += ","
                }
                quote(entry.name, into: &output)
                output += ":"
                try write(entry.value, path: base + LuaPath.render(entry.key), emptyTable: emptyTable, into: &output)
            }
            output += "}"
        }
    }

    /// Whether a byte of a string must be escaped in JSON: a control character, `"` or `\`.
    static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Appends the last `digits` hexadecimal digits of `value` (lowercase, the most significant first), as UTF-8:
    /// a `\u00XX` escape's two, a recording line's 16-digit sum.
    public static func appendHex(_ value: UInt64, digits: Int, into output: inout [UInt8]) {
        for shift in stride(from: 4 * (digits - 1), through: 0, by: -4) {
            let digit = UInt8(truncatingIfNeeded: value >> UInt64(shift)) & 15
            output.append(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
        }
    }

    /// Appends `text` as a JSON string, as UTF-8 (runs without anything to escape are copied whole; a control
    /// character other than `\n`, `\r`, `\t` as `\u00XX`).
    public static func quote(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var run = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard needsEscape(byte) else { continue }
                output.append(contentsOf: bytes[run..<index])
                run = index + 1
                switch byte {
                case UInt8(ascii: "\""): output.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): output.append(contentsOf: #"\\"#.utf8)
                case UInt8(ascii: "\n"): output.append(contentsOf: #"\n"#.utf8)
                case UInt8(ascii: "\r"): output.append(contentsOf: #"\r"#.utf8)
                case UInt8(ascii: "\t"): output.append(contentsOf: #"\t"#.utf8)
                default:
                    output.append(contentsOf: #"\u00"#.utf8)
                    appendHex(UInt64(byte), digits: 2, into: &output)
                }
            }
            output.append(contentsOf: bytes[run...])
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Appends `text` as a JSON string (a string with nothing to escape, the usual case, is appended as it is).
    public static func quote(_ text: String, into output: inout String) {
        if !text.utf8.contains(where: needsEscape) {
            output += "\""
            output += text
            output += "\""
            return
        }
        var bytes: [UInt8] = []
        quote(text, into: &bytes)
        output += String(decoding: bytes, as: UTF8.self)
    }
}
