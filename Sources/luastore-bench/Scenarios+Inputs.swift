import Foundation

/// Reading input is linear in its size in every dimension: the built `luastore` given an input, and the same
/// input 10× larger in one dimension (more members, deeper nesting, longer strings, longer arrays, a longer
/// recording), costs at most 12× as much. Each cost is a run's time less a run of the same app on no input (the
/// process's start and the app's load), measured in alternated rounds, medians.
extension Scenarios {
    /// Counts the actions; never keeps one (the rows measure reading and converting, not storing).
    static let countingActionsApp = """
        local app = {}
        function app.init() return { seen = 0 } end
        function app.reduce(state, action) state.seen = state.seen + 1 end
        function app.props(state) return { seen = state.seen } end
        return app
        """

    func inputs() async throws -> [Scenario] {
        guard let luastore = luastoreBinary else { return [] }
        let scale = quick ? 1 : 10
        let rounds = quick ? 1 : 3
        let counting = try app("inputs", Self.countingActionsApp)
        let empty = try actionsFile("inputs-empty.jsonl", count: 0) { _ in "" }

        /// A file of `lines` actions, each made of `size` units by `body`.
        func file(_ name: String, lines: Int, size: Int, _ body: (Int) -> String) throws -> String {
            let line = #"{"type":"read","body":"# + body(size) + "}"
            return try actionsFile(name, count: lines) { _ in line }
        }
        let shapes: [(name: String, lines: Int, base: Int, body: (Int) -> String)] = [
            ("keys", 10, 2_000 * scale, { size in "{" + (0..<size).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}" }),
            ("array", 10, 2_000 * scale, { size in "[" + (0..<size).map(String.init).joined(separator: ",") + "]" }),
            ("string", 10, 50_000 * scale, { size in "\"" + String(repeating: "abcdefgh", count: size / 8) + "\"" }),
            // (Depth is bounded at 200 levels: 18 and 180.)
            ("depth", 2_000 * scale, 18, { size in String(repeating: #"{"a":"#, count: size) + "1" + String(repeating: "}", count: size) }),
        ]
        var rows: [Scenario] = []
        for shape in shapes {
            let small = try file("inputs-\(shape.name)-1.jsonl", lines: shape.lines, size: shape.base, shape.body)
            let large = try file("inputs-\(shape.name)-10.jsonl", lines: shape.lines, size: shape.base * 10, shape.body)
            let ratio = try await growth(luastore, rounds: rounds,
                                         none: ["run", counting.path, "--actions", empty, "--format", "json"],
                                         small: ["run", counting.path, "--actions", small, "--format", "json"],
                                         large: ["run", counting.path, "--actions", large, "--format", "json"])
            guard shape.name == "keys", let floor = try await keysFloorGrowth(members: shape.base, rounds: rounds) else {
                rows.append(Scenario(name: "input.\(shape.name)_10x_cost_ratio", value: ratio, unit: "×", goal: "≤ 12", pass: ratio <= 12))
                continue
            }
            // A table of 10× the keys outgrows the processor's caches: every lookup of a key (in Lua's string table,
            // in the table being filled) then waits for memory, in stock Lua as here. Linear means growing as
            // stock Lua's own tables do, when that is more than 12×.
            rows.append(Scenario(name: "input.keys_10x_cost_ratio", value: ratio, unit: "×", goal: "≤ max(12, floor)",
                                 pass: ratio <= max(12, floor)))
            rows.append(Scenario(name: "input.keys_10x_floor_ratio", value: floor, unit: "×", goal: "—", pass: nil))
        }
        // A recording, and one 10× as long: `luastore replay` reads and compares every entry.
        let actions = 2_000 * scale
        var recordings: [String] = []
        for (name, count) in [("1", actions), ("10", actions * 10)] {
            let lines = try actionsFile("inputs-session-\(name)-actions.jsonl", count: count) { index in
                #"{"type":"read","body":{"n":\#(index),"note":"entry \#(index)"}}"#
            }
            let recording = workspace.appendingPathComponent("inputs-session-\(name).jsonl").path
            _ = try timeLuastore(luastore, ["run", counting.path, "--actions", lines, "--format", "json", "--record", recording])
            recordings.append(recording)
        }
        let emptyRecording = workspace.appendingPathComponent("inputs-session-0.jsonl").path
        _ = try timeLuastore(luastore, ["run", counting.path, "--actions", empty, "--format", "json", "--record", emptyRecording])
        let replay = try await growth(luastore, rounds: rounds, none: ["replay", counting.path, emptyRecording],
                                      small: ["replay", counting.path, recordings[0]], large: ["replay", counting.path, recordings[1]])
        rows.append(Scenario(name: "input.recording_10x_cost_ratio", value: replay, unit: "×", goal: "≤ 12", pass: replay <= 12))
        return rows
    }

    /// The floor of `input.keys_10x_cost_ratio`: how many times as long stock `lua5.4` takes to fill 10 tables
    /// of 10 × `members` keys made anew (`"k" .. i`, as reading an action makes its member names) as 10 of
    /// `members`; nil where `lua5.4` is not installed (the row is left out, with a note).
    func keysFloorGrowth(members: Int, rounds: Int) async throws -> Double? {
        guard let stock = Self.stockLua else {
            FileHandle.standardError.write(Data("bench: lua5.4 is not installed; input.keys_10x_floor_ratio is left out\n".utf8))
            return nil
        }
        let script = workspace.appendingPathComponent("keys_floor.lua")
        try Data("""
            local n = tonumber(arg[1])
            local start = os.clock()
            for _ = 1, 10 do
              local t = {}
              for i = 0, n - 1 do t["k" .. i] = i end
            end
            print(os.clock() - start)
            """.utf8).write(to: script)
        func seconds(_ count: Int) throws -> Double {
            let output = try Self.output(of: stock, [script.path, String(count)])
            guard let value = Double(output.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw BenchFailure("keys_floor.lua printed \(output.debugDescription), not a number of seconds")
            }
            return value
        }
        return try await Harness.median(rounds: rounds) {
            let one = try seconds(members), ten = try seconds(members * 10)
            return max(ten, 1e-6) / max(one, 1e-6)
        }
    }

    /// How many times as much the `large` run's work costs as the `small` one's, each less the `none` run (the
    /// fixed cost of starting): median over `rounds` rounds (after one not counted), the three runs in turn.
    func growth(_ luastore: URL, rounds: Int, none: [String], small: [String], large: [String]) async throws -> Double {
        try await Harness.median(rounds: rounds) {
            let fixed = Harness.milliseconds(try timeLuastore(luastore, none))
            let one = Harness.milliseconds(try timeLuastore(luastore, small))
            let ten = Harness.milliseconds(try timeLuastore(luastore, large))
            return max(ten - fixed, 0.001) / max(one - fixed, 0.001)
        }
    }
}
