import Foundation
import LuaKit

/// Reads actions typed by people or written in files.
///
/// A line starting with `{` is a JSON object with a string `type`. Any other line is the short form: the
/// type, then `key=value` pairs, where a value is a "quoted string", a number, `true`, `false`, or a bare word
/// (a string): `add title="Buy milk" priority=2 done=false`.
enum ActionParser {
    struct Malformed: Error, CustomStringConvertible {
        let reason: String
        var description: String { reason }
    }

    static func parse(_ line: String, allowShortForm: Bool) throws -> LuaValue {
        var line = line
        return try line.withUTF8 { try parse(UnsafeRawBufferPointer($0), allowShortForm: allowShortForm) }
    }

    /// An action from a line's bytes (without its line break).
    static func parse(_ line: UnsafeRawBufferPointer, allowShortForm: Bool) throws -> LuaValue {
        var start = 0
        while start < line.count, line[start] == 0x20 || line[start] == 0x09 { start += 1 }
        if !allowShortForm || (start < line.count && line[start] == UInt8(ascii: "{")) {
            let value: LuaValue
            do {
                value = try LuaJSON.parse(line)
            } catch {
                throw Malformed(reason: error.description)
            }
            guard let table = value.table, table.fields.isEmpty == false || table.array.isEmpty else {
                throw Malformed(reason: "an action must be a JSON object, not \(Self.jsonKind(of: value))")
            }
            guard table.fields["type"]?.string != nil else { throw Malformed(reason: "an action needs a string \"type\"") }
            return value
        }
        guard let text = String(utf8: line) else { throw Malformed(reason: "the line is not valid UTF-8") }
        // (A line that is JSON — `42`, `null`, `[1]`, `"add"` — is taken as JSON, which an action is not: the short
        // form is for words.)
        if let value = try? LuaJSON.parse(line) {
            throw Malformed(reason: "an action must be a JSON object or the short form `type key=value …`, not \(jsonKind(of: value))")
        }
        return try parseShortForm(text.trimmingCharacters(in: .whitespaces))
    }

    /// What a JSON value that is not an object is, in JSON's words: `JSON null`, `a JSON array`, `a JSON number`, …
    static func jsonKind(of value: LuaValue) -> String {
        switch value {
        case .nil: "JSON null"
        case .table: "a JSON array"
        default: "a JSON " + value.typeName
        }
    }

    static func parseShortForm(_ line: String) throws -> LuaValue {
        var tokens = try tokenize(line)
        guard !tokens.isEmpty else { throw Malformed(reason: "empty action") }
        let type = tokens.removeFirst()
        guard type.quoted == false, !type.text.contains("=") else { throw Malformed(reason: "an action starts with its type") }
        var table = LuaTable()
        table["type"] = .string(type.text)
        for token in tokens {
            guard !token.quoted, let equals = token.text.firstIndex(of: "=") else {
                throw Malformed(reason: "'\(token.text)' is not key=value")
            }
            let key = String(token.text[..<equals])
            guard !key.isEmpty else { throw Malformed(reason: "'\(token.text)' has no key") }
            table[key] = value(of: String(token.text[token.text.index(after: equals)...]), quoted: token.valueQuoted)
        }
        return .table(table)
    }

    private static func value(of text: String, quoted: Bool) -> LuaValue {
        if quoted { return .string(text) }
        if let integer = Int64(text) { return .integer(integer) }
        if let number = Double(text), number.isFinite { return .number(number) }
        switch text {
        case "true": return true
        case "false": return false
        default: return .string(text)
        }
    }

    private struct Token {
        var text = ""
        var quoted = false
        var valueQuoted = false
    }

    private static func tokenize(_ line: String) throws -> [Token] {
        var tokens: [Token] = []
        var current: Token?
        var inQuotes = false
        var escaped = false
        for character in line {
            if inQuotes {
                if escaped {
                    current!.text.append(character == "n" ? "\n" : character == "t" ? "\t" : character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    inQuotes = false
                } else {
                    current!.text.append(character)
                }
                continue
            }
            if character == " " || character == "\t" {
                if let token = current { tokens.append(token) }
                current = nil
            } else if character == "\"" {
                if current == nil { current = Token(quoted: true) } else { current!.valueQuoted = true }
                inQuotes = true
            } else {
                if current == nil { current = Token() }
                current!.text.append(character)
            }
        }
        guard !inQuotes else { throw Malformed(reason: "unterminated quoted string") }
        if let token = current { tokens.append(token) }
        return tokens
    }
}
