import Foundation
import LuaKit

/// Lua values as JSON text for the CLI's output (`--format json`, `--state-out`, reports): LuaKit's one plain-JSON
/// writer (`LuaJSON.encode`), whose rules say how tables, integers and floats are written.
enum JSONText {
    static func encode(_ value: LuaValue, root: String = "props") throws -> String {
        try LuaJSON.encode(value, root: root)
    }

    /// Parses JSON text into a Lua value (`null` becomes `nil`).
    static func decode(_ text: String) throws -> LuaValue {
        try LuaJSON.parse(text)
    }
}
