import LuaKit

/// Props as text for people: one `key: value` per line, nested tables indented, lists as `- ` items.
enum TextRenderer {
    static func render(_ value: LuaValue) -> String {
        var lines: [String] = []
        write(value, indent: "", into: &lines)
        return lines.joined(separator: "\n")
    }

    private static func scalar(_ value: LuaValue) -> String? {
        switch value {
        case .nil: "nil"
        case .boolean(let flag): String(flag)
        case .integer(let integer): String(integer)
        case .number(let number): String(number)
        case .string(let text): text.contains("\n") || text.isEmpty ? String(reflecting: text) : text
        case .table(let table): table.isEmpty ? "{}" : nil
        }
    }

    private static func write(_ value: LuaValue, indent: String, into lines: inout [String]) {
        guard let table = value.table else {
            lines.append(indent + (scalar(value) ?? ""))
            return
        }
        for element in table.array {
            if let text = scalar(element) {
                lines.append(indent + "- " + text)
            } else {
                lines.append(indent + "-")
                write(element, indent: indent + "  ", into: &lines)
            }
        }
        for (key, element) in table.sortedFields {
            let name = key.text
            if let text = scalar(element) {
                lines.append(indent + name + ": " + text)
            } else {
                lines.append(indent + name + ":")
                write(element, indent: indent + "  ", into: &lines)
            }
        }
    }
}
