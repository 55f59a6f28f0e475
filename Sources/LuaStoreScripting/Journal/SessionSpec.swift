import Foundation
import LuaKit

/// A recorded session as a busted spec (`luastore replay APP REC --write-spec FILE`, the devtools' "Export spec"):
/// one test per recorded action, in order, each sending its action to a store of the app's from the state the
/// recording had before it and checking what it changed, its failure, and the props where they changed — through
/// `require("luastore.session")`, which `luastore test` provides.
public struct SessionSpec: Sendable {
    /// One recorded action and the props after it.
    public struct Step: Sendable {
        /// The action as recorded: what it was, and what it changed or why it failed.
        public var recorded: RecordingLine.RecordedAction
        /// The props after it, when they differed from the props before.
        public var props: LuaValue?

        /// The step of `recorded`, with the props after it (nil: unchanged).
        public init(recorded: RecordingLine.RecordedAction, props: LuaValue?) {
            self.recorded = recorded
            self.props = props
        }

        /// The step of an action replayed (`Replayer.replay`).
        public init(_ step: Replayer.Step, props: LuaValue?) {
            recorded = RecordingLine.RecordedAction(sequence: step.sequence, action: step.action, changes: step.recorded.changes,
                                                    failure: step.recorded.failure, time: step.time, changesJSON: step.recorded.changesJSON)
            self.props = props
        }

        /// The step of a journal entry of an action (nil for a reload's entry).
        public init?(entry: JournalEntry, props: LuaValue?) {
            guard case .action(let action) = entry.event else { return nil }
            recorded = RecordingLine.RecordedAction(sequence: entry.sequence, action: action,
                                                    changes: entry.failure == nil ? entry.changes : nil,
                                                    failure: entry.failure?.error.message, time: entry.time)
            self.props = props
        }
    }

    /// What the spec's `describe` is named after (the recording's file name).
    public var name: String
    /// The digest of the scripts the session ran with.
    public var scripts: String
    /// The state before the first step.
    public var start: LuaValue
    /// Each action's time budget when the session was replayed (nil: the default of whoever runs the spec).
    public var timeBudget: Duration?
    /// The session's clock (nil: a recording older than format 4): each step's action runs at its recorded time.
    public var clock: RecordedClock?
    /// The tests' actions, one test each, in order.
    public var steps: [Step] = []

    /// A spec named `name` of the scripts `scripts` from the state `start`, with no steps yet.
    public init(name: String, scripts: String, start: LuaValue, timeBudget: Duration? = nil, clock: RecordedClock? = nil) {
        self.name = name
        self.scripts = scripts
        self.start = start
        self.timeBudget = timeBudget
        self.clock = clock
    }

    /// The spec's Lua source.
    public func text() throws(RecordingJSON.Malformed) -> String {
        var options: [String] = []
        if let budget = timeBudget {
            let milliseconds = Double(budget.components.seconds) * 1000 + Double(budget.components.attoseconds) / 1e15
            options.append("time_budget_ms = " + (milliseconds == milliseconds.rounded() ? String(Int64(milliseconds)) : String(milliseconds)))
        }
        if let clock {
            var fields = ["started = \(clock.started)"]
            if clock.utcOffsetSeconds != 0 { fields.append("utc_offset = \(clock.utcOffsetSeconds)") }
            if !clock.environment.isEmpty {
                fields.append("env = " + LuaValue.table(LuaTable(fields: Dictionary(uniqueKeysWithValues: clock.environment.map { (LuaKey.string($0.key), LuaValue.string($0.value)) }))).description)
            }
            options.append("clock = { " + fields.joined(separator: ", ") + " }")
        }
        let budgetOption = options.isEmpty ? "" : ", { " + options.joined(separator: ", ") + " }"
        var lines = [
            "-- Written by LuaStore from \(name) (\(steps.count) actions; scripts \(scripts)).",
            "-- Each test sends one recorded action to a store of the app's, from the state the recording had before it, and",
            "-- checks what it changed (and its failure, and the props where they changed). Run it with `luastore test`: when a",
            "-- script change alters what an action does, the test of that action fails naming it and the path.",
            "local app = require(\"app\")",
            "local session = require(\"luastore.session\")",
            "",
            "describe(\(LuaValue.string(name).description), function()",
            "  local state = session.state(\(start.description)\(budgetOption))",
        ]
        for step in steps {
            let recorded = step.recorded
            let name = "action \(recorded.sequence): \(Self.excerpt(recorded.action.description, limit: 80))"
            var expected: [String] = []
            if let failure = recorded.failure {
                expected.append("failure = \(LuaValue.string(failure).description)")
            } else {
                let changes = try recorded.readChanges() ?? []
                let items = changes.map { change -> String in
                    let path = LuaValue.table(LuaTable(array: change.path.map(\.value))).description
                    return change.value.map { "{ \(path), \($0.description) }" } ?? "{ \(path) }"
                }
                expected.append("changes = { " + items.joined(separator: ", ") + (items.isEmpty ? "}" : " }"))
            }
            if let props = step.props { expected.append("props = \(props.description)") }
            if let time = recorded.time { expected.append("time = \(time)") }
            lines += [
                "",
                "  it(\(LuaValue.string(name).description), function()",
                "    session.step(app, state, \(recorded.sequence), \(recorded.action.description), {",
            ] + expected.map { "      \($0)," } + [
                "    })",
                "  end)",
            ]
        }
        lines.append("end)")
        return lines.joined(separator: "\n") + "\n"
    }

    /// At most `limit` characters of `text` (a name for a test), cut with `…`.
    static func excerpt(_ text: String, limit: Int) -> String {
        text.count > limit ? String(text.prefix(limit - 1)) + "…" : text
    }
}
