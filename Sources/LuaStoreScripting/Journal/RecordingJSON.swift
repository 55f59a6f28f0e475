import Foundation
import LuaKit
import LuaStoreCore

/// Recordings, format 5 (docs/recordings.md, "Recordings"): JSON Lines — a header (format, version, app, schema version, seq,
/// the scripts' digest, the store's clock, the initial state), then one line per journal entry (an action with its time,
/// its changes or its failure, a reload). Values are written losslessly in plain JSON: integers without a fraction or exponent,
/// floats always with one; a list `1..n` as an array, a table whose keys are all strings as an object, any other
/// table as `{"$map": [[key, value], …]}`; an empty table as `{}`.
public enum RecordingJSON {
    /// A value the format cannot hold (a number that is not finite, in an action from Swift).
    public struct Unrepresentable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Appends `value`, losslessly, as UTF-8.
    public static func encode(_ value: LuaValue, into output: inout [UInt8]) throws {
        switch value {
        case .nil: output.append(contentsOf: "null".utf8)
        case .boolean(let flag): output.append(contentsOf: flag ? "true".utf8 : "false".utf8)
        case .integer(let integer): appendInteger(integer, into: &output)
        case .number(let number):
            guard number.isFinite else { throw Unrepresentable(description: "\(number) cannot be recorded (not a finite number)") }
            output.append(contentsOf: number.description.utf8) // the shortest exact form, always with "." or "e"
        case .string(let text): quote(text, into: &output)
        case .table(let table):
            if table.fieldCount == 0, !table.array.isEmpty {
                output.append(UInt8(ascii: "["))
                for (index, element) in table.array.enumerated() {
                    if index > 0 { output.append(UInt8(ascii: ",")) }
                    try encode(element, into: &output)
                }
                output.append(UInt8(ascii: "]"))
            } else if table.array.isEmpty, let pairs = table.stringPairs, pairs.count > 1 || pairs.first?.0 != "$map" {
                try encodeObject(pairs, into: &output)
            } else if table.array.isEmpty, let fields = stringFields(of: table) {
                output.append(UInt8(ascii: "{"))
                for (index, entry) in fields.enumerated() {
                    if index > 0 { output.append(UInt8(ascii: ",")) }
                    quote(entry.key, into: &output)
                    output.append(UInt8(ascii: ":"))
                    try encode(entry.value, into: &output)
                }
                output.append(UInt8(ascii: "}"))
            } else {
                output.append(contentsOf: #"{"$map":["#.utf8)
                var first = true
                func pair(_ key: LuaValue, _ value: LuaValue) throws {
                    if !first { output.append(UInt8(ascii: ",")) }
                    first = false
                    output.append(UInt8(ascii: "["))
                    try encode(key, into: &output)
                    output.append(UInt8(ascii: ","))
                    try encode(value, into: &output)
                    output.append(UInt8(ascii: "]"))
                }
                for (index, element) in table.array.enumerated() { try pair(.integer(Int64(index + 1)), element) }
                for entry in table.sortedFields { try pair(entry.key.value, entry.value) }
                output.append(contentsOf: "]}".utf8)
            }
        }
    }

    /// Appends the pairs of a table that keeps them so (`LuaTable.stringPairs`: a few, distinct) as an object,
    /// keys in byte order, as `stringFields` would order them — sorting their positions, not a copy of them.
    static func encodeObject(_ pairs: [(String, LuaValue)], into output: inout [UInt8]) throws {
        output.append(UInt8(ascii: "{"))
        try withUnsafeTemporaryAllocation(of: Int.self, capacity: pairs.count) { order in
            for index in pairs.indices { // insertion sort: at most `LuaTable.pairsLimit` of them
                var slot = index
                while slot > 0, pairs[index].0.utf8.lexicographicallyPrecedes(pairs[order[slot - 1]].0.utf8) {
                    order[slot] = order[slot - 1]
                    slot -= 1
                }
                order[slot] = index
            }
            for slot in pairs.indices {
                if slot > 0 { output.append(UInt8(ascii: ",")) }
                let (key, value) = pairs[order[slot]]
                quote(key, into: &output)
                output.append(UInt8(ascii: ":"))
                try encode(value, into: &output)
            }
        }
        output.append(UInt8(ascii: "}"))
    }

    /// The fields of a table whose keys are all strings, in key order (one array, sorted in place: actions are
    /// encoded this way once per recorded entry); nil when a key is not a string, or the only key is "$map" (such
    /// a table is written as a map, so that it reads back as itself).
    static func stringFields(of table: LuaTable) -> [(key: String, value: LuaValue)]? {
        var fields: [(key: String, value: LuaValue)] = []
        fields.reserveCapacity(table.fieldCount)
        var allStrings = true
        table.forEachField { key, value in
            guard allStrings, case .string(let name) = key else {
                allStrings = false
                return
            }
            fields.append((name, value))
        }
        guard allStrings else { return nil }
        if fields.count == 1, fields[0].key == "$map" { return nil }
        if fields.count > 1 { fields.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) } }
        return fields
    }

    /// Appends `value`, losslessly.
    public static func encode(_ value: LuaValue, into output: inout String) throws {
        var bytes: [UInt8] = []
        try encode(value, into: &bytes)
        output += String(decoding: bytes, as: UTF8.self)
    }

    /// `value`, losslessly.
    public static func encode(_ value: LuaValue) throws -> String {
        var output = ""
        try encode(value, into: &output)
        return output
    }

    static func appendInteger(_ integer: Int64, into output: inout [UInt8]) {
        if integer < 0 {
            output.append(UInt8(ascii: "-"))
        }
        var magnitude = integer.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0) // up to 20 digits, filled from the end
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                count += 1
                buffer[24 - count] = UInt8(48 + magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            output.append(contentsOf: buffer[(24 - count)...])
        }
    }

    /// Appends `text` as a JSON string (LuaKit's escaping: `LuaJSON.quote`, the one JSON writer's).
    public static func quote(_ text: String, into output: inout [UInt8]) {
        LuaJSON.quote(text, into: &output)
    }

    /// Appends `text` as a JSON string. (The CLI quotes every string of every props line with this: a string
    /// with nothing to escape, the usual case, is appended as it is, without going through bytes.)
    public static func quote(_ text: String, into output: inout String) {
        LuaJSON.quote(text, into: &output)
    }

    /// A line or value that is not what the format says.
    public struct Malformed: Error, CustomStringConvertible {
        public let description: String
        /// The error saying `description`.
        public init(description: String) { self.description = description }
    }

    /// The value `json` encodes.
    public static func decode(_ json: RecordingJSON.Value) throws(Malformed) -> LuaValue {
        switch json {
        case .null: return .nil
        case .boolean(let flag): return .boolean(flag)
        case .integer(let integer): return .integer(integer)
        case .float(let number): return .number(number)
        case .string(let text): return .string(text)
        case .array(let items):
            var array: [LuaValue] = []
            for item in items { array.append(try decode(item)) }
            return .table(LuaTable(array: array))
        case .object(let fields):
            if fields.count == 1, case .array(let pairs)? = fields["$map"] {
                var table = LuaTable()
                var keys = Set<LuaKey>()
                for pair in pairs {
                    guard case .array(let parts) = pair, parts.count == 2, let key = LuaKey(exactly: try decode(parts[0])) else {
                        throw Malformed(description: "a $map entry must be [key, value] with a string, number or boolean key")
                    }
                    // (A key given twice: which value counts is anybody's guess, as with a name given twice.)
                    guard keys.insert(key).inserted else {
                        throw Malformed(description: "the key \(key.value) appears twice in one $map")
                    }
                    table[key] = try decode(parts[1])
                }
                return .table(table)
            }
            var pairs: [(String, LuaValue)] = []
            pairs.reserveCapacity(fields.count)
            for (key, item) in fields { pairs.append((key.text, try decode(item))) }
            return .table(LuaTable(stringFields: pairs))
        }
    }

    /// The value a JSON text encodes.
    public static func decode(text: Substring) throws(Malformed) -> LuaValue {
        try decode(try RecordingJSON.Value(parsing: text))
    }
}
