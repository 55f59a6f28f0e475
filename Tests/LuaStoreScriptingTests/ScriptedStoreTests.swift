import Foundation
import LuaKit
import LuaStoreContract
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The app contract, transactions, change tracking and effects of a scripted store.
@Suite(.tags(.concurrency)) struct ScriptedStoreTests {
    func makeStore(_ files: [String: String] = ["app.lua": testApp, "lib/util.lua": testUtil]) async throws
        -> (ScriptedStore, Recorder, AppFolder) {
        let folder = try AppFolder(files)
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        recorder.observe(store)
        return (store, recorder, folder)
    }

    /// Stores that share a pool's thread: each its own VM and state, their actions taking turns; one that runs out
    /// of time fails alone.
    @Test func storesSharingAPoolsThreadKeepTheirOwnStates() async throws {
        let folder = try AppFolder(["app.lua": ChildStoreTests.app])
        defer { folder.remove() }
        let looping = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action)
              if action.type == "spin" then while true do end end
              state.count = state.count + 1
            end
            function app.props(state) return { count = state.count } end
            return app
            """])
        defer { looping.remove() }
        let pool = LuaThreadPool(threads: 1, name: "store-pool-test")
        let recorder = Recorder()
        var options = recorder.options
        options.threads = pool
        let first = try await ScriptedStore(app: folder.url, options: options)
        let second = try await ScriptedStore(app: folder.url, options: options)
        let third = try await ScriptedStore(app: looping.url, options: options)
        #expect(first.thread === second.thread && second.thread === third.thread && first.thread === pool.threads[0])
        for _ in 0..<3 { first.dispatch(["type": "increment"]) }
        second.dispatch(["type": "increment"])
        let spun = await third.send(["type": "spin"])
        #expect(spun.failure?.error.kind == .timeout)
        _ = await third.send(["type": "increment"])
        await first.barrier()
        await second.barrier()
        #expect(try await first.props() == ["count": 3])
        #expect(try await second.props() == ["count": 1])
        #expect(try await third.props() == ["count": 1])
        for store in [first, second, third] { store.shutdown() }
    }

    /// Loading an app gives the caller's thread back while the store's thread works: stores loading at once
    /// (one more than the threads all tasks share) do not stop the process's other tasks. Each `init` waits
    /// until a task releases it; had the loads held the shared threads, that task could never run.
    @Test func loadingStoresDoNotHoldTheThreadsTasksShare() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() print("loading") return { n = 0 } end
            function app.reduce(state, action) state.n = state.n + 1 end
            function app.props(state) return { n = state.n } end
            return app
            """])
        defer { folder.remove() }
        let count = ProcessInfo.processInfo.activeProcessorCount + 1
        let entered = Protected(0)
        let waitedOut = Protected(0)
        let gate = DispatchSemaphore(value: 0)
        var options = ScriptedStoreOptions(log: { _ in
            entered.withLock { $0 += 1 }
            // (Bounded: a held thread fails the test instead of hanging it.)
            if gate.wait(timeout: .now() + 60) == .timedOut { waitedOut.withLock { $0 += 1 } }
        }, failures: { _ in })
        // (The test is about threads: an init waiting at its gate while a loaded machine starts the others must not
        // run out of its budget, whose wall-clock backstop is five budgets.)
        options.limits.stateBuildingTimeBudget = .seconds(60)
        let releaser = Task.detached {
            let released = await eventually(timeout: .seconds(60)) { entered.value == count }
            for _ in 0..<count { gate.signal() }
            return released
        }
        let stores = try await withThrowingTaskGroup(of: ScriptedStore.self) { group in
            for _ in 0..<count { group.addTask { [options] in try await ScriptedStore(app: folder.url, options: options) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(await releaser.value, "every init began while the others waited")
        #expect(waitedOut.value == 0, "no init waited out its gate")
        for store in stores {
            #expect(await store.send(["type": "go"]).failure == nil)
            store.shutdown()
        }
    }

    /// `journalEntries` from async code waits for the store's thread without holding the caller's: while a run
    /// holds the store's thread, more tasks than there are cores ask for a stream; every one gets it once the run
    /// ends, and hears the actions after it — and no more than that (the entry of the run it waited for is before
    /// "now").
    @Test func askingForTheJournalDoesNotHoldTheThreadsTasksShare() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { n = 0 } end
            function app.reduce(state, action) if action.type == "hold" then print("held") end state.n = state.n + 1 end
            function app.props(state) return { n = state.n } end
            return app
            """])
        defer { folder.remove() }
        let count = ProcessInfo.processInfo.activeProcessorCount + 1
        let held = Protected(0), asked = Protected(0), waitedOut = Protected(0)
        let gate = DispatchSemaphore(value: 0)
        var options = ScriptedStoreOptions(log: { _ in
            held.withLock { $0 += 1 }
            // (Bounded: a held thread fails the test instead of hanging it.)
            if gate.wait(timeout: .now() + 60) == .timedOut { waitedOut.withLock { $0 += 1 } }
        }, failures: { _ in })
        options.limits.timeBudget = .seconds(60) // (the held run outlasts its gate on a loaded machine: see above)
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        store.dispatch(["type": "hold"])
        #expect(await eventually(timeout: .seconds(30)) { held.value == 1 })
        let releaser = Task.detached {
            let released = await eventually(timeout: .seconds(60)) { asked.value == count }
            try? await Task.sleep(for: .milliseconds(50)) // (the last to ask is then waiting)
            gate.signal()
            return released
        }
        let streams = await withTaskGroup(of: AsyncStream<JournalEntry>.self) { group in
            for _ in 0..<count {
                group.addTask {
                    asked.withLock { $0 += 1 }
                    return await store.journalEntries()
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(await releaser.value, "every task asked while the run held the store's thread")
        #expect(waitedOut.value == 0, "the run did not wait out its gate")
        #expect(await store.send(["type": "after"]).failure == nil)
        for stream in streams {
            let first = await withinDeadline { () -> JournalEntry? in
                for await entry in stream { return entry }
                return nil
            }
            #expect(first??.action?["type"] == "after", "\(String(describing: first))")
        }
    }

    @Test func initialPropsThenChanges() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "increment"])
        store.dispatch(["type": "add", "title": "Buy milk"])
        store.dispatch(["type": "toggle", "id": 1])
        #expect(await eventually { recorder.props.value.last == ["count": 1, "total": 1, "done": 1] })
        #expect(recorder.props.value.first == ["count": 0, "total": 0, "done": 0])
        #expect(recorder.failures.value.isEmpty)
    }

    @Test(arguments: [
        ("explode", ScriptFailure.Stage.reduce, "exploded on purpose", "app.lua:26"),
        ("loop", .reduce, "time budget of 1000 ms exceeded", "app.lua:29"),
        ("hog", .reduce, "not enough memory", "app.lua:33"),
        ("badcommand", .reduce, "command #1 (http): field 'url' must be a string (got number)", "app.lua:11"),
    ])
    func failingReducerLeavesStateExactlyAsItWas(action: String, stage: ScriptFailure.Stage, message: String, location: String) async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "add", "title": "first"])
        store.dispatch(["type": "increment"])
        let before = try await store.state()
        #expect(await eventually { recorder.props.value.last?["count"] == 1 })
        let propsBefore = recorder.props.value.count
        store.dispatch(["type": .string(action)])
        let after = try await store.state()
        #expect(after == before, "deep, bit for bit")
        let failure = try #require(recorder.failures.value.first)
        #expect(failure.stage == stage)
        #expect(failure.error.message == message)
        #expect(failure.error.location == location)
        #expect(failure.action == ["type": .string(action)])
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last?["count"] == 2 }, "the store serves the next action")
        // The next action's props arrived, once; the failed action's would have come before them.
        #expect(recorder.props.value.count == propsBefore + 1, "the failed action notified no observer")
    }

    /// An action that is not a table with a string `type` is refused before the reducer runs: reported with
    /// what was wrong, the state (including the action just before it) untouched, the next action served.
    @Test(arguments: [["title": "no type"], ["type": 1], .string("increment")] as [LuaValue])
    func actionsWithoutAStringTypeAreRefused(action: LuaValue) async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "increment"])
        let before = try await store.state()
        #expect(before["count"] == 1)
        #expect(await eventually { recorder.props.value.last?["count"] == 1 })
        let propsBefore = recorder.props.value.count
        store.dispatch(action)
        #expect(try await store.state() == before)
        let failure = try #require(recorder.failures.value.first)
        #expect(failure.stage == .reduce)
        #expect(failure.error.message == "an action must be a table with a string field 'type' (got \(action))")
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last?["count"] == 2 }, "the store serves the next action")
        // The next action's props arrived, once; the failed action's would have come before them.
        #expect(recorder.props.value.count == propsBefore + 1, "the failed action notified no observer")
    }

    /// `rawset` on a state table is refused (it would write past the journal): the reducer fails with file and
    /// line, the state is as it was, and props keep showing the real state.
    @Test func rawsetOnStateIsRefused() async throws {
        let (store, recorder, folder) = try await makeStore(["app.lua": """
            local app = {}
            function app.init() return { count = 0, items = { { n = 1 } } } end
            function app.reduce(state, action)
              if action.type == "raw" then rawset(state.items[1], "n", 99) else state.count = state.count + 1 end
            end
            function app.props(state) return { count = state.count, n = state.items[1].n } end
            return app
            """])
        defer { folder.remove() }
        store.dispatch(["type": "increment"])
        let before = try await store.state()
        store.dispatch(["type": "raw"])
        #expect(try await store.state() == before)
        let failure = try #require(await eventually { !recorder.failures.value.isEmpty } ? recorder.failures.value.first : nil)
        #expect(failure.error.message == "rawset: this table can be changed only by assignment (it is a luastore state)")
        #expect(failure.error.location == "app.lua:4")
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last == ["count": 2, "n": 1] })
    }

    /// A write with a nil or NaN key fails like one on a plain table, names file and line, and is rolled back
    /// with the writes before it (nothing is journaled for the bad key, so undoing cannot fail).
    @Test(arguments: [("nilkey", "table index is nil"), ("nankey", "table index is NaN")])
    func writesWithAnInvalidKeyFailAndRollBack(action: String, message: String) async throws {
        let (store, recorder, folder) = try await makeStore(["app.lua": """
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action)
              state.count = state.count + 1
              if action.type == "nilkey" then state[nil] = 1 elseif action.type == "nankey" then state[0/0] = 1 end
            end
            function app.props(state) return { count = state.count } end
            return app
            """])
        defer { folder.remove() }
        store.dispatch(["type": "increment"])
        let before = try await store.state()
        store.dispatch(["type": .string(action)])
        #expect(try await store.state() == before)
        let failures = recorder.failures.value
        #expect(failures.count == 1, "one failure, no failed rollback: \(failures)")
        #expect(failures.first?.error.message == message)
        #expect(failures.first?.error.location == "app.lua:5")
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last == ["count": 2] })
    }

    /// Reading a nil or NaN key gives nil, as from a plain table — in props (whose reads are noted) and in a
    /// reducer; no write can ever land there, so such a read never makes the props run again.
    @Test func readsWithANilOrNaNKeyGiveNil() async throws {
        let (store, recorder, folder) = try await makeStore(["app.lua": """
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action)
              if state[nil] == nil and state[0/0] == nil then state.count = state.count + 1 end
            end
            function app.props(state)
              return { count = state.count, missing = state[nil] == nil and state[0/0] == nil }
            end
            return app
            """])
        defer { folder.remove() }
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last == ["count": 1, "missing": true] })
        #expect(recorder.failures.value.isEmpty, "\(recorder.failures.value)")
    }

    /// A reader whose value cannot cross into Swift is reported (stage, path, message) on its own; the other
    /// readers evaluated in the same flush still get their values, and it recovers once its value is plain.
    @Test func oneReadersBadValueSparesTheOthers() async throws {
        let (store, recorder, folder) = try await makeStore(["app.lua": """
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action) state.count = state.count + (action.by or 1) end
            function app.props(state) return { count = state.count, odd = state.count % 2 == 1 and print or nil } end
            return app
            """])
        defer { folder.remove() }
        let counts = Protected<[LuaValue]>([])
        store.observe(["count"]) { value in
            counts.withLock { $0.append(value) }
            return .active
        }
        store.dispatch(["type": "add"])
        #expect(await eventually { counts.value.last == 1 })
        let failure = try #require(await eventually { !recorder.failures.value.isEmpty } ? recorder.failures.value.first : nil)
        #expect(failure.stage == .props)
        #expect(failure.error.kind == .conversion)
        #expect(failure.error.path == "props.odd")
        #expect(failure.error.message.hasPrefix("a function cannot be converted"))
        store.dispatch(["type": "add"])
        #expect(await eventually { recorder.props.value.last == ["count": 2] })
        #expect(counts.value == [0, 1, 2])
    }

    @Test func reducerMayReturnANewState() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "add", "title": "x"])
        store.dispatch(["type": "replace"])
        #expect(await eventually { recorder.props.value.last == ["count": 100, "total": 0, "done": 0] })
        #expect(try await store.state()["nested"] == ["deep": ["value": 1]])
    }

    @Test func propsRunOnlyWhenTheirInputsChanged() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last?["count"] == 1 })
        let runs = recorder.logs.value.filter { $0 == "props ran" }.count
        store.dispatch(["type": "fetch", "id": "a", "url": "http://127.0.0.1:1/"])
        store.dispatch(["type": "cancel", "id": "a"])
        store.dispatch(["type": "unknown action type"])
        store.dispatch(["type": "increment"])
        // The increment's props arrived, so the three actions before it were flushed too: props ran once more.
        #expect(await eventually { recorder.props.value.last?["count"] == 2 })
        #expect(recorder.logs.value.filter { $0 == "props ran" }.count == runs + 1, "requests and log are not read by props")
    }

    @Test func selectorsOfUnchangedSlicesAreNotCalled() async throws {
        let (store, _, folder) = try await makeStore()
        defer { folder.remove() }
        for index in 1...20 { store.dispatch(["type": "add", "title": .string("item \(index)")]) }
        _ = try await store.state()
        let deliveries = Protected<[Int: Int]>([:])
        for index in 1...20 {
            store.observe(["items", .integer(Int64(index))]) { _ in
                deliveries.withLock { $0[index, default: 0] += 1 }
                return .active
            }
        }
        #expect(await eventually { deliveries.value.count == 20 })
        store.dispatch(["type": "toggle", "id": 7])
        store.dispatch(["type": "increment"])
        _ = try await store.state()
        #expect(await eventually { deliveries.value[7] == 2 })
        // A later change's delivery arrives after everything the first one caused.
        store.dispatch(["type": "toggle", "id": 3])
        #expect(await eventually { deliveries.value[3] == 2 })
        #expect(deliveries.value.filter { $0.value != 1 }.map(\.key).sorted() == [3, 7])
    }

    /// A reducer that returns a valid and a malformed command fails as a whole: the state is undone and not
    /// even the valid command runs. (A later action's command does run: the log is being listened to.)
    @Test func noCommandRunsWhenOneOfThemIsMalformed() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "halfbad"])
        #expect(await eventually { !recorder.failures.value.isEmpty })
        #expect(recorder.failures.value.first?.error.message == "command #2 (http): field 'url' must be a string (got number)")
        store.dispatch(["type": "say"])
        #expect(await eventually { recorder.logs.value.contains("count is 0") })
        #expect(!recorder.logs.value.contains("the valid command ran"))
        #expect(try await store.state()["count"] == 0)
    }

    @Test func commandsAreReturnedAndRun() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "increment"])
        store.dispatch(["type": "say"])
        #expect(await eventually { recorder.logs.value.contains("count is 1") })
        store.dispatch(["type": "later"])
        #expect(await eventually { recorder.props.value.last?["count"] == 2 })
        #expect(await store.waitUntilIdle(timeout: .seconds(30)))
    }

    /// A JSON answer reaches the script as every JSON the store reads: names by their bytes (Foundation's decoder
    /// took "é" composed and decomposed for one name and kept one of the two values).
    @Test func aJSONAnswersNamesAreKeptByTheirBytes() async throws {
        let server = try await TestServer.start()
        let folder = try AppFolder(["app.lua": """
            local luastore = require("luastore")
            local app = {}
            function app.init() return { sum = 0 } end
            function app.reduce(state, action)
              if action.type == "fetch" then return nil, { luastore.http { url = action.url, success = "got", failure = "failed" } } end
              if action.type == "got" then for _, v in pairs(action.json) do state.sum = state.sum + v end end
            end
            function app.props(state) return { sum = state.sum } end
            return app
            """])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        store.dispatch(["type": "fetch", "url": .string(server.base + "/spellings")])
        #expect(await eventually(timeout: .seconds(60)) { (try? await store.state()["sum"]) == 3 })
        store.shutdown()
        await server.stop()
    }

    @Test func httpRequestsRunAndAreCancelledByState() async throws {
        let server = try await TestServer.start()
        let (store, _, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "fetch", "id": "hello", "url": .string(server.base + "/hello")])
        #expect(await eventually(timeout: .seconds(60)) { (try? await store.state()["log"]) == ["fetched hello hello"] })
        store.dispatch(["type": "fetch", "id": "slow", "url": .string(server.base + "/slow")])
        #expect(await eventually(timeout: .seconds(60)) { server.slowStarted.value == 1 })
        store.dispatch(["type": "cancel", "id": "slow"])
        store.dispatch(["type": "fetch", "id": "refused", "url": "http://127.0.0.1:1/"])
        #expect(await eventually(timeout: .seconds(60)) { (try? await store.state()["log"])?.table?.array.count == 2 })
        // The server answers the slow request after 2 s, well inside the app's 30 s timeout (long: a test server kept
        // waiting by a busy machine must not make a request time out): had it not been
        // cancelled, that answer would be logged before the one to a request made after the server sent it.
        #expect(await eventually(timeout: .seconds(60)) { server.slowFinished.value == 1 })
        store.dispatch(["type": "fetch", "id": "again", "url": .string(server.base + "/hello")])
        #expect(await eventually(timeout: .seconds(60)) { (try? await store.state()["log"])?.table?.array.count == 3 })
        #expect(try await store.state()["log"] == ["fetched hello hello", "fetchFailed refused connectionFailed", "fetched again hello"],
                "the cancelled request never reports back")
        await server.stop()
    }

    @Test func appsThatCannotLoadSayWhy() async throws {
        let cases: [([String: String], ScriptFailure.Stage, String, String?)] = [
            (["app.lua": "return {"], .load, "unexpected symbol near <eof>", "app.lua:1"),
            (["app.lua": "return { init = function() return {} end, reduce = function() end }"], .load,
             "app.lua must export a function 'props'", "app.lua"),
            (["app.lua": "return 42"], .load, "app.lua must return a table of functions (init, reduce, props), not a number", "app.lua"),
            (["app.lua": "return { init = function() return 1 end, reduce = function() end, props = function() end }"], .initialize,
             "init must return a table (it returned a number)", nil),
            (["other.lua": "return {}"], .load, "has no app.lua", nil),
        ]
        for (files, stage, message, location) in cases {
            let folder = try AppFolder(files)
            defer { folder.remove() }
            do {
                _ = try await ScriptedStore(app: folder.url, options: Recorder().options)
                Issue.record("expected \(message)")
            } catch {
                #expect(error.stage == stage)
                #expect(error.error.message.hasSuffix(message), "\(error)")
                #expect(error.error.location == location)
            }
        }
    }

    struct Counter: Decodable, Sendable, Equatable {
        var count: Int
        var total: Int
        var done: Int
    }

    struct Item: Decodable, Sendable, Equatable {
        var id: Int
        var title: String
        var done: Bool
    }

    @Test func stateSlicesDecodeIntoSwiftTypes() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "add", "title": "Buy milk"])
        let items = Protected<[Item]>([])
        store.observe(["items", 1], as: Item.self) { item in
            items.withLock { $0.append(item) }
            return .active
        }
        #expect(await eventually { items.value.count == 1 }, "the observer is registered with the item as it is now")
        store.dispatch(["type": "toggle", "id": 1])
        #expect(await eventually { items.value == [Item(id: 1, title: "Buy milk", done: false), Item(id: 1, title: "Buy milk", done: true)] })
        store.observe(["count"], as: Item.self) { _ in .active }
        #expect(await eventually { recorder.failures.value.first?.error.path == "state.count" })
    }

    @Test func propsDecodeIntoSwiftTypes() async throws {
        let (store, _, folder) = try await makeStore()
        defer { folder.remove() }
        let decoded = Protected<[Counter]>([])
        store.observeProps(as: Counter.self) { props in
            decoded.withLock { $0.append(props) }
            return .active
        }
        store.dispatch(["type": "increment"])
        #expect(await eventually { decoded.value.last == Counter(count: 1, total: 0, done: 0) })
    }
}
