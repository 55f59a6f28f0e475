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
        #expect(passing.output.components(separatedBy: "\nok ").count - 1 == 7)

        try Self.app.replacingOccurrences(of: "(action.by or 1)", with: "(action.by or 2)")
            .write(to: app.appendingPathComponent("app.lua"), atomically: true, encoding: .utf8)
        let failing = try await CLI.run(["test", app.path])
        #expect(failing.status == 1)
        #expect(failing.output.contains(
            #"FAIL spec/session_spec.lua:"# ) && failing.output.contains(
            #"action 1 {type = "increment"}: state.count is 2; the recording says 1"#), "\(failing.output)")
        #expect(failing.output.hasSuffix("6 passed, 1 failed\n"), "each test starts from the recording: one action fails, not the rest")
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
