import Foundation
import LuaKit
import LuaStoreCore
import LuaStorePersistence
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// `math.random` in a durable store: the journal records where the reducers left the generator, so a store reopened
/// from its database draws on from there — the numbers an uninterrupted run draws, never again those it drew before
/// the restart (which gave the same ids again and overwrote the items keyed by them) — and a replay from a later
/// point draws what the session drew. Readers draw from a copy: observing every action changes nothing the
/// reducers draw.
@Suite struct RandomResumeTests {
    /// Items keyed by a random id; a failed action draws before it fails (its draw stays: the next action draws on);
    /// props draw too, and show it.
    static let app = """
        local app = {}
        function app.init() return { items = {}, count = 0, first = math.random(1, 1000) } end
        function app.reduce(state, action)
          local id = tostring(math.random(1, 1 << 40))
          if action.type == "boom" then error("boom after drawing " .. id) end
          state.items[id] = action.label
          state.count = state.count + 1
        end
        function app.props(state) return { count = state.count, noise = math.random(1, 1000) } end
        return app
        """

    static func actions() -> [LuaValue] {
        (1...9).map { index in index == 4 ? ["type": "boom"] : ["type": "add", "label": .string("n\(index)")] }
    }

    func open(_ folder: URL, _ path: String, snapshotEvery: UInt64, observed: Bool) async throws -> (ScriptedStore, StoreDatabase) {
        let database = try StoreDatabase(path: path, app: "app", durability: .full, snapshotInterval: snapshotEvery)
        var options = StoreDatabaseTests.options
        options.persistence = database
        if observed { options.notification = .everyAction }
        let store = try await ScriptedStore(app: folder, options: options)
        if observed { store.observeProps { _ in .active } }
        return (store, database)
    }

    func close(_ store: ScriptedStore, _ database: StoreDatabase) async {
        store.shutdown()
        await store.barrier()
        #expect(database.close() == nil)
    }

    /// The state nine actions make in one store that never stops, nothing observed.
    func uninterrupted(_ folder: URL) async throws -> LuaValue {
        let store = try await ScriptedStore(app: folder, options: StoreDatabaseTests.options)
        defer { store.shutdown() }
        for action in Self.actions() { _ = await store.send(action) }
        return try await store.state()
    }

    /// `batched`: the actions dispatched without waiting, reduced in runs (the failing one in the middle of one),
    /// each action's draws told by the barrier's record of it; else sent one by one.
    @Test(arguments: [1, 2, 10_000] as [UInt64], [false, true])
    func aReopenedStoreDrawsWhatAnUninterruptedOneDraws(snapshotEvery: UInt64, observed: Bool) async throws {
        for batched in [false, true] { try await reopening(snapshotEvery: snapshotEvery, observed: observed, batched: batched) }
    }

    func reopening(snapshotEvery: UInt64, observed: Bool, batched: Bool) async throws {
        let folder = try CLI.makeApp(Self.app)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-random-\(UUID().uuidString).db").path
        defer {
            try? FileManager.default.removeItem(at: folder)
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        let expected = try await uninterrupted(folder)
        guard case .table(let items) = expected["items"] else {
            Issue.record("no items: \(expected)")
            return
        }
        #expect(items.count == 8, "eight ids, all different: \(items)")
        // Three stops: before the failed action (the first of the next run, or of a send), after the action after it, and near the end.
        let actions = Self.actions()
        var start = 0
        for stop in [3, 5, 8, actions.count] {
            let (store, database) = try await open(folder, path, snapshotEvery: snapshotEvery, observed: observed)
            if batched {
                for action in actions[start..<stop] { store.dispatch(action) }
                await store.barrier()
            } else {
                for action in actions[start..<stop] { _ = await store.send(action) }
            }
            if stop == actions.count { #expect(try await store.state() == expected, "after stops at 3, 5 and 8") }
            await close(store, database)
            start = stop
        }
        let (reopened, database) = try await open(folder, path, snapshotEvery: snapshotEvery, observed: observed)
        #expect(try await reopened.state() == expected, "reopened once more")
        await close(reopened, database)
    }

    /// Time travel's rewind goes on from an entry with the generator as the reducers left it there: the actions
    /// after it draw what they drew the first time (the same state as a store that never went further); so does the
    /// devtools' way of reading it, `randomState(after:)`, for an export's header.
    @Test func aRewindGoesOnWithTheGeneratorOfItsEntry() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        var options = StoreDatabaseTests.options
        options.historyEntries = 100
        let actions = Self.actions()
        let straight = try await ScriptedStore(app: folder, options: options)
        defer { straight.shutdown() }
        for action in actions[..<6] { _ = await straight.send(action) }
        let traveled = try await ScriptedStore(app: folder, options: options)
        defer { traveled.shutdown() }
        for action in actions[..<4] { _ = await traveled.send(action) }
        let atFour = await traveled.randomState(after: 4)
        for action in actions[4...] { _ = await traveled.send(action) }
        #expect(await traveled.randomState(after: 4) == atFour && atFour != nil)
        try await traveled.rewind(to: 4)
        for action in actions[4..<6] { _ = await traveled.send(action) }
        #expect(try await traveled.state() == (try await straight.state()))
    }

    /// A run that stops at a failing action (which drew before it failed): the entries before it tell where they
    /// left the generator, not where the failing one did — a rewind to the last of them, an action that drew
    /// nothing, goes on as a store that never ran the failing one.
    @Test func aRunStoppedByAFailureTellsWhereEachActionBeforeItLeftTheGenerator() async throws {
        let folder = try CLI.makeApp("""
            local app = {}
            function app.init() return { items = {}, touched = 0 } end
            function app.reduce(state, action)
              if action.type == "touch" then state.touched = state.touched + 1 return end
              local id = tostring(math.random(1, 1 << 40))
              if action.type == "boom" then error("boom after drawing " .. id) end
              state.items[id] = true
            end
            function app.props(state) return { touched = state.touched } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: folder) }
        var options = StoreDatabaseTests.options
        options.historyEntries = 100
        let add: LuaValue = ["type": "add"], touch: LuaValue = ["type": "touch"], boom: LuaValue = ["type": "boom"]
        let straight = try await ScriptedStore(app: folder, options: options)
        defer { straight.shutdown() }
        for action in [add, touch, add] { _ = await straight.send(action) }
        let batched = try await ScriptedStore(app: folder, options: options)
        defer { batched.shutdown() }
        for action in [add, touch, boom, add, add] { batched.dispatch(action) }
        await batched.barrier()
        try await batched.rewind(to: 2)
        _ = await batched.send(add)
        #expect(try await batched.state() == (try await straight.state()))
    }

    /// A replay from a header taken in the middle of a session (as a snapshot's, or an export's) draws what the
    /// session drew after it: every entry's changes are the same (they were not: its generator started afresh).
    @Test func aReplayFromALaterPointDrawsWhatTheSessionDrew() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let heard = Protected<[JournalEntry]>([])
        var options = StoreDatabaseTests.options
        options.journal = { entry in heard.withLock { $0.append(entry) } }
        let store = try await ScriptedStore(app: folder, options: options)
        defer { store.shutdown() }
        let actions = Self.actions()
        for action in actions[..<4] { _ = await store.send(action) }
        let start = try await store.journalStart()
        #expect(start.random != nil, "the reducers moved the generator: the header tells where")
        // (Through the header's line and back, as a recording carries it.)
        let line = try RecordingLine.header(app: "app", start: start)
        let header = try RecordingReader(header: ArraySlice(line.utf8)).header
        #expect(header.random == start.random)
        for action in actions[4...] { _ = await store.send(action) }
        await store.barrier()
        let session = heard.withLock { $0 }.filter { $0.sequence > start.sequence }

        let replayer = try await Replayer(app: folder, from: header.state, random: header.random, options: StoreDatabaseTests.options)
        defer { replayer.store.shutdown() }
        let replayed = await replayer.reduce(actions[4...])
        #expect(replayed.count == session.count)
        for (now, then) in zip(replayed, session) {
            #expect(now?.changes == then.changes && now?.failure?.error.message == then.failure?.error.message,
                    "entry \(then.sequence): \(String(describing: now?.changes)) against \(then.changes)")
        }
    }
}
