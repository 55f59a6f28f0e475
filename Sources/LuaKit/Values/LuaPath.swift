/// A conversion that failed: the message and the keys from the bad value up to the root, collected while the
/// failure unwinds (so a conversion that succeeds builds no path at all).
struct ConversionFailure: Error {
    var message: String
    var keysFromLeaf: [LuaKey] = []

    init(_ message: String) { self.message = message }

    /// This failure, one level further from the bad value.
    func under(_ key: LuaKey) -> ConversionFailure {
        var copy = self
        copy.keysFromLeaf.append(key)
        return copy
    }

    /// The failure as a `LuaError` naming the path from `root`: `state.todos[3].title`.
    func error(root: String) -> LuaError {
        LuaError(.conversion, message, path: LuaPath.render(root: root, keys: keysFromLeaf.reversed()))
    }
}

/// Renders the path of a value inside a structure as Lua source would name it: `state.todos[3].title`,
/// `props["first name"]`, `state["end"]` (keywords and other non-identifiers are quoted and escaped). The one
/// renderer of paths: conversion errors, selectors and the tools all name values with it.
public enum LuaPath {
    /// `root` followed by each key: `LuaPath.render(root: "state", keys: ["todos", 3])` is `state.todos[3]`.
    public static func render(root: String, keys: some Sequence<LuaKey>) -> String {
        keys.reduce(root) { $0 + render($1) }
    }

    /// One step of a path: `.title`, `[3]`, `["first name"]`.
    public static func render(_ key: LuaKey) -> String {
        switch key {
        case .string(let name) where isIdentifier(name): ".\(name)"
        case .string(let name): "[\(quoted(name))]"
        case .integer(let index): "[\(index)]"
        case .number(let number): "[\(number)]"
        case .boolean(let flag): "[\(flag)]"
        }
    }

    /// `text` as a Lua string literal: `"say \"hi\"\n"` (other control characters as `\ddd`).
    package static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 32 || scalar.value == 127: // (three digits: a digit after it is not read into it)
                result += "\\" + String(repeating: "0", count: 3 - String(scalar.value).count) + String(scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    static let keywords: Set<String> = [
        "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
        "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    ]

    /// The keys of a path as people write it — what `render` writes (`state.todos[3].title`, `["first name"]`,
    /// `[true]`), and the dotted shorthand (`todos.3.done`: a whole number is an index) — with or without the
    /// leading `root`; nil when it is not a path (an unclosed bracket or quote, an empty step).
    public static func parse(_ text: String, root: String = "state") -> [LuaKey]? {
        var rest = Substring(text)
        if rest == root { return [] }
        if rest.hasPrefix(root + ".") || rest.hasPrefix(root + "[") { rest = rest.dropFirst(root.count) }
        var keys: [LuaKey] = []
        func name(_ part: Substring) -> LuaKey? {
            guard !part.isEmpty else { return nil }
            if let index = Int64(part) { return .integer(index) }
            return .string(String(part))
        }
        var first = true
        while !rest.isEmpty {
            if rest.hasPrefix("[") {
                rest = rest.dropFirst()
                if rest.hasPrefix("\"") {
                    guard let (string, after) = unquoted(rest) else { return nil }
                    keys.append(.string(string))
                    rest = after
                } else {
                    let inside = rest.prefix { $0 != "]" }
                    rest = rest.dropFirst(inside.count)
                    switch inside {
                    case "true": keys.append(.boolean(true))
                    case "false": keys.append(.boolean(false))
                    default:
                        if let index = Int64(inside) { keys.append(.integer(index)) } else if let number = Double(inside), number.isFinite {
                            keys.append(.number(number))
                        } else { return nil }
                    }
                }
                guard rest.hasPrefix("]") else { return nil }
                rest = rest.dropFirst()
            } else {
                if rest.hasPrefix(".") { rest = rest.dropFirst() } else if !first { return nil }
                let part = rest.prefix { $0 != "." && $0 != "[" }
                guard let key = name(part) else { return nil }
                keys.append(key)
                rest = rest.dropFirst(part.count)
            }
            first = false
        }
        return keys
    }

    /// A Lua string literal at the start of `text` (as `quoted` writes it), and what follows it.
    private static func unquoted(_ text: Substring) -> (String, Substring)? {
        var scalars = text.unicodeScalars.dropFirst() // (the opening quote)
        var result = String.UnicodeScalarView()
        while let scalar = scalars.first {
            scalars = scalars.dropFirst()
            switch scalar {
            case "\"": return (String(result), Substring(scalars))
            case "\\":
                guard let escaped = scalars.first else { return nil }
                scalars = scalars.dropFirst()
                switch escaped {
                case "n": result.append("\n")
                case "r": result.append("\r")
                case "t": result.append("\t")
                case "0"..."9":
                    var digits = String(escaped)
                    while digits.count < 3, let next = scalars.first, ("0"..."9").contains(next) {
                        digits.unicodeScalars.append(next)
                        scalars = scalars.dropFirst()
                    }
                    guard let value = UInt32(digits), value < 256, let decoded = Unicode.Scalar(value) else { return nil }
                    result.append(decoded)
                default: result.append(escaped)
                }
            default: result.append(scalar)
            }
        }
        return nil
    }

    /// Whether `name` can stand in Lua source as a name (`t.name`): an identifier that is not a keyword.
    public static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(48...57).contains(first), !keywords.contains(name) else { return false }
        return name.utf8.allSatisfy { $0 == 95 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
    }
}
