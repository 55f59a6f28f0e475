import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The conditions of `luastore replay`: no props observer, `.everyAction`, effects off, actions dispatched in
/// windows while the store reduces them in runs of whatever length the inbox holds. (Runs whose records filled
/// the barrier's buffer to its last byte lost the records before: the lengths vary from round to round, and
/// about every other round hit one.)
@Suite struct JournalWithoutReadersTests {
    @Test(arguments: [1, 2, 3, 4] as [Int])
    func everyActionHasItsChangesWhateverTheRuns(round: Int) async throws {
        let folder = try AppFolder(["app.lua": TestApps.countingBy])
        defer { folder.remove() }
        let failures = Protected<[String]>([])
        var options = ScriptedStoreOptions(log: { _ in }, failures: { failure in
            failures.withLock { $0.append("\(failure.stage): \(failure.error.kind) \(failure.error.message)") }
        })
        options.performsEffects = false
        options.notification = .everyAction
        // The budget is wall time: on a loaded machine a thread kept off the processors for 200 ms made an action
        // of a few microseconds a timeout (which, reported, has no changes). Any failure is named below.
        options.limits.timeBudget = .seconds(5)
        let entries = Protected<[JournalEntry]>([])
        options.journal = { entry in entries.withLock { $0.append(entry) } }
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        _ = try await store.journalStart()
        let actions: [LuaValue] = (1...6_000).map { ["type": "add", "by": .integer(Int64($0 % 3))] }
        var count: Int64 = 0
        var checked = 0
        for window in stride(from: 0, to: actions.count, by: 4_096) {
            for action in actions[window..<min(window + 4_096, actions.count)] { store.dispatch(action) }
            await store.barrier()
            let heard = entries.withLock { heard in
                defer { heard.removeAll() }
                return heard
            }
            for entry in heard {
                checked += 1
                let by = entry.action?["by"].integer ?? 0
                count += by
                let changed = entry.changes.first { $0.path == ["count"] }?.value
                #expect(changed == (by == 0 ? nil : .integer(count)),
                        "entry \(entry.sequence): \(entry.changes), failure \(String(describing: entry.failure)); \(failures.value)")
                if by != 0 && changed == nil { return }
            }
        }
        #expect(checked == actions.count)
        #expect(failures.value.isEmpty)
    }
}

extension JournalTests {
    /// A session recorded through `ScriptedStoreOptions.recorder` (runs handed over as the barrier wrote them,
    /// entries made on the writer's thread) is byte for byte the recording made from the journal's entries on the
    /// store's thread: runs of plain changes, a failure inside a run, an action returning a command, one that
    /// writes more than the barrier reads in C (its changes read by the Lua side), keys and values of every kind.
    @Test func theRecorderWritesWhatTheJournalSays() async throws {
        let folder = try AppFolder(["app.lua": """
            local luastore = require("luastore")
            local app = {}
            function app.init() return { count = 0, list = {}, map = {}, seen = {} } end
            function app.reduce(state, action)
              local kind = action.type
              if kind == "add" then
                state.count = state.count + action.by; state.map[action.key] = action.by
                state.seen[#state.seen + 1] = action.by -- (each action's own change: none is written over)
              elseif kind == "fail" then state.count = -1; error("refused " .. action.why)
              elseif kind == "log" then state.count = state.count + 1; return nil, { luastore.log("counted " .. state.count) }
              elseif kind == "many" then for i = 1, 40 do state.list[i] = { n = i, half = i / 2 } end
              elseif kind == "keys" then state.map[true] = "yes"; state.map[5] = 2.5; state.map.empty = {}
              end
            end
            function app.props(state) return { count = state.count } end
            return app
            """])
        defer { folder.remove() }
        var actions: [LuaValue] = []
        for index in 1...300 {
            switch index % 50 {
            case 7: actions.append(["type": "fail", "why": .string("at \(index)")])
            case 13: actions.append(["type": "log"])
            case 21: actions.append(["type": "many"])
            case 33: actions.append(["type": "keys"])
            default: actions.append(["type": "add", "by": .integer(Int64(index)), "key": .string("k\(index % 9)")])
            }
        }
        let finalState = Protected(LuaValue.nil)
        func record(throughRecorder: Bool) async throws -> [UInt8] {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("recorder-\(UUID().uuidString).jsonl").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            let recorder = SessionRecorder(file: try OutputFile(path: path))
            var options = Recorder().options
            options.limits.timeBudget = .seconds(5)
            options.clock = .fixed(Date(timeIntervalSince1970: 1_700_000_000)) // (two stores, one clock: the same bytes)
            if throughRecorder { options.recorder = recorder } else { options.journal = { recorder.append($0) } }
            let store = try await ScriptedStore(app: folder.url, options: options)
            recorder.start(app: "test", try await store.journalStart())
            for action in actions { store.dispatch(action) }
            await store.barrier()
            let state = try await store.state()
            finalState.withLock { $0 = state }
            store.shutdown()
            if let failure = recorder.file?.close() { throw failure }
            return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        let fromRuns = try await record(throughRecorder: true)
        let fromEntries = try await record(throughRecorder: false)
        let lines = fromRuns.split(separator: 10)
        #expect(lines.count == 1 + actions.count, "a header and an entry per action")
        let failed = lines.map { String(decoding: $0, as: UTF8.self) }.filter { $0.contains(#""failure""#) }
        #expect(failed.count == 6, "\(failed.prefix(2))")
        #expect(fromRuns == fromEntries)
        // Exact: the header's state with every line's changes applied is the store's final state.
        var recording = try RecordingLines(LineReader(bytes: fromRuns))
        var state = recording.header.state
        for recorded in try recording.rest() {
            for change in try recorded.readChanges() ?? [] { Self.apply(change, to: &state) }
        }
        #expect(state == finalState.withLock { $0 })
    }
}
