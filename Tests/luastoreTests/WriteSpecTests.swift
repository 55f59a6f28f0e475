import Foundation
import LuaStoreTestSupport
import Testing

/// `luastore replay APP REC --write-spec FILE`: a recorded session becomes a busted spec that `luastore test` runs,
/// one test per action; when a script change alters what an action does, its test fails naming the action and
/// the path.
@Suite struct WriteSpecTests {
    static let app = """
        local app = {}
        function app.init() return { count = 0, log = {} } end
        function app.reduce(state, action)
          if action.type == "increment" then
            state.count = state.count + (action.by or 1)
          elseif action.type == "note" then
            state.log[#state.log + 1] = action.text
          elseif action.type == "boom" then
            state.count = -1
            error("boom at " .. state.count)
          elseif action.type == "reset" then
            return { count = 0, log = {} }
          end
        end
        function app.props(state) return { count = state.count, notes = #state.log } end
        return app
        """

    @Test func aSessionBecomesASpecThatFailsWhereBehaviourChanged() async throws {
        let app = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: app) }
        let recording = app.appendingPathComponent("session.jsonl").path
        let actions = [
            #"{"type":"increment"}"#, #"{"type":"note","text":"caf\u00e9 \"quoted\"\n"}"#, #"{"type":"boom"}"#,
            #"{"type":"increment","by":4}"#, #"{"type":"unknown"}"#, #"{"type":"reset"}"#, #"{"type":"increment","by":2.5}"#,
        ]
        let run = try await CLI.run(["run", app.path, "--record", recording, "--format", "json"], input: actions.joined(separator: "\n") + "\n")
        #expect(run.status == 1, "the boom fails: \(run.errors)")
        let spec = app.appendingPathComponent("spec/session_spec.lua")
        let replay = try await CLI.run(["replay", app.path, recording, "--write-spec", spec.path])
        #expect(replay.status == 0, "\(replay.errors)")
        #expect(replay.output.hasSuffix("wrote \(spec.path): 7 tests (run them with `luastore test \(app.path)`)\n"), "\(replay.output)")
        let text = try String(contentsOf: spec, encoding: .utf8)
        #expect(text.contains(#"session.step(app, state, 3, {type = "boom"}, {"#))
        #expect(text.contains(#"failure = "boom at -1","#))
        #expect(text.contains(#"changes = { { {"log", 1}, "café \"quoted\"\n" } },"#), "\(text)")

        let passing = try await CLI.run(["test", app.path, "--output", "tap"])
        #expect(passing.status == 0, "\(passing.output)")
        #expect(passing.outputLines.filter { $0.hasPrefix("ok ") }.count == 7)

        try Self.app.replacingOccurrences(of: "(action.by or 1)", with: "(action.by or 2)")
            .write(to: app.appendingPathComponent("app.lua"), atomically: true, encoding: .utf8)
        let failing = try await CLI.run(["test", app.path])
        #expect(failing.status == 1)
        #expect(failing.output.contains(
            #"FAIL spec/session_spec.lua:"# ) && failing.output.contains(
            #"action 1 {type = "increment"}: state.count is 2; the recording says 1"#), "\(failing.output)")
        #expect(failing.output.hasSuffix("6 passed, 1 failed\n"), "each test starts from the recording: one action fails, not the rest")
    }

    /// A session whose reducers read the clock and the environment becomes a spec whose steps run at their recorded
    /// times, in the recorded zone and environment: it passes run after run, and fails where a script reads the
    /// clock differently.
    @Test func aSessionThatReadsTheClockBecomesASpecThatRunsAtItsTimes() async throws {
        let clockApp = """
            local app = {}
            function app.init() return { seen = {} } end
            function app.reduce(state, action)
              state.seen[#state.seen + 1] = os.date("%H:%M:%S", os.time()) .. " " .. os.getenv("REGION") .. " " .. os.clock()
            end
            function app.props(state) return { n = #state.seen } end
            return app
            """
        let app = try CLI.makeApp(clockApp)
        defer { try? FileManager.default.removeItem(at: app) }
        let recording = app.appendingPathComponent("session.jsonl").path
        let run = try await CLI.run(["run", app.path, "--record", recording, "--format", "json", "--utc-offset", "+01:00", "--env", "REGION=eu"],
                                    input: #"{"type":"look"}"# + "\n" + #"{"type":"look"}"# + "\n")
        #expect(run.status == 0, "\(run.errors)")
        let spec = app.appendingPathComponent("spec/session_spec.lua")
        let replay = try await CLI.run(["replay", app.path, recording, "--write-spec", spec.path])
        #expect(replay.status == 0, "\(replay.errors)")
        let text = try String(contentsOf: spec, encoding: .utf8)
        #expect(text.contains("clock = { started = ") && text.contains(#"utc_offset = 3600, env = {REGION = "eu"} }"#), "\(text)")
        #expect(text.contains("      time = "), "\(text)")
        for _ in 1...2 {
            let passing = try await CLI.run(["test", app.path])
            #expect(passing.status == 0, "\(passing.output)")
        }
        try clockApp.replacingOccurrences(of: #"os.getenv("REGION")"#, with: #"(os.getenv("ZONE") or "?")"#)
            .write(to: app.appendingPathComponent("app.lua"), atomically: true, encoding: .utf8)
        let failing = try await CLI.run(["test", app.path])
        #expect(failing.status == 1)
        #expect(failing.output.contains("state.seen[1] is "), "\(failing.output)")
    }

    /// What only a store does to an action: a value the state cannot hold (a function, bytes that are not UTF-8
    /// text), an error that is not a string, a command it refuses, an action out of time. Each step is the store's
    /// in the spec too, so the spec passes where the replay does and fails where it fails.
    static func storeApp(_ variant: [String: String] = [:]) -> String {
        """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action)
          local kind = action.type
          if kind == "add" then state.count = state.count + \(variant["add"] ?? "1")
          elseif kind == "function" then state.count = state.count + 1; state.f = \(variant["function"] ?? "function() end")
          elseif kind == "bytes" then state.count = state.count + 1; state.s = \(variant["bytes"] ?? #""\255\254""#)
          elseif kind == "table error" then state.count = 0; error(\(variant["table error"] ?? "{ code = 7 }"))
          elseif kind == "command" then state.count = state.count + 1; return nil, { luastore.http({ url = \(variant["command"] ?? "5") }) }
          elseif kind == "spin" then state.count = state.count + 1; \(variant["spin"] ?? "while true do end")
          end
        end
        function app.props(state) return { count = \(variant["props"] ?? "state.count") } end
        return app
        """
    }

    static let storeActions = ["add", "function", "bytes", "table error", "command", "spin"]

    @Test func whatOnlyAStoreDoesIsWhatTheSpecChecks() async throws {
        let app = try CLI.makeApp(Self.storeApp())
        defer { try? FileManager.default.removeItem(at: app) }
        let recording = app.appendingPathComponent("session.jsonl").path
        // (A budget the `spin` action's endless loop spends, and nothing else reaches: counted on the wall clock, 50 ms
        // was spent loading the app in a debug build on a busy machine.)
        let budget = ["--time-budget-ms", "400"]
        let actions = (Self.storeActions + ["add"]).map { #"{"type":"\#($0)"}"# }.joined(separator: "\n") + "\n"
        let run = try await CLI.run(["run", app.path, "--record", recording] + budget, input: actions)
        #expect(run.status == 1, "five actions fail: \(run.errors)")
        let spec = app.appendingPathComponent("spec/session_spec.lua")
        let replay = try await CLI.run(["replay", app.path, recording, "--write-spec", spec.path] + budget)
        #expect(replay.status == 0, "\(replay.errors)")
        let text = try String(contentsOf: spec, encoding: .utf8)
        for words in ["a function cannot be stored in the state", "not UTF-8 text", "time budget of 400 ms exceeded", "'url' must be a string", "error object is a table value"] {
            #expect(text.contains(words), "the recording's failures are the spec's: \(words)")
        }
        #expect(text.contains("session.state({count = 0}, { time_budget_ms = 400, clock = { started = "), "the replay's budget and the session's clock are the spec's")
        let passing = try await CLI.run(["test", app.path, "--output", "tap"])
        #expect(passing.status == 0, "\(passing.output) \(passing.errors)")
        #expect(passing.outputLines.filter { $0.hasPrefix("ok ") }.count == 7, "\(passing.output)")
    }

    /// Replay exits 0 exactly when the spec written from the same recording passes, whatever the scripts became (the
    /// spec checks the props too, which a recording does not hold):
    /// sessions of random actions, each replayed against the app changed in each of its behaviours in turn.
    @Test(arguments: 0..<6) func theSpecPassesExactlyWhereTheReplayDoes(seed: Int) async throws {
        var generator = SplitMix(state: UInt64(seed))
        let app = try CLI.makeApp(Self.storeApp())
        defer { try? FileManager.default.removeItem(at: app) }
        let recording = app.appendingPathComponent("session.jsonl").path
        // (A budget the `spin` action's endless loop spends, and no other action reaches: counted on the wall clock, 50 ms
        // was reached by an `add` whose process a loaded machine paused.)
        let budget = ["--time-budget-ms", "400"]
        let actions = (0..<10).map { _ in Self.storeActions.randomElement(using: &generator)! }
        let input = actions.map { #"{"type":"\#($0)"}"# }.joined(separator: "\n") + "\n"
        _ = try await CLI.run(["run", app.path, "--record", recording] + budget, input: input)
        let spec = app.appendingPathComponent("spec/session_spec.lua")
        let written = try await CLI.run(["replay", app.path, recording, "--write-spec", spec.path] + budget)
        #expect(written.status == 0, "\(written.errors)")
        let changes: [[String: String]] = [
            [:], ["add": "2"], ["function": "'now text'"], ["bytes": #""text""#], ["table error": #""a string""#],
            ["command": #""http://127.0.0.1:9/""#], ["spin": "local n = 0"], ["props": "state.count * 10"],
        ]
        var statuses: [Int32] = []
        for change in changes {
            try Self.storeApp(change).write(to: app.appendingPathComponent("app.lua"), atomically: true, encoding: .utf8)
            let replayed = try await CLI.run(["replay", app.path, recording] + budget)
            let tested = try await CLI.run(["test", app.path])
            #expect([0, 1].contains(replayed.status) && [0, 1].contains(tested.status), "\(replayed.errors) \(tested.errors)")
            if change["props"] != nil {
                // (A recording holds no props: the replay cannot see them change. The spec holds the props the
                // replay that wrote it saw, and checks them after each action that changed them — only "add" does.)
                #expect(replayed.status == 0)
                #expect(tested.status == (actions.contains("add") ? 1 : 0), "\(actions): \(tested.output)")
                continue
            }
            #expect(replayed.status == tested.status,
                    "\(actions) with \(change): replay \(replayed.status) \(replayed.errors), test \(tested.status) \(tested.output)")
            statuses.append(replayed.status)
        }
        #expect(statuses.first == 0, "the scripts as recorded replay")
        #expect(statuses.contains(1), "some change diverges: \(actions)")
    }

    @Test func theSpecMayNotReplaceAnInput() async throws {
        let app = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: app) }
        let recording = app.appendingPathComponent("session.jsonl").path
        _ = try await CLI.run(["run", app.path, "--record", recording], input: #"{"type":"increment"}"# + "\n")
        let before = try Data(contentsOf: URL(fileURLWithPath: recording))
        for target in [recording, app.appendingPathComponent("app.lua").path] {
            let refused = try await CLI.run(["replay", app.path, recording, "--write-spec", target])
            #expect(refused.status == 2)
            #expect(refused.errors.contains("--write-spec \(target) is the same file as "), "\(refused.errors)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: recording)) == before)
    }
}
