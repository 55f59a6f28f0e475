import Foundation
import Glibc
import LuaKit
import LuaStoreCore
@testable import LuaStoreDevtools
import LuaStorePersistence
import LuaStoreScripting
import LuaStoreTestSupport
import RawHTTPClient
import Testing

/// The devtools and recordings: the kept session exported as a recording and as a spec, a recording imported and
/// browsed, the session replayed with the current scripts.
@Suite struct DevtoolsRecordingTests {
    @Test func theExportIsARecordingOfTheKeptSession() async throws {
        let session = try await DevtoolsTests.start(keep: 50)
        defer { Task { await session.stop() } }
        for _ in 0..<80 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()
        let export = try await session.get("/api/export")
        #expect(export.status == 200)
        let lines = export.body.split(separator: "\n")
        #expect(lines.count == 51) // a header, then the 50 entries kept
        let header = try #require(JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(header["format"] as? String == "luastore-recording")
        #expect((header["state"] as? [String: Any])?["count"] as? Int == 30) // the state before entry 31
        #expect(lines[1].hasPrefix(#"{"seq":31,"#))
    }

    /// After a rewind the export starts from the state the rewind left: the entries it undid (and those before
    /// them) no longer lead to the state, so `luastore replay` of the export matches the app as it now is. (Kept,
    /// they made a recording whose replay diverged at the first action after the rewind.)
    @Test func anExportAfterARewindReplaysFromWhereTheRewindLeftTheState() async throws {
        let folder = try CLI.makeApp(DevtoolsTests.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let session = try await DevtoolsTests.start(keep: 50, folder: folder)
        defer { Task { await session.stop() } }
        for _ in 0..<5 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()
        #expect(try await session.post("/api/unlock").status == 200)
        #expect(try await session.post("/api/rewind?seq=2").status == 200)
        for _ in 0..<3 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()
        #expect(try await session.store.state()["count"] == 5, "2 kept, then 3 more")
        let export = try await session.get("/api/export")
        #expect(export.status == 200)
        let lines = export.body.split(separator: "\n")
        #expect(lines.count == 4, "a header, then the 3 entries after the rewind: \(export.body)")
        let header = try #require(JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect((header["state"] as? [String: Any])?["count"] as? Int == 2, "the state the rewind left")
        #expect(header["seq"] as? Int == 5, "the entries through 5 are behind it")
        #expect(lines[1].hasPrefix(#"{"seq":6,"#))
        let recording = folder.appendingPathComponent("rewound.jsonl")
        try export.body.write(to: recording, atomically: true, encoding: .utf8)
        let replay = try await CLI.run(["replay", folder.path, recording.path])
        #expect(replay.status == 0, "\(replay.output) \(replay.errors)")
        #expect(replay.output == "replayed 3 actions: every change matches the recording\n")
        let spec = try await session.get("/api/export-spec")
        #expect(spec.body.components(separatedBy: "session.step(").count - 1 == 3, "\(spec.body)")
    }

    /// An app that draws ids with `math.random`: the export of what the history keeps — 20 of 40 actions, and after
    /// a rewind — starts where the reducers left the generator (its header's `random`), so `luastore replay` of it
    /// draws the same ids and every change matches (the header said nothing of it: the replay's generator started
    /// afresh and diverged at the first action).
    @Test func anExportOfAnAppDrawingRandomIdsReplays() async throws {
        let folder = try CLI.makeApp("""
            local app = {}
            function app.init() return { items = {}, count = 0 } end
            function app.reduce(state, action)
              state.items[tostring(math.random(1, 1 << 40))] = state.count
              state.count = state.count + 1
            end
            function app.props(state) return { count = state.count, pick = math.random(1, 6) } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: folder) }
        let session = try await DevtoolsTests.start(keep: 20, folder: folder)
        defer { Task { await session.stop() } }
        for _ in 0..<40 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()
        for rewound in [false, true] {
            if rewound {
                #expect(try await session.post("/api/unlock").status == 200)
                #expect(try await session.post("/api/rewind?seq=30").status == 200)
                for _ in 0..<5 { session.store.dispatch(["type": "add"]) }
                await session.store.barrier()
            }
            let export = try await session.get("/api/export")
            #expect(export.status == 200)
            #expect(export.body.split(separator: "\n").first?.contains(#""random":""#) == true, "\(export.body.prefix(300))")
            let recording = folder.appendingPathComponent("random-\(rewound).jsonl")
            try export.body.write(to: recording, atomically: true, encoding: .utf8)
            let replay = try await CLI.run(["replay", folder.path, recording.path])
            #expect(replay.status == 0 && replay.output.contains("every change matches the recording"), "\(replay.output) \(replay.errors)")
        }
    }

    /// While the session is recorded to a file (`run --record`), a rewind is refused, saying why: the file cannot
    /// drop the entries it undoes. Jump and Resume still work, and the recording replays.
    @Test func aRewindIsRefusedWhileTheSessionIsRecordedToAFile() async throws {
        let folder = try CLI.makeApp(DevtoolsTests.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let recording = folder.appendingPathComponent("session.jsonl").path
        let (process, errors) = try await DevtoolsTests.startServing(["run", folder.path, "--actions", "/dev/null", "--devtools", "0",
                                                                      "--record", recording])
        defer { if process.isRunning { process.terminate() } }
        let match = try #require(errors.firstMatch(of: /http:\/\/127\.0\.0\.1:(\d+)\/\?token=([0-9a-f]{32})/), "\(errors)")
        let port = try #require(UInt16(match.1)), token = String(match.2)
        func post(_ target: String, _ body: String = "") async throws -> (status: Int, body: String) {
            let response = try await offPool { try RawHTTP.request("POST", target, port: port, body: body, token: token) }
            return (response.status, response.body)
        }
        #expect(try await post("/api/unlock").status == 200)
        for _ in 0..<3 { #expect(try await post("/api/dispatch", #"{"type":"add"}"#).status == 200) }
        let refused = try await post("/api/rewind?seq=1")
        #expect(refused.status == 409)
        #expect(refused.body.contains("the session is being recorded to \(recording) (--record)"), "\(refused.body)")
        #expect(try await post("/api/jump?seq=1").status == 200)
        #expect(try await post("/api/resume").status == 200)
        #expect(try await post("/api/dispatch", #"{"type":"add"}"#).status == 200)
        process.interrupt()
        let ended = await eventually(timeout: .seconds(30)) { !process.isRunning }
        #expect(ended && process.terminationStatus == 0)
        let replay = try await CLI.run(["replay", folder.path, recording])
        #expect(replay.status == 0, "\(replay.output) \(replay.errors)")
        #expect(replay.output == "replayed 4 actions: every change matches the recording\n")
    }

    /// "Export spec": the kept session as a busted spec, from the state before the oldest kept entry; `luastore
    /// test` runs it and it passes, then fails naming the action once the reducer does something else.
    @Test func theKeptSessionExportsAsASpecThatLuastoreTestRuns() async throws {
        let folder = try CLI.makeApp(DevtoolsTests.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let session = try await DevtoolsTests.start(keep: 5, folder: folder)
        defer { Task { await session.stop() } }
        for _ in 0..<6 { session.store.dispatch(["type": "add"]) }
        session.store.dispatch(["type": "boom"])
        session.store.dispatch(["type": "rename", "name": "Spec"])
        await session.store.barrier()
        let export = try await session.get("/api/export-spec")
        #expect(export.status == 200)
        #expect(export.body.contains(#"describe("demo session", function()"#))
        #expect(export.body.contains(#"session.state({count = 3, items = {{n = 1}, {n = 2}, {n = 3}}, name = "start"}, { clock = { started = "#), "\(export.body)")
        #expect(export.body.components(separatedBy: "session.step(").count - 1 == 5)
        #expect(export.body.contains(#"failure = "boom at 6","#))
        #expect(export.body.contains(#"props = {count = 6, name = "start"},"#))
        let spec = folder.appendingPathComponent("spec/kept_spec.lua")
        try FileManager.default.createDirectory(at: spec.deletingLastPathComponent(), withIntermediateDirectories: true)
        try export.body.write(to: spec, atomically: true, encoding: .utf8)
        let passing = try await CLI.run(["test", folder.path])
        #expect(passing.status == 0, "\(passing.output)")
        #expect(passing.output.hasSuffix("5 passed, 0 failed\n"), "\(passing.output)")
        try DevtoolsTests.app.replacingOccurrences(of: "state.name = action.name", with: "state.name = action.name .. \"!\"")
            .write(to: folder.appendingPathComponent("app.lua"), atomically: true, encoding: .utf8)
        let failing = try await CLI.run(["test", folder.path])
        #expect(failing.output.contains(#"action 8 {name = "Spec", type = "rename"}: state.name is "Spec!"; the recording says "Spec""#),
                "\(failing.output)")
    }

    /// The devtools show when each entry ran — the store's recorded clock, what its scripts read — and carry it
    /// through: the export writes each entry's time, and its import replays each action at it, without a divergence,
    /// for an app whose reducer reads the clock.
    @Test func entriesShowTheRecordedTimeAndTheExportKeepsIt() async throws {
        let folder = try CLI.makeApp("""
            local app = {}
            function app.init() return { at = {} } end
            function app.reduce(state, action) state.at[#state.at + 1] = os.date("!%H:%M:%S", os.time()) end
            function app.props(state) return { n = #state.at } end
            return app
            """)
        let millis = Protected<Int64>(1_772_357_400_000)
        let session = try await DevtoolsTests.start(folder: folder, clock: StoreClock(now: { StoreClock.date(millis: millis.value) }))
        defer { Task { await session.stop() } }
        for step in 1...4 {
            millis.withLock { $0 += Int64(step) * 60_000 }
            _ = await session.store.send(["type": "tick"])
        }
        let listed = try DevtoolsTests.json(try await session.get("/api/entries"))
        let times = (listed["entries"] as? [[String: Any]])?.compactMap { $0["time"] as? Int }
        #expect(times == [1_772_357_460_000, 1_772_357_580_000, 1_772_357_760_000, 1_772_358_000_000], "\(listed)")
        let entry = try DevtoolsTests.json(try await session.get("/api/entry?seq=2"))
        #expect((entry["line"] as? [String: Any])?["dt"] as? Int == 120_000, "its line as the recording holds it: \(entry)")
        let recording = try await session.get("/api/export").body
        #expect(recording.contains(#""dt":180000,"#))
        let imported = try DevtoolsTests.json(try await session.post("/api/import?name=s.jsonl", body: recording))
        let summary = try #require(imported["imported"] as? [String: Any])
        #expect(summary["entries"] as? Int == 4)
        #expect(summary["divergence"] == nil, "each action replayed at its recorded time: \(summary)")
    }

    @Test func anImportedRecordingIsBrowsedLikeTheRunningApp() async throws {
        let folder = try CLI.makeApp(DevtoolsTests.app)
        let session = try await DevtoolsTests.start(folder: folder)
        defer { Task { await session.stop() } }
        for _ in 0..<6 { session.store.dispatch(["type": "add"]) }
        session.store.dispatch(["type": "boom"])
        session.store.dispatch(["type": "rename", "name": "Imported"])
        await session.store.barrier()
        let recording = try await session.get("/api/export").body

        let imported = try DevtoolsTests.json(try await session.post("/api/import?name=s.jsonl", body: recording))
        let summary = try #require(imported["imported"] as? [String: Any])
        #expect(summary["entries"] as? Int == 8)
        #expect(summary["divergence"] == nil)
        #expect(imported["count"] as? Int == 8)
        let failed = try DevtoolsTests.json(try await session.get("/api/entries?failed=1"))
        #expect((failed["entries"] as? [[String: Any]])?.first?["seq"] as? Int == 7)
        let third = try DevtoolsTests.json(try await session.get("/api/state?seq=3"))
        #expect((third["items"] as? [[String: Any]])?.first { $0["key"] as? String == "count" }?["value"] as? Int == 3)
        let entry = try DevtoolsTests.json(try await session.get("/api/entry?seq=8"))
        #expect((entry["props"] as? [String: Any])?["name"] as? String == "Imported")
        #expect(try await session.store.state()["count"] == 6) // the running app is as it was
        // An import is browsed, not changed: an action dispatched now is refused (it would reach no app).
        _ = try await session.post("/api/unlock")
        let dispatched = try await session.post("/api/dispatch", body: #"{"type":"add"}"#)
        #expect(dispatched.status == 409, "\(dispatched.status) \(dispatched.body)")
        #expect(dispatched.body.contains("go Back to dispatch to the running app"), "\(dispatched.body)")
        #expect(try DevtoolsTests.json(try await session.get("/api/session"))["count"] as? Int == 8) // (the import's whole)
        #expect(try await session.store.state()["count"] == 6)

        #expect(try DevtoolsTests.json(try await session.post("/api/back"))["imported"] is NSNull)
        #expect(try DevtoolsTests.json(try await session.get("/api/session"))["count"] as? Int == 8)

        // The scripts changed since: the first action they compute otherwise is named.
        let changed = DevtoolsTests.app.replacingOccurrences(of: "state.count = state.count + 1", with: "state.count = state.count + 2")
        try Data(changed.utf8).write(to: folder.appendingPathComponent("app.lua"))
        let diverged = try DevtoolsTests.json(try await session.post("/api/import?name=s.jsonl", body: recording))
        let divergence = try #require((diverged["imported"] as? [String: Any])?["divergence"] as? [String: Any])
        #expect(divergence["seq"] as? Int == 1)
        #expect(divergence["path"] as? String == "state.count")

        let bad = try await session.post("/api/import?name=notes.txt", body: "hello\n")
        #expect(bad.status == 400)
        #expect(bad.body.contains("notes.txt:1: not a recording"))
        // A last line cut short (a crash while it was written) is left out, as `luastore replay` leaves it, and named.
        let cut = try await session.post("/api/import?name=cut.jsonl", body: recording + "{\"seq\":9,\"act")
        #expect(cut.status == 200)
        let cutSummary = try #require(try DevtoolsTests.json(cut)["imported"] as? [String: Any])
        #expect(cutSummary["cutShort"] as? Int == 10)
        #expect(cutSummary["entries"] as? Int == 8)
        let damaged = try await session.post("/api/import?name=damaged.jsonl", body: recording + "{\"seq\":9,\"act\n")
        #expect(damaged.status == 400)
        #expect(damaged.body.contains("damaged.jsonl:10: not a recorded entry"), "\(damaged.body)")
        // Changes that are JSON but not a list of changes are named when they are read.
        let lines = recording.split(separator: "\n").map(String.init)
        var malformed = lines
        malformed[1] = RecordingLine.withSum(lines[1].replacing(#/"changes":\[.*\],"scripts"/#, with: #""changes":"none","scripts""#))
        #expect(malformed[1] != lines[1])
        let refused = try await session.post("/api/import?name=m.jsonl", body: malformed.joined(separator: "\n") + "\n")
        #expect(refused.status == 400)
        #expect(refused.body.contains("m.jsonl: the entry of action 1 is not a recorded entry"), "\(refused.body)")
    }

    @Test func replayingWithTheCurrentScriptsFindsTheFirstDivergence() async throws {
        let folder = try CLI.makeApp(DevtoolsTests.app)
        let session = try await DevtoolsTests.start(folder: folder)
        defer { Task { await session.stop() } }
        for _ in 0..<4 { session.store.dispatch(["type": "add"]) }
        session.store.dispatch(["type": "rename", "name": "Ada"])
        for _ in 0..<3 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()
        let same = try DevtoolsTests.json(try await session.post("/api/replay"))
        #expect(same["matches"] as? Bool == true)
        #expect(same["replayed"] as? Int == 8)

        // The scripts change how `rename` works (and nothing else): the sixth action, not the first, diverges.
        let changed = DevtoolsTests.app.replacingOccurrences(of: "state.name = action.name", with: "state.name = string.upper(action.name)")
        try Data(changed.utf8).write(to: folder.appendingPathComponent("app.lua"))
        let report = try DevtoolsTests.json(try await session.post("/api/replay"))
        #expect(report["matches"] as? Bool == false)
        let divergence = try #require(report["divergence"] as? [String: Any])
        #expect(divergence["seq"] as? Int == 5)
        #expect(divergence["what"] as? String == "changes")
        let difference = try #require((divergence["differences"] as? [[String: Any]])?.first)
        #expect(difference["path"] as? String == "state.name")
        #expect(difference["then"] as? String == "Ada")
        #expect(difference["now"] as? String == "ADA")

        // Props alone: the same changes, other props.
        let props = DevtoolsTests.app.replacingOccurrences(of: "name = state.name }", with: "name = state.name, shout = state.count > 6 }")
        try Data(props.utf8).write(to: folder.appendingPathComponent("app.lua"))
        let byProps = try DevtoolsTests.json(try await session.post("/api/replay"))
        let propsDivergence = try #require(byProps["divergence"] as? [String: Any])
        #expect(propsDivergence["what"] as? String == "props")
        #expect(propsDivergence["seq"] as? Int == 1)
        #expect((propsDivergence["differences"] as? [[String: Any]])?.first?["path"] as? String == "props.shout")
    }
}
