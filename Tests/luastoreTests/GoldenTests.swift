import Foundation
import LuaStoreTestSupport
import LuaStoreDemoAPI
import Testing

/// Every sample run through the built binary on a file of actions, compared with a golden file.
@Suite struct GoldenTests {
    @Test(arguments: ["counter", "todos", "stopwatch"])
    func sampleMatchesItsGoldenRun(sample: String) async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-data-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let run = try await CLI.run(["run", "samples/\(sample)", "--actions", CLI.golden("\(sample).actions.jsonl").path,
                               "--format", "json", "--data", data.path])
        let expected = try String(contentsOf: CLI.golden("\(sample).expected.jsonl"), encoding: .utf8)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == expected)
        #expect(run.errors.isEmpty, "diagnostics go to standard error only when something is wrong")
    }

    @Test func unchangedPropsPrintNothing() async throws {
        let run = try await CLI.run(["run", "samples/counter", "--format", "json"],
                              input: "{\"type\":\"reset\"}\n{\"type\":\"unknown\"}\n{\"type\":\"increment\"}\n{\"type\":\"unknown\"}\n")
        #expect(run.outputLines == [#"{"count":0,"label":"0 clicks"}"#, #"{"count":1,"label":"1 click"}"#])
    }

    @Test func todosArePersistedThroughEffects() async throws {
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-data-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        let first = try await CLI.run(["run", "samples/todos", "--format", "json", "--data", data.path],
                                input: "{\"type\":\"appStarted\"}\n{\"type\":\"todoAdded\",\"title\":\"Keep me\"}\n")
        #expect(first.status == 0)
        let second = try await CLI.run(["run", "samples/todos", "--format", "json", "--data", data.path], input: "{\"type\":\"appStarted\"}\n")
        #expect(second.outputLines.last == #"{"canClear":false,"filter":"all","items":[{"done":false,"id":1,"title":"Keep me"}],"left":"1 item left"}"#)
    }

    /// A copy of the search sample asking the local API at `port`. Its requests time out after 20 s, not the
    /// sample's 1.5: the API runs in this test process, among the other tests, and a loaded machine may answer a
    /// local request slowly (it once took over 1.5 s beside busy loops); the slow query is cancelled, never timed out.
    func searchCopy(port: UInt16) throws -> URL {
        let copy = try CLI.copySample("search")
        try Data("return { api = \"http://127.0.0.1:\(port)\", timeout = 20 }\n".utf8).write(to: copy.appendingPathComponent("config.lua"))
        return copy
    }

    @Test func searchCancelsTheRequestInFlightAndShowsFailures() async throws {
        let (server, task, port) = try await SearchAPI.start(port: 0)
        let app = try searchCopy(port: port)
        defer { try? FileManager.default.removeItem(at: app) }
        let recording = app.appendingPathComponent("session.jsonl")
        let run = try await CLI.run(["run", app.path, "--actions", CLI.golden("search.actions.jsonl").path, "--format", "json", "--settle-timeout", "30",
                                     "--record", recording.path])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == (try String(contentsOf: CLI.golden("search.expected.jsonl"), encoding: .utf8)), "\(run.output)\n\(run.errors)")
        // The props cannot tell (the app ignores answers to old queries); the recording of every action reduced
        // can: the answer for "lua" came back, and nothing ever came back for "slow1" — not its results (after
        // 2 s), which the run would have waited for had the request not been cancelled.
        let recorded = try String(contentsOf: recording, encoding: .utf8)
        #expect(recorded.contains(#""id":"lua""#), "\(recorded)")
        #expect(!recorded.contains(#""id":"slow1""#), "the slow request was cancelled: \(recorded)")
        // (The failing request is waited for, however loaded the machine: its answer is what is checked.)
        let failing = try await CLI.run(["run", app.path, "--actions", CLI.golden("search-error.actions.jsonl").path, "--format", "json",
                                         "--settle-timeout", "60"])
        #expect(failing.outputLines.last == #"{"query":"error","results":{},"status":"search failed: httpStatus 500"}"#)
        await server.stop(timeout: 0)
        task.cancel()
        let refused = try await CLI.run(["run", app.path, "--actions", CLI.golden("search-error.actions.jsonl").path, "--format", "json"])
        #expect(refused.outputLines.last == #"{"query":"error","results":{},"status":"search failed: connectionFailed"}"#)
    }

    @Test func recordedSearchReplaysWithTheServerStopped() async throws {
        let (server, task, port) = try await SearchAPI.start(port: 0)
        let app = try searchCopy(port: port)
        let recording = app.appendingPathComponent("session.jsonl")
        defer { try? FileManager.default.removeItem(at: app) }
        let run = try await CLI.run(["run", app.path, "--actions", CLI.golden("search.actions.jsonl").path, "--format", "json", "--settle-timeout", "30",
                               "--record", recording.path])
        #expect(run.status == 0, "\(run.errors)")
        await server.stop(timeout: 0)
        task.cancel()
        let replay = try await CLI.run(["replay", app.path, recording.path])
        #expect(replay.status == 0, "\(replay.errors)")
        #expect(replay.output == "replayed 3 actions: every change matches the recording\n")
        #expect(try String(contentsOf: recording, encoding: .utf8).contains(#""origin":{"effect":"http","subscription":"search"}"#), "the answer came from the http subscription")

        let changed = try String(contentsOf: app.appendingPathComponent("app.lua"), encoding: .utf8)
            .replacingOccurrences(of: "state.status, state.results = \"done\", titles", with: "state.status, state.results = \"done\", {}")
        try Data(changed.utf8).write(to: app.appendingPathComponent("app.lua"))
        let diverged = try await CLI.run(["replay", app.path, recording.path])
        #expect(diverged.status == 1)
        #expect(diverged.errors.contains("diverges at action 3: "), "\(diverged.errors)")
        #expect(diverged.errors.contains(#"state.results: recorded ["lua","luastore","luajit"], now {}"#), "\(diverged.errors)")
    }
}
