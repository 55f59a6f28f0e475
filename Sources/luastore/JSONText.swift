import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting

/// Lua values as JSON text, and JSON text as Lua values.
///
/// A table whose keys are exactly `1...n` (n ≥ 1) is an array; any other table is an object with its keys
/// sorted (non-string keys written as their decimal or `true`/`false` form); an empty table is `{}`; integers
/// print as integers. NaN and infinities cannot be represented and are an error naming the path.
enum JSONText {
    struct Unrepresentable: Error, CustomStringConvertible {
        let path: String
        let reason: String
        var description: String { "\(path): \(reason)" }
    }

    static func encode(_ value: LuaValue, root: String = "props") throws -> String {
        var output = ""
        try write(value, path: root, into: &output)
        return output
    }

    private static func write(_ value: LuaValue, path: String, into output: inout String) throws {
        switch value {
        case .nil: output += "null"
        case .boolean(let flag): output += flag ? "true" : "false"
        case .integer(let integer): output += String(integer)
        case .number(let number):
            guard number.isFinite else { throw Unrepresentable(path: path, reason: "\(number) cannot be represented in JSON") }
            if number == number.rounded(), abs(number) < 1e15 {
                output += String(format: "%.1f", number)
            } else {
                output += "\(number)"
            }
        case .string(let text): quote(text, into: &output)
        case .table(let table):
            if table.fieldCount == 0, !table.array.isEmpty {
                output += "["
                for (index, element) in table.array.enumerated() {
                    if index > 0 { output += "," }
                    try write(element, path: "\(path)[\(index + 1)]", into: &output)
                }
                output += "]"
                return
            }
            var entries: [(String, LuaValue)] = table.array.enumerated().map { (String($0.offset + 1), $0.element) }
            table.forEachField { key, element in entries.append((key.text, element)) }
            entries.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
            output += "{"
            for (index, entry) in entries.enumerated() {
                if index > 0 { output += "," }
                quote(entry.0, into: &output)
                output += ":"
                try write(entry.1, path: "\(path).\(entry.0)", into: &output)
            }
            output += "}"
        }
    }

    static func quote(_ text: String, into output: inout String) {
        RecordingJSON.quote(text, into: &output)
    }

    /// Parses JSON text into a Lua value (`null` becomes `nil`).
    static func decode(_ text: String) throws -> LuaValue {
        LuaValue(json: try JSONValue(parsing: Data(text.utf8)))
    }
}
