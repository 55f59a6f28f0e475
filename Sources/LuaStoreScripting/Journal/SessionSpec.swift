import Foundation
import LuaKit

/// A recorded session as a busted spec (`luastore replay APP REC --write-spec FILE`, the devtools' "Export spec"):
/// one test per recorded action, in order, each reducing its action from the state the recording had before it
/// and checking what it changed, its failure, and the props where they changed — through
/// `require("luastore.session")`, which `luastore test` provides.
public struct SessionSpec: Sendable {
    /// One recorded action and the props after it.
    public struct Step: Sendable {
        public var recorded: RecordingLine.RecordedAction
        /// The props after it, when they differed from the props before.
        public var props: LuaValue?

        public init(recorded: RecordingLine.RecordedAction, props: LuaValue?) {
            self.recorded = recorded
            self.props = props
        }

        /// The step of a journal entry of an action (nil for a reload's entry).
        public init?(entry: JournalEntry, props: LuaValue?) {
            guard case .action(let action) = entry.event else { return nil }
            recorded = RecordingLine.RecordedAction(sequence: entry.sequence, action: action,
                                                    changes: entry.failure == nil ? entry.changes : nil,
                                                    failure: entry.failure?.error.message)
            self.props = props
        }
    }

    /// What the spec's `describe` is named after (the recording's file name).
    public var name: String
    /// The digest of the scripts the session ran with.
    public var scripts: String
    /// The state before the first step.
    public var start: LuaValue
    public var steps: [Step] = []

    public init(name: String, scripts: String, start: LuaValue) {
        self.name = name
        self.scripts = scripts
        self.start = start
    }

    /// The spec's Lua source.
    public func text() throws(RecordingJSON.Malformed) -> String {
        var lines = [
            "-- Written by LuaStore from \(name) (\(steps.count) actions; scripts \(scripts)).",
            "-- Each test reduces one recorded action from the state the recording had before it and checks what it changed",
            "-- (and its failure, and the props where they changed). Run it with `luastore test`: when a script change alters",
            "-- what an action does, the test of that action fails naming it and the path.",
            "local app = require(\"app\")",
            "local session = require(\"luastore.session\")",
            "",
            "describe(\(LuaLiteral.render(.string(name))), function()",
            "  local state = session.state(\(LuaLiteral.render(start)))",
        ]
        for step in steps {
            let recorded = step.recorded
            let name = "action \(recorded.sequence): \(LuaLiteral.render(recorded.action, limit: 80))"
            var expected: [String] = []
            if let failure = recorded.failure {
                expected.append("failure = \(LuaLiteral.render(.string(failure)))")
            } else {
                let changes = try recorded.readChanges() ?? []
                let items = changes.map { change -> String in
                    let path = LuaLiteral.render(.table(LuaTable(array: change.path.map(\.value))))
                    return change.value.map { "{ \(path), \(LuaLiteral.render($0)) }" } ?? "{ \(path) }"
                }
                expected.append("changes = { " + items.joined(separator: ", ") + (items.isEmpty ? "}" : " }"))
            }
            if let props = step.props { expected.append("props = \(LuaLiteral.render(props))") }
            lines += [
                "",
                "  it(\(LuaLiteral.render(.string(name))), function()",
                "    session.step(app, state, \(recorded.sequence), \(LuaLiteral.render(recorded.action)), {",
            ] + expected.map { "      \($0)," } + [
                "    })",
                "  end)",
            ]
        }
        lines.append("end)")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Lua source for a value: a literal that reads back as the same value (`{1, 2, done = true, ["a b"] = "x"}`).
enum LuaLiteral {
    /// `limit`: at most this many characters (a name for a test), cut with `…`.
    static func render(_ value: LuaValue, limit: Int = .max) -> String {
        var text = ""
        write(value, into: &text)
        guard text.count > limit else { return text }
        return String(text.prefix(limit - 1)) + "…"
    }

    private static func write(_ value: LuaValue, into text: inout String) {
        switch value {
        case .nil: text += "nil"
        case .boolean(let flag): text += flag ? "true" : "false"
        case .integer(let number): text += number == .min ? "math.mininteger" : String(number)
        case .number(let number):
            if number.isNaN { text += "(0/0)" } else if number.isInfinite { text += number < 0 ? "-math.huge" : "math.huge" } else {
                let written = "\(number)"
                text += written.contains(where: { $0 == "." || $0 == "e" || $0 == "n" }) ? written : written + ".0"
            }
        case .string(let string): quote(string, into: &text)
        case .table(let table):
            text += "{"
            var first = true
            func separate() { if !first { text += ", " }; first = false }
            for item in table.array {
                separate()
                write(item, into: &text)
            }
            for (key, item) in table.sortedFields {
                separate()
                if case .string(let name) = key, LuaPath.isIdentifier(name) {
                    text += name
                } else {
                    text += "["
                    write(key.value, into: &text)
                    text += "]"
                }
                text += " = "
                write(item, into: &text)
            }
            text += "}"
        }
    }

    /// A Lua string literal of `string`: control characters as 3-digit decimal escapes, the rest as it is.
    private static func quote(_ string: String, into text: inout String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case _ where scalar.value < 32 || scalar.value == 127: text += "\\" + String(format: "%03d", scalar.value)
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}
