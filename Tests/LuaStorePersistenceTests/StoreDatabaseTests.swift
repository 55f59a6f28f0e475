import Foundation
import LuaKit
import LuaStoreCore
import LuaStorePersistence
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// `StoreDatabase` from Swift (`ScriptedStoreOptions.persistence`): a real SQLite file, a real scripted store. (Its
/// writer thread commits and checkpoints beside the store's: the suite runs under the Thread Sanitizer too.)
@Suite(.tags(.concurrency)) struct StoreDatabaseTests {
    static let app = """
        local app = {}
        function app.init() return { count = 0, items = {}, inits = 1 } end
        function app.reduce(state, action)
          if action.type == "add" then
            state.count = state.count + 1
            state.items[#state.items + 1] = { n = state.count, label = action.label }
          elseif action.type == "drop" then
            table.remove(state.items, 1)
          elseif action.type == "boom" then
            error("boom")
          end
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    func databasePath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("luastore-db-\(UUID().uuidString).db").path
    }

    func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// Options for a test store: a time budget no loaded machine runs out of on these small scripts (the default
    /// 200 ms did, loading a reload's scripts beside busy loops).
    static var options: ScriptedStoreOptions {
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.limits.timeBudget = .seconds(10)
        return options
    }

    func store(_ folder: URL, _ database: StoreDatabase) async throws -> ScriptedStore {
        var options = Self.options
        options.persistence = database
        return try await ScriptedStore(app: folder, options: options)
    }

    /// With `.full`, `send` answers only once the action's entry is committed: the database's last commit is
    /// already at its sequence number when the answer comes.
    @Test func sendAnswersAfterTheEntryIsCommittedWithFullSync() async throws {
        let folder = try CLI.makeApp(Self.app)
        let path = databasePath()
        defer { try? FileManager.default.removeItem(at: folder); remove(path) }
        let database = try StoreDatabase(path: path, app: "app", durability: .full)
        let store = try await store(folder, database)
        for index in 1...20 {
            let entry = try #require(await store.send(["type": "add", "label": .string("item \(index)")]).entry)
            #expect(database.status.sequence >= entry.sequence, "answered before #\(entry.sequence) was committed")
        }
        #expect(await store.send(["type": "boom"]).failure != nil)
        store.shutdown()
        await store.barrier()
        #expect(database.close() == nil)
    }

    /// A second store on the file resumes the state the first left — sequence removals, nested tables and
    /// all — without `init`, and its sequence numbers go on.
    @Test func aStoreResumesTheStateWithoutInit() async throws {
        let folder = try CLI.makeApp(Self.app)
        let path = databasePath()
        defer { try? FileManager.default.removeItem(at: folder); remove(path) }
        let first = try StoreDatabase(path: path, app: "app", snapshotInterval: 7)
        let writer = try await store(folder, first)
        for index in 1...30 {
            _ = await writer.send(["type": "add", "label": .string("item \(index)")])
            if index % 4 == 0 { _ = await writer.send(["type": "drop"]) }
        }
        _ = await writer.send(["type": "boom"])
        let expected = try await writer.state()
        let last = try #require(await writer.send(["type": "add", "label": "last"]).entry?.sequence)
        let final = try await writer.state()
        writer.shutdown()
        await writer.barrier()
        #expect(first.close() == nil)
        #expect(expected != final)

        let second = try StoreDatabase(path: path, app: "app")
        #expect(second.resumed?.sequence == last)
        #expect(try second.resumed?.decodedState() == final)
        let reader = try await store(folder, second)
        #expect(try await reader.state() == final)
        #expect(try await reader.state()["inits"] == 1)
        let next = try #require(await reader.send(["type": "add", "label": "after"]).entry)
        #expect(next.sequence == last + 1)
        reader.shutdown()
        await reader.barrier()
        #expect(second.close() == nil)
    }

    /// A durable store's snapshots hold committed state only. An action that fails in the run a snapshot falls due in
    /// is undone before the snapshot is taken (the actions before it are journaled while its writes are still in the
    /// state); a second store resumes exactly what the first committed — not a table in two places, not a field the
    /// failed action took away.
    @Test func aSnapshotNeverHoldsAFailedActionsWrites() async throws {
        let folder = try CLI.makeApp("""
            local app = {}
            function app.init() return { n = 0, a = { v = 1 } } end
            function app.reduce(state, action)
              if action.type == "ok" then state.n = state.n + 1
              elseif action.type == "bad" then state.b = state.a; state.a.v = 2; state.n = nil; error("bad")
              end
            end
            function app.props(state) return { n = state.n } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: folder) }
        for round in 1...3 {
            let path = databasePath()
            defer { remove(path) }
            let first = try StoreDatabase(path: path, app: "app", snapshotInterval: 1)
            let writer = try await store(folder, first)
            // (Dispatched in a burst, so that the store reduces them in runs, the failing one last in its run.)
            for _ in 0..<200 { writer.dispatch(["type": "ok"]) }
            writer.dispatch(["type": "bad"])
            let committed = try await writer.state()
            #expect(committed == ["n": 200, "a": ["v": 1]], "round \(round)")
            writer.shutdown()
            await writer.barrier()
            #expect(first.close() == nil)
            let second = try StoreDatabase(path: path, app: "app")
            #expect(try second.resumed?.decodedState() == committed, "round \(round)")
            #expect(second.close() == nil)
        }
    }

    /// A state that fit under the memory cap as its actions made it resumes under the same cap: the texts it is read
    /// from (the snapshot, the entries after it) are in the VM while it is read, and they are not the state (a store
    /// at four fifths of an 8 MiB cap failed to open, "not enough memory", blamed on init).
    @Test func aStateThatFitUnderTheCapResumesUnderIt() async throws {
        let folder = try CLI.makeApp("""
            local app = {}
            function app.init() return { items = {} } end
            function app.reduce(state, action)
              local items = state.items
              for i = #items + 1, #items + 1000 do items[i] = { title = "item number " .. i, done = false } end
            end
            function app.props(state) return { count = #state.items } end
            return app
            """)
        let path = databasePath()
        defer { try? FileManager.default.removeItem(at: folder); remove(path) }
        var options = Self.options
        options.limits.memoryBytes = 8 << 20
        options.persistence = try StoreDatabase(path: path, app: "app")
        let writer = try await ScriptedStore(app: folder, options: options)
        var count = 0
        while await writer.memory().bytesInUse < 13 << 19 {
            #expect(await writer.send(["type": "add"]).failure == nil)
            count += 1000
        }
        let committed = try await writer.state()
        writer.shutdown()
        await writer.barrier()
        #expect((options.persistence as? StoreDatabase)?.close() == nil)
        options.persistence = try StoreDatabase(path: path, app: "app")
        let resumed = try await ScriptedStore(app: folder, options: options)
        defer { resumed.shutdown() }
        #expect(try await resumed.props() == ["count": .integer(Int64(count))])
        #expect(try await resumed.state() == committed)
        #expect(await resumed.send(["type": "add"]).failure == nil, "and goes on under the cap")
    }

    /// A mount added to an app whose store is on disk: the resumed state gets the plugin's slice from its `init`,
    /// the database a snapshot with it, and the plugin's changes resume on it after another restart.
    @Test func aMountAddedLaterResumesWithItsSlice() async throws {
        let folder = try CLI.makeApp(Self.app)
        let path = databasePath()
        defer { try? FileManager.default.removeItem(at: folder); remove(path) }
        let first = try StoreDatabase(path: path, app: "app")
        let plain = try await store(folder, first)
        for index in 1...3 { _ = await plain.send(["type": "add", "label": .string("item \(index)")]) }
        plain.shutdown()
        await plain.barrier()
        #expect(first.close() == nil)

        try Data(#"{"name": "app", "version": "1.1.0", "luastore": "^1.0", "mounts": {"tally": "tally"}}"#.utf8)
            .write(to: folder.appendingPathComponent("luastore.json"))
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("tally"), withIntermediateDirectories: true)
        try Data(#"{"name": "tally", "version": "1.0.0", "luastore": "^1.0"}"#.utf8).write(to: folder.appendingPathComponent("tally/luastore.json"))
        try Data("""
            return { init = function() return { seen = 0, since = "placed" } end, reduce = function(slice) slice.seen = slice.seen + 1 end }
            """.utf8).write(to: folder.appendingPathComponent("tally/app.lua"))
        for round in 1...2 {
            let database = try StoreDatabase(path: path, app: "app")
            let mounted = try await store(folder, database)
            #expect(try await mounted.state()["count"] == 3)
            #expect(try await mounted.state()["tally"] == ["seen": .integer(Int64(round - 1)), "since": "placed"], "round \(round)")
            #expect(await mounted.send(["type": "noop"]).failure == nil)
            #expect(try await mounted.state()["tally"]["seen"] == .integer(Int64(round)))
            mounted.shutdown()
            await mounted.barrier()
            #expect(database.close() == nil)
        }
    }

    /// Time travel and hot reload keep the file true: a run that ends while jumped back resumes from the newest
    /// state (a jump is not kept); a rewind keeps the state it went on from; a reload's migration is kept (a
    /// snapshot after it), so the new scripts resume on the migrated state and do not migrate again.
    @Test func timeTravelAndReloadsKeepTheFileTrue() async throws {
        let folder = try CLI.makeApp(Self.app)
        let path = databasePath()
        defer { try? FileManager.default.removeItem(at: folder); remove(path) }
        func open() async throws -> (StoreDatabase, ScriptedStore) {
            let database = try StoreDatabase(path: path, app: "app")
            var options = Self.options
            options.persistence = database
            options.historyEntries = 100
            return (database, try await ScriptedStore(app: folder, options: options))
        }
        func close(_ opened: (StoreDatabase, ScriptedStore)) async {
            opened.1.shutdown()
            await opened.1.barrier()
            #expect(opened.0.close() == nil)
        }

        var opened = try await open()
        var sequences: [UInt64] = []
        for index in 1...5 { sequences.append(try #require(await opened.1.send(["type": "add", "label": .string("a\(index)")]).entry?.sequence)) }
        let newest = try await opened.1.state()
        try await opened.1.jump(to: sequences[1])
        #expect(try await opened.1.state()["count"] == 2)
        await close(opened)
        opened = try await open()
        #expect(try await opened.1.state() == newest, "a jump is not kept")

        sequences = []
        for index in 6...8 { sequences.append(try #require(await opened.1.send(["type": "add", "label": .string("b\(index)")]).entry?.sequence)) }
        try await opened.1.jump(to: sequences[0])
        try await opened.1.rewind(to: sequences[0])
        _ = await opened.1.send(["type": "add", "label": "after the rewind"])
        let rewound = try await opened.1.state()
        #expect(rewound["count"] == 7)
        await close(opened)
        opened = try await open()
        #expect(try await opened.1.state() == rewound, "the rewind's state, and what came after it")

        try Data(Self.app.replacingOccurrences(of: "local app = {}", with: """
            local app = {}
            app.schemaVersion = 2
            function app.migrate(state, from) state.migrated = (state.migrated or 0) + 1 end
            """).utf8).write(to: folder.appendingPathComponent("app.lua"))
        try await opened.1.reload()
        _ = await opened.1.send(["type": "add", "label": "after the reload"])
        let reloaded = try await opened.1.state()
        #expect(reloaded["migrated"] == 1)
        #expect(reloaded["count"] == 8)
        await close(opened)
        opened = try await open()
        #expect(try await opened.1.state() == reloaded, "the migrated state, migrated once")
        await close(opened)
    }

    /// The file is held while a database is open on it: a second one is refused in words, and the file is
    /// free again once the first is closed.
    @Test func aFileIsHeldWhileOpen() async throws {
        let path = databasePath()
        defer { remove(path) }
        let first = try StoreDatabase(path: path, app: "app")
        #expect(throws: PersistenceFailure.self) { try StoreDatabase(path: path, app: "app") }
        do {
            _ = try StoreDatabase(path: path, app: "app")
        } catch {
            #expect(error.description == "\(path): is in use by another process (one store per file: stop the other run, or choose another file)")
        }
        #expect(first.close() == nil)
        let again = try StoreDatabase(path: path, app: "app")
        #expect(again.close() == nil)
    }

    /// What the database file itself holds, in bytes (the size its header gives: what checkpoints have copied out
    /// of the write-ahead log), read from the file as it is on disk.
    func checkpointedBytes(_ path: String) throws -> Int {
        let file = try #require(FileHandle(forReadingAtPath: path))
        defer { try? file.close() }
        let header = file.readData(ofLength: 32)
        guard header.count == 32 else { return 0 } // (nothing copied into it yet)
        let pageSize = Int(header[16]) << 8 | Int(header[17])
        let pages = header[28..<32].reduce(0) { $0 << 8 | Int($1) }
        return (pageSize == 1 ? 65_536 : pageSize) * pages
    }

    /// The write-ahead log is copied into the database file once the writer pauses after a burst (a burst below
    /// the log's limit, `logLimitPages`, is not held up by it): the file holds the burst's entries then.
    @Test func theLogIsCheckpointedInAPauseAfterABurst() async throws {
        let folder = try CLI.makeApp(Self.app)
        let path = databasePath()
        defer { try? FileManager.default.removeItem(at: folder); remove(path) }
        let database = try StoreDatabase(path: path, app: "app", snapshotInterval: .max)
        let store = try await store(folder, database)
        try database.waitUntilCommitted(through: 0)
        let started = try checkpointedBytes(path)
        let label = LuaValue.string(String(repeating: "x", count: 200))
        let actions = 6_000 // (lines of about 300 bytes: past the 1 MiB that makes a pause's checkpoint worth it)
        for _ in 1...actions { store.dispatch(["type": "add", "label": label]) }
        try database.waitUntilCommitted(through: UInt64(actions))
        let expected = started + actions * 200
        #expect(await eventually(timeout: .seconds(60)) { ((try? checkpointedBytes(path)) ?? 0) >= expected },
                "the burst's entries are in the file")
        store.shutdown()
        await store.barrier()
        #expect(database.close() == nil)
    }

    /// `logLimitPages` bounds the write-ahead log: with 32 pages, commits of a few pages each keep it near 32 pages
    /// however much is written (after each checkpoint it is written over from its start); the default limit lets
    /// the same writing grow it past 150.
    @Test func theLogStaysWithinItsLimit() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        /// The most pages the log held while 2,000 actions were committed ten at a time.
        func largestLog(limit: Int) async throws -> Int {
            let path = databasePath()
            defer { remove(path) }
            let database = try StoreDatabase(path: path, app: "app", snapshotInterval: .max, logLimitPages: limit)
            let store = try await store(folder, database)
            let label = LuaValue.string(String(repeating: "x", count: 200))
            var largest = 0
            for round in 1...200 {
                for _ in 1...10 { store.dispatch(["type": "add", "label": label]) }
                try database.waitUntilCommitted(through: UInt64(round * 10))
                let bytes = (try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? NSNumber)?.intValue ?? 0
                largest = max(largest, bytes / (4_096 + 24)) // (a frame: a page and its header)
            }
            store.shutdown()
            await store.barrier()
            #expect(database.close() == nil)
            return largest
        }
        let limited = try await largestLog(limit: 32)
        #expect(limited >= 32 && limited <= 40, "a log held to 32 pages reached \(limited)")
        let unlimited = try await largestLog(limit: StoreDatabase.defaultLogLimitPages)
        #expect(unlimited > 150, "the default limit's log reached only \(unlimited) pages: the writing did not test the limit")
    }

    /// A change applied to a resumed state: the value at its path replaced in place, nil removes (and ends the
    /// sequence there, as in Lua), a missing table on the way is made, the empty path replaces the whole state.
    @Test func changesApplyAsTheJournalMeansThem() {
        var state: LuaValue = ["list": .table(LuaTable(array: [1, 2, 3])), "name": "a"]
        state.apply(StateChange(path: ["list", 2], value: 20))
        #expect(state["list"] == .table(LuaTable(array: [1, 20, 3])))
        state.apply(StateChange(path: ["list", 4], value: 4))
        #expect(state["list"] == .table(LuaTable(array: [1, 20, 3, 4])))
        state.apply(StateChange(path: ["list", 2], value: nil))
        #expect(state["list"] == .table(LuaTable(array: [1], fields: [.integer(3): 3, .integer(4): 4])))
        state.apply(StateChange(path: ["deep", "er", "est"], value: true))
        #expect(state["deep"]["er"]["est"] == true)
        state.apply(StateChange(path: ["name"], value: nil))
        #expect(state["name"] == .nil)
        state.apply(StateChange(path: [], value: ["fresh": 1]))
        #expect(state == ["fresh": 1])
    }
    /// A durable store goes on with its clock: each entry's time is in the database (as what it adds to the line
    /// before, counted from its snapshot), the store resumes knowing its last entry's time and when it first
    /// started, and `os.clock()` goes on counting from that start.
    @Test func aStoreResumesItsClock() async throws {
        let folder = try CLI.makeApp("""
            local app = {}
            function app.init() return { at = {}, clocks = {} } end
            function app.reduce(state, action) state.at[#state.at + 1] = os.time(); state.clocks[#state.clocks + 1] = os.clock() end
            function app.props(state) return { n = #state.at } end
            return app
            """)
        let path = databasePath()
        defer { try? FileManager.default.removeItem(at: folder); remove(path) }
        let millis = Protected<Int64>(1_800_000_000_000)
        var options = Self.options
        options.clock = StoreClock(now: { StoreClock.date(millis: millis.value) })
        let database = try StoreDatabase(path: path, app: "app", snapshotInterval: 4)
        options.persistence = database
        let first = try await ScriptedStore(app: folder, options: options)
        var last: JournalEntry?
        for step in 1...10 {
            millis.withLock { $0 += Int64(step) * 1000 } // (a snapshot every 4 entries: some lines count from one)
            last = await first.send(["type": "tick"]).entry
        }
        let expected = try await first.state()
        first.shutdown()
        await first.barrier()
        #expect(database.close() == nil)

        let reopened = try StoreDatabase(path: path, app: "app")
        #expect(reopened.resumed?.time == last?.time)
        #expect(reopened.resumed?.clock.started == 1_800_000_000_000)
        #expect(try reopened.resumed?.decodedState() == expected)
        millis.withLock { $0 = 1_900_000_000_000 }
        options.persistence = reopened
        let second = try await ScriptedStore(app: folder, options: options)
        #expect(second.recordedClock.started == 1_800_000_000_000, "the clock it started with")
        _ = await second.send(["type": "tick"])
        #expect(try await second.state()["clocks"][11] == .number(100_000_000), "os.clock() counts from the first start")
        second.shutdown()
        await second.barrier()
        #expect(reopened.close() == nil)
    }
}
