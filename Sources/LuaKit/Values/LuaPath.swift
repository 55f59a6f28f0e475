/// The path of a value inside a converted structure, rendered as Lua source would name it:
/// `state.todos[3].title`, `props["first name"]`.
struct LuaPath {
    private var root: String
    private var components: [LuaKey] = []

    init(_ root: String) { self.root = root }

    mutating func push(_ key: LuaKey) { components.append(key) }
    mutating func pop() { components.removeLast() }

    var rendered: String {
        var text = root
        for key in components { text += Self.render(key) }
        return text
    }

    static func render(_ key: LuaKey) -> String {
        switch key {
        case .string(let name) where isIdentifier(name): ".\(name)"
        case .string(let name): "[\(quoted(name))]"
        case .integer(let index): "[\(index)]"
        case .number(let number): "[\(number)]"
        case .boolean(let flag): "[\(flag)]"
        }
    }

    /// `text` as a Lua string literal: `"say \"hi\"\n"`.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 32 || scalar.value == 127: result += "\\\(scalar.value)"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    static let keywords: Set<String> = [
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
        "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    ]

    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(48...57).contains(first), !keywords.contains(name) else { return false }
        return name.utf8.allSatisfy { $0 == 95 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
    }
}
