import Foundation
import LuaKit
import LuaStoreCore
@testable import LuaStoreScripting
import LuaStoreTestSupport
import LuaStoreConcurrency
import Testing

/// Queued actions reach the VM a run at a time (one call for many actions); every action must still be its
/// own transaction, with its own failure, commands and time budget.
@Suite struct ScriptedRunTests {
    /// Everything the test app can do, good and bad, in one queue.
    static let mixed: [LuaValue] = [
        ["type": "increment"], ["type": "add", "title": "first"], ["type": "explode"], ["type": "increment"],
        ["type": "loop"], ["type": "toggle", "id": 1], ["type": "hog"], ["type": "badcommand"], ["type": "increment"],
        ["type": "say"], .string("not a table"), ["type": "toggle", "id": 99], ["type": "replace"], ["type": "increment"],
        ["title": "no type"], ["type": "add", "title": "second"],
    ] + Array(repeating: ["type": "increment"], count: 40) // a stretch a run takes whole

    /// Runs `body` with an engine for the app `files`, on a thread of its own, with a time budget of `budget`.
    func withEngine(_ files: [String: String], budget: Duration, _ body: (ScriptEngine, AppFolder) throws -> Void) throws {
        let folder = try AppFolder(files)
        defer { folder.remove() }
        let thread = LuaThread(name: "run-test")
        try thread.sync { () throws in
            var limits = LuaLimits()
            limits.timeBudget = budget
            try body(try ScriptEngine(folder: folder.url, thread: thread, limits: limits, log: { _ in }, report: { _ in }), folder)
        }
    }

    struct Outcome: Equatable {
        let state: LuaValue
        let props: LuaValue?
        let failures: [String]
        let logs: [String]
    }

    /// The outcome of the mixed actions, dispatched at once or one by one, and how many times the reducer
    /// crossed into the VM for them.
    func outcome(queuedAtOnce: Bool) async throws -> (outcome: Outcome, crossings: Int) {
        let folder = try AppFolder(["app.lua": testApp, "lib/util.lua": testUtil])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        recorder.observe(store)
        if queuedAtOnce {
            // While the store's thread is busy, every action joins the inbox: the drain finds them all at once.
            store.thread.sync { for action in Self.mixed { store.dispatch(action) } }
        } else {
            for action in Self.mixed {
                store.dispatch(action)
                await store.barrier()
            }
        }
        await store.barrier()
        #expect(await store.waitUntilIdle(timeout: .seconds(30)))
        let failures = recorder.failures.value.map { failure in
            "\(failure.stage) \(failure.error.kind) \(failure.error.location ?? "-") \(failure.error.message) \(failure.action.map { "\($0)" } ?? "-")"
        }
        let crossings = store.thread.sync { store.engine.runs.crossings }
        let outcome = Outcome(state: try await store.state(), props: recorder.props.value.last, failures: failures,
                              logs: recorder.logs.value.filter { !$0.hasPrefix("props ran") })
        return (outcome, crossings)
    }

    @Test func aRunEndsExactlyAsTheSameActionsOneAtATime() async throws {
        let (oneByOne, crossingsOneByOne) = try await outcome(queuedAtOnce: false)
        let (run, crossingsOfRuns) = try await outcome(queuedAtOnce: true)
        #expect(run == oneByOne)
        // One by one, every action crossed into the VM on its own; queued at once, they crossed as runs (cut
        // only after the actions the store must look at: commands, failures, stale subscriptions).
        #expect(crossingsOneByOne == Self.mixed.count)
        #expect(crossingsOfRuns * 2 < Self.mixed.count, "\(crossingsOfRuns) crossings for \(Self.mixed.count) actions")
        #expect(run.failures.count == 7)
        #expect(run.failures.first?.hasPrefix("reduce runtime app.lua:26 exploded on purpose") == true)
        #expect(run.failures.contains { $0.contains("app.lua:29 time budget of 1000 ms exceeded") })
        #expect(run.state["count"] == 141 && run.state["items"].table?.count == 1)
        #expect(run.logs == ["count is 3"])
    }

    /// Counts every action it sees (`seen`, which no props read) and the `show`s (`shown`, which they do).
    static let seenAndShownApp = """
        local app = {}
        function app.init() return { seen = 0, shown = 0 } end
        function app.reduce(state, action)
          state.seen = state.seen + 1
          if action.type == "show" then state.shown = state.shown + 1 end
        end
        function app.props(state) return { shown = state.shown } end
        return app
        """

    /// `body` with a store of `app` notifying after every action, and an observer of its props.
    func withEveryActionStore(_ app: String = Self.seenAndShownApp, timeBudget: Duration? = nil,
                              _ body: (ScriptedStore, Recorder) async throws -> Void) async throws {
        let folder = try AppFolder(["app.lua": app])
        defer { folder.remove() }
        let recorder = Recorder()
        var options = recorder.everyActionOptions
        if let timeBudget { options.limits.timeBudget = timeBudget }
        let store = try await ScriptedStore(app: folder.url, options: options)
        recorder.observe(store)
        await store.barrier()
        try await body(store, recorder)
    }

    /// Under `.everyAction`, a run ends after each action that changed what the props read (observers see every
    /// such action) and goes on through actions that changed only what nobody reads — also in the same table.
    @Test func everyActionRunsEndOnlyWhereTheirChangeIsRead() async throws {
        try await withEveryActionStore { store, recorder async throws in
            let quiet: [LuaValue] = Array(repeating: ["type": "quiet"], count: 1_000)
            let show: LuaValue = ["type": "show"]
            let actions = quiet + [show] + quiet.prefix(10) + [show, show] + quiet
            store.thread.sync { for action in actions { store.dispatch(action) } }
            await store.barrier()
            #expect(recorder.props.value == [["shown": 0], ["shown": 1], ["shown": 2], ["shown": 3]])
            #expect(try await store.state() == ["seen": .integer(Int64(actions.count)), "shown": 3])
            let crossings = store.thread.sync { store.engine.runs.crossings }
            #expect(crossings < 40, "\(crossings) crossings for \(actions.count) actions")
            #expect(recorder.failures.value.isEmpty)
        }
    }

    /// Under `.everyAction`, when every action changes what the props read, each ends its run: actions go one at a
    /// time, and a run of two is tried only now and then (it converts an action it does not reduce), while a
    /// stretch of actions nobody reads still goes in runs.
    @Test func everyActionStoresDoNotConvertActionsTheyDoNotReduce() async throws {
        try await withEveryActionStore { store, recorder async throws in
            let shows: [LuaValue] = Array(repeating: ["type": "show"], count: 400)
            let quiet: [LuaValue] = Array(repeating: ["type": "quiet"], count: 2_000)
            store.thread.sync { for action in shows + quiet { store.dispatch(action) } }
            await store.barrier()
            #expect(try await store.state() == ["seen": 2_400, "shown": 400])
            #expect(recorder.props.value.count == 401)
            let (converted, crossings) = store.thread.sync { (store.engine.runs.convertedActions, store.engine.runs.crossings) }
            #expect(converted < 2_400 + 40, "\(converted) actions converted for 2,400")
            #expect(crossings < 400 + 100, "\(crossings) crossings: the quiet stretch still goes in runs")
        }
    }

    /// An app whose props refuse a count of 3, whose reducer can fail, and whose items a path observer can
    /// watch: the readers' every turn, good or bad, in one timeline.
    static let readersApp = """
        local app = {}
        function app.init() return { count = 0, items = { { done = false }, { done = false } } } end
        function app.reduce(state, action)
          if action.type == "increment" then state.count = state.count + 1
          elseif action.type == "toggle" then
            local item = state.items[action.id]
            item.done = not item.done
          elseif action.type == "explode" then
            state.count = -100
            error("exploded on purpose")
          end
        end
        function app.props(state)
          if state.count == 3 then error("props refuse 3") end
          return { count = state.count }
        end
        return app
        """

    /// A store of `readersApp` in `folder` under `notification`, with a props observer and a path observer of
    /// item 1 writing what they get, and every failure, into one timeline — given empty, once both had their
    /// first value.
    static func readersTimeline(_ folder: AppFolder, _ notification: NotificationPolicy) async throws
        -> (ScriptedStore, Protected<[String]>) {
        let timeline = Protected<[String]>([])
        var options = ScriptedStoreOptions(log: { _ in }, failures: { failure in
            timeline.withLock { $0.append("\(failure.stage) failed: \(failure.error.location ?? "-") \(failure.error.message)") }
        })
        options.notification = notification
        let store = try await ScriptedStore(app: folder.url, options: options)
        store.observeProps { props in
            timeline.withLock { $0.append("props \(props["count"].integer ?? -1)") }
            return .active
        }
        store.observe(["items", 1]) { item in
            timeline.withLock { $0.append("item 1 \(item["done"].boolean.map { "\($0)" } ?? "?")") }
            return .active
        }
        await store.barrier()
        #expect(timeline.value == ["props 0", "item 1 false"])
        timeline.withLock { $0 = [] }
        return (store, timeline)
    }

    /// Increments and toggles of `readersApp`, a failing action among them.
    static let mixedActions: [LuaValue] = [
        ["type": "increment"], ["type": "increment"], ["type": "toggle", "id": 1], ["type": "increment"],
        ["type": "increment"], ["type": "toggle", "id": 1], ["type": "toggle", "id": 2], ["type": "explode"],
        ["type": "increment"], ["type": "toggle", "id": 1],
    ]

    /// Under `.everyAction`, queued actions still go in runs, and the readers run within the run after each
    /// action that changed what they read: observers see every action's value, in order, interleaved with the
    /// failures of readers and of actions exactly as one action at a time would have them — also a path
    /// observer's value, a state table the next action of the run changes again. Batches of one action are every
    /// action too (and of none, as the store reads them).
    @Test(arguments: [NotificationPolicy.everyAction, .batched(maximumActions: 1), .batched(maximumActions: 0)])
    func everyActionReadersRunWithinARunAndSeeEveryActionInOrder(notification: NotificationPolicy) async throws {
        let folder = try AppFolder(["app.lua": Self.readersApp])
        defer { folder.remove() }
        let (store, timeline) = try await Self.readersTimeline(folder, notification)
        let mixed = Self.mixedActions
        let increments = Array(repeating: ["type": "increment"] as LuaValue, count: 200)
        let before = store.thread.sync { store.engine.runs.crossings }
        store.thread.sync { for action in mixed + increments { store.dispatch(action) } }
        await store.barrier()
        let expected = ["props 1", "props 2", "item 1 true", "props failed: app.lua:14 props refuse 3", "props 4",
                        "item 1 false", "reduce failed: app.lua:10 exploded on purpose", "props 5", "item 1 true"]
            + (6...205).map { "props \($0)" }
        #expect(timeline.value == expected)
        #expect(try await store.state()["count"] == 205)
        let crossings = store.thread.sync { store.engine.runs.crossings } - before
        // Runs end after a failure and after each change of the path observer's table (converted before the
        // next action), and the 200 increments go in a handful of runs.
        #expect(crossings < 30, "\(crossings) crossings for \(mixed.count + increments.count) actions")
    }

    /// Under `.batched(maximumActions: n)`, queued actions go in runs longer than a batch, and the readers run
    /// within the run at the store's notification points (every n-th action, counted from the start of the
    /// burst), when an action since the last point changed what they read: observers see what a store
    /// notifying after every n-th action shows, and a failing action is reported before they hear of anything
    /// after it — the timeline of runs split at each point — in far fewer crossings into the VM.
    @Test func batchedReadersRunWithinARunAtTheStoresPoints() async throws {
        let folder = try AppFolder(["app.lua": Self.readersApp])
        defer { folder.remove() }
        let (store, timeline) = try await Self.readersTimeline(folder, .batched(maximumActions: 4))
        // Counts after each action: 1 2 2 3 | 4 4 4 (8 fails) | 5 5 6 7 | then 8… — points after actions 4, 8, 12, …
        let mixed = Self.mixedActions + [["type": "increment"], ["type": "increment"]]
        let increments = Array(repeating: ["type": "increment"] as LuaValue, count: 198)
        let before = store.thread.sync { store.engine.runs.crossings }
        store.thread.sync { for action in mixed + increments { store.dispatch(action) } }
        await store.barrier()
        let expected = ["props failed: app.lua:14 props refuse 3", "item 1 true",
                        "reduce failed: app.lua:10 exploded on purpose", "props 4", "item 1 false",
                        "props 7", "item 1 true"]
            + stride(from: 11, through: 203, by: 4).map { "props \($0)" } + ["props 205"]
        #expect(timeline.value == expected)
        #expect(try await store.state()["count"] == 205)
        let crossings = store.thread.sync { store.engine.runs.crossings } - before
        // Split at every point, the 210 actions would cross at least 53 times.
        #expect(crossings < 30, "\(crossings) crossings for \(mixed.count + increments.count) actions")
    }

    /// The engine's side of it: the readers run at the points the store gives (`sinceNotification` actions
    /// since the last), within the run; a run stops at commands only when a point lies at or after them.
    @Test func aRunRunsTheReadersAtTheStoresPointsAndStopsForCommandsBeforeOne() throws {
        try withEngine(["app.lua": testApp, "lib/util.lua": testUtil], budget: .seconds(1)) { engine, _ in
            _ = try engine.currentSubscriptions() // evaluated once: clean
            engine.runs.notificationInterval = 4
            let seen = Protected<[Int64]>([])
            engine.addReader(.path(["count"]), Observer { count in
                seen.withLock { $0.append(count.integer ?? -1) }
                return .active
            })
            let increment: LuaValue = ["type": "increment"], say: LuaValue = ["type": "say"]
            #expect(engine.reduce(run: Array(repeating: increment, count: 10)[...], sinceNotification: 2).applied == 10)
            #expect(seen.value == [0, 2, 6, 10], "points after the 2nd, 6th and 10th action")
            #expect(engine.reduce(run: Array(repeating: increment, count: 5)[...]).applied == 5)
            #expect(seen.value == [0, 2, 6, 10, 14], "one point, after the 4th; the 5th waits for the store")
            engine.flush()
            #expect(seen.value == [0, 2, 6, 10, 14, 15])

            engine.runs.notificationInterval = 8
            var outcome = engine.reduce(run: [increment, increment, say, increment, increment])
            #expect(outcome.applied == 5, "no point at or after the commands: the run goes on")
            #expect(outcome.commands.map(\.offset) == [2] && outcome.commands.first?.commands.map(\.kind) == ["log"])
            #expect(seen.value == [0, 2, 6, 10, 14, 15], "no point in the run")
            engine.flush()
            engine.runs.notificationInterval = 4
            outcome = engine.reduce(run: ([increment, increment, increment, say] + Array(repeating: increment, count: 4))[...], sinceNotification: 1)
            #expect(outcome.applied == 4, "a point after the 3rd and the 7th: the store launches the commands first")
            #expect(outcome.commands.map(\.offset) == [3])
            #expect(seen.value == [0, 2, 6, 10, 14, 15, 19, 22])
        }
    }

    /// One action dispatched again and again reaches a `reduce` that provably only reads its fields as the very same
    /// table, not a copy per action; every other one gets a table of its own each time, as if converted anew: one
    /// that keeps its action (shared, the state would hold one table in two places, which it refuses), one that
    /// writes into a table the action holds (shared, each would see the last one's write).
    @Test func aRepeatedActionIsSharedOnlyWithAReduceThatCannotTellTheCopiesApart() throws {
        let apps: [(reduce: String, action: LuaValue, shares: Bool, path: [LuaKey], expected: LuaValue)] = [
            ("if action.type == 'count' then state.n = state.n + action.by end", ["type": "count", "by": 2], true,
             ["n"], 128),
            ("state.kept[#state.kept + 1] = action; state.n = #state.kept", ["type": "keep", "tag": "x"], false,
             ["n"], 64),
            ("local p = action.payload; p.n = p.n + 1; state.n = state.n + p.n", ["type": "bump", "payload": ["n": 1]], true,
             ["n"], 128),
        ]
        for app in apps {
            let source = """
                local app = {}
                function app.init() return { n = 0, kept = {} } end
                function app.reduce(state, action) \(app.reduce) end
                function app.props(state) return { n = state.n } end
                return app
                """
            try withEngine(["app.lua": source], budget: .seconds(5)) { engine, _ in
                var left = Array(repeating: app.action, count: 64)[...], failures: [String] = []
                while !left.isEmpty { // (in runs of several: the run's span)
                    let outcome = engine.reduce(run: left)
                    failures += outcome.failures.map { "\($0.1)" }
                    left = left.dropFirst(max(1, outcome.applied))
                }
                #expect(failures.isEmpty && engine.runs.convertedActions == 64, "\(app.reduce): \(failures)")
                let value = try engine.value(at: app.path)
                #expect(value == app.expected, "\(app.reduce)")
                #expect(engine.runs.actionReading?.readsOnly == app.shares, "\(app.reduce)")
            }
        }
    }

    /// A counter whose props never return once the count is 3.
    static let propsOutOfTimeAtThree = """
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action) state.count = state.count + 1 end
        function app.props(state)
          if state.count == 3 then while true do end end
          return { count = state.count }
        end
        return app
        """

    /// The same, its props run by the key they read (straight-line code: reads.c, `run_by_keys`), the endless loop
    /// in a function they call.
    static let propsByKeysOutOfTimeAtThree = """
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action) state.count = state.count + 1 end
        local function counted(n)
          if n == 3 then while true do end end
          return n
        end
        function app.props(state) return { count = counted(state.count) } end
        return app
        """

    /// The one failure `propsOutOfTimeAtThree` reports: the props', out of their 1 s budget, at the endless loop.
    static func expectPropsOutOfTimeOnce(_ failures: [ScriptFailure], at location: String = "app.lua:5") {
        #expect(failures.count == 1, "\(failures)")
        #expect(failures.first?.stage == .props)
        #expect(failures.first?.error.kind == .timeout)
        #expect(failures.first?.error.location == location)
        #expect(failures.first?.error.message == "time budget of 1000 ms exceeded")
    }

    /// Under `.everyAction`, props that run out of their time budget within a run are the props' failure, with
    /// the script's place: the action before them stays applied, the run stops there, and the next actions go
    /// on (the budget a spent call raises at every instruction recovers for them). The same one action at a time,
    /// and with props run by the key they read.
    @Test(arguments: [(true, false), (false, false), (true, true), (false, true)])
    func propsOutOfTimeWithinARunFailAloneAndTheActionsGoOn(queuedAtOnce: Bool, byKeys: Bool) async throws {
        let app = byKeys ? Self.propsByKeysOutOfTimeAtThree : Self.propsOutOfTimeAtThree
        // (A budget a loaded machine cannot spend on the props that return at once: only the endless loop runs out.)
        try await withEveryActionStore(app, timeBudget: .seconds(1)) { store, recorder async throws in
            if queuedAtOnce {
                store.thread.sync { for _ in 0..<10 { store.dispatch(["type": "increment"]) } }
            } else {
                for _ in 0..<10 {
                    store.dispatch(["type": "increment"])
                    await store.barrier()
                }
            }
            await store.barrier()
            #expect(try await store.state() == ["count": 10])
            #expect(recorder.props.value.map { $0["count"].integer ?? -1 } == [0, 1, 2, 4, 5, 6, 7, 8, 9, 10])
            Self.expectPropsOutOfTimeOnce(recorder.failures.value) // (line 5 in both apps: the endless loop)
        }
    }

    /// Batched, the store's flush runs the props after the run; props that run out of their time budget there are
    /// the props' failure, with the script's place, and the store goes on: the actions stay applied, and the next
    /// flush runs the props again.
    @Test func propsOutOfTimeInTheStoresFlushFailAloneAndTheStoreGoesOn() async throws {
        let folder = try AppFolder(["app.lua": Self.propsOutOfTimeAtThree])
        defer { folder.remove() }
        let recorder = Recorder()
        var options = recorder.options
        options.limits.timeBudget = .seconds(1) // (only the endless loop runs out, even on a loaded machine)
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        recorder.observe(store)
        await store.barrier()
        store.thread.sync { for _ in 0..<3 { store.dispatch(["type": "increment"]) } } // one run, one flush: at 3
        await store.barrier()
        store.dispatch(["type": "increment"])
        await store.barrier()
        #expect(try await store.state() == ["count": 4])
        #expect(recorder.props.value == [["count": 0], ["count": 4]])
        Self.expectPropsOutOfTimeOnce(recorder.failures.value)
    }

    /// After a run whose readers ran within it and left nothing behind, the store's flush does not call into
    /// the VM; after one that left work (a table dropped from the state, for the caches to let go), it does.
    @Test func theFlushAfterASettledRunIsFree() throws {
        let app = """
            local app = {}
            function app.init() return { count = 0, box = {} } end
            function app.reduce(state, action)
              state.count = state.count + 1
              if action.type == "drop" then state.box = {} end
            end
            function app.props(state) return { count = state.count } end
            return app
            """
        try withEngine(["app.lua": app], budget: .seconds(1)) { engine, _ in
            engine.runs.notificationInterval = 1
            let seen = Protected<[Int64]>([])
            engine.addReader(.props, Observer { props in
                seen.withLock { $0.append(props["count"].integer ?? -1) }
                return .active
            })
            let increments = Array(repeating: ["type": "increment"] as LuaValue, count: 5)
            #expect(engine.reduce(run: increments[...]).applied == 5)
            var calls = engine.vm.calls
            engine.flush()
            #expect(engine.vm.calls == calls, "the run settled: nothing for the flush")
            #expect(engine.reduce(run: [["type": "drop"]]).applied == 1)
            calls = engine.vm.calls
            engine.flush()
            #expect(engine.vm.calls > calls, "a table left the state: the flush lets the caches go")
            #expect(seen.value == [0, 1, 2, 3, 4, 5, 6])
        }
    }

    /// The engine itself: one call runs the whole run; it stops only where the store must act before the
    /// next action (subscriptions that changed), and each action has its own time budget.
    @Test func theEngineStopsARunOnlyWhereSubscriptionsChanged() throws {
        try withEngine(["app.lua": testApp, "lib/util.lua": testUtil], budget: .milliseconds(200)) { engine, _ in
            _ = try engine.currentSubscriptions() // evaluated once: clean
            let increments = Array(repeating: ["type": "increment"] as LuaValue, count: 5)
            var outcome = engine.reduce(run: (increments + [["type": "say"]] + increments)[...])
            #expect(outcome.applied == 11, "commands do not end a run")
            #expect(outcome.commands.map(\.offset) == [5] && outcome.commands.first?.commands.map(\.kind) == ["log"])
            #expect(outcome.failures.isEmpty)
            outcome = engine.reduce(run: [["type": "increment"], ["type": "fetch", "id": 1, "url": "http://127.0.0.1:1/"], ["type": "increment"]])
            #expect(outcome.applied == 2, "the store must diff subscriptions before the next action")
            #expect(try engine.currentSubscriptions().keys.sorted() == ["request 1"])
            #expect(engine.reduce(run: [["type": "increment"], ["type": "increment"]]).applied == 2)
            #expect(try engine.state()["count"] == 13)
        }
    }

    /// The barrier remembers the writes it noted since the last flush, and a write to one of them again adds
    /// nothing — until the subscriptions ran (and may have read it anew): then the next change of what they read
    /// stops its run again, though no flush came between. (Remembered across that, the second change of the
    /// mode went unnoticed and the store kept the first mode's timer.)
    @Test func everyChangeOfWhatSubscriptionsReadStopsItsRun() throws {
        let app = """
            local luastore = require("luastore")
            local app = {}
            function app.init() return { mode = "idle", count = 0 } end
            function app.reduce(state, action)
              if action.type == "mode" then state.mode = action.mode else state.count = state.count + 1 end
            end
            function app.props(state) return { count = state.count } end
            function app.subscriptions(state)
              if state.mode == "idle" then return {} end
              return { [state.mode] = luastore.timer(60, { type = "tick" }) }
            end
            return app
            """
        try withEngine(["app.lua": app], budget: .seconds(5)) { engine, _ throws in
            /// Reduces `actions` as the store would: what a run did not apply is handed again.
            func apply(_ actions: [LuaValue]) {
                var rest = actions[...]
                while !rest.isEmpty { rest = rest.dropFirst(max(1, engine.reduce(run: rest).applied)) }
            }
            #expect(try engine.currentSubscriptions().isEmpty)
            for mode in ["a", "b", "a", "c"] {
                apply([["type": "mode", "mode": .string(mode)], ["type": "increment"], ["type": "increment"]])
                #expect(try engine.currentSubscriptions().keys.sorted() == [mode])
            }
            #expect(try engine.state()["count"] == 8)
        }
    }

    /// Each action of a run has the whole time budget: a run of five actions that each spin for a quarter of it
    /// (by the host's clock, so load on the machine cannot shorten them, and a stall of up to ¾ of the budget
    /// cannot fail them) applies whole, though together they outlast the budget; an endless loop in the middle
    /// is stopped and undone while the actions around it apply.
    /// An action too large to convert under the memory cap fails alone, and undoes nothing: it failed before a
    /// transaction of its own began, so the one the journal holds is the last committed action's, which stays —
    /// dispatched in a run, and sent alone; and the actions after it keep theirs.
    @Test func anActionThatCannotBeConvertedUndoesNothingBeforeIt() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action) if action.type == "increment" then state.count = state.count + 1 end end
            function app.props(state) return { count = state.count } end
            return app
            """])
        defer { folder.remove() }
        var options = Recorder().options
        options.limits.memoryBytes = 8 << 20
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        // Under the cap's count of entries (a cap's sixteenth), over its bytes once in the VM.
        let huge: LuaValue = ["type": "noop", "pad": .table(LuaTable(array: Array(repeating: .integer(1), count: 500_000)))]
        store.dispatch(["type": "increment"])
        store.dispatch(huge)
        store.dispatch(["type": "increment"])
        #expect(try await store.state() == ["count": 2])
        #expect(await store.send(["type": "increment"]).failure == nil)
        let refused = await store.send(huge).failure
        #expect(refused?.error.kind == .memory, "\(String(describing: refused))")
        #expect(refused?.error.message == "the value does not fit in the VM's memory beside what it holds (the memory cap is 8388608 bytes)")
        #expect(try await store.state() == ["count": 3])
        #expect(await store.send(["type": "increment"]).failure == nil)
        #expect(try await store.state() == ["count": 4])
    }

    /// An action whose changes the journal cannot record within the memory cap (a store that records, persists or
    /// shows its journal keeps each action's changes as it commits) fails naming that — not a bare "not enough
    /// memory" with no place, where the same action without a journal runs — and undoes its writes.
    @Test func anActionTheJournalCannotRecordUnderTheCapSaysSo() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { big = {} } end
            function app.reduce(state, action) for i = 1, action.n do state.big[i] = i end end
            function app.props(state) return { size = #state.big } end
            return app
            """])
        defer { folder.remove() }
        var options = Recorder().options
        options.limits.memoryBytes = 16 << 20
        options.limits.timeBudget = .seconds(30)
        var shown = false
        for n in [25_000, 50_000, 100_000, 200_000] where !shown {
            // (Dispatched, with no one hearing the journal: no changes kept. A `send` waits for its entry.)
            let plain = try await ScriptedStore(app: folder.url, options: options)
            plain.dispatch(["type": "fill", "n": .integer(Int64(n))])
            let ranPlain = try await plain.state()["big"].table?.count == n
            plain.shutdown()
            let journaled = try await ScriptedStore(app: folder.url, options: options)
            let entries = await journaled.journalEntries()
            let failure = await journaled.send(["type": "fill", "n": .integer(Int64(n))]).failure
            if ranPlain, let failure {
                #expect(failure.error.kind == .memory)
                #expect(failure.error.message.hasPrefix("not enough memory to record what the action changed"), "\(failure)")
                #expect(try await journaled.state() == ["big": [:]])
                shown = true
            }
            journaled.shutdown()
            _ = entries
        }
        #expect(shown, "no size of action ran without a journal and failed with one under a 16 MiB cap")
    }

    @Test func everyActionOfARunHasItsOwnTimeBudget() throws {
        let app = """
            local app = {}
            function app.init() return { burned = 0, count = 0 } end
            function app.reduce(state, action)
              if action.type == "burn" then
                local start = elapsed()
                while elapsed() - start < action.seconds do end
                state.burned = state.burned + 1
              elseif action.type == "loop" then
                state.count = -1
                while true do end
              else
                state.count = state.count + 1
              end
            end
            function app.props(state) return state end
            return app
            """
        try withEngine(["app.lua": app], budget: .seconds(1)) { engine, folder in
            // The host's clock, for the app: globals reach the environments of modules loaded after they are
            // defined, so the app is loaded again (a reload, as after a save) once `elapsed` is there.
            let clock = ContinuousClock()
            let origin = clock.now
            func seconds(_ duration: Duration) -> Double {
                Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            }
            try engine.vm.define(global: "elapsed") { _ in [.number(seconds(clock.now - origin))] }
            try folder.write("app.lua", app + "\n-- with the host's clock\n")
            #expect(try engine.reload() == .reloaded(fromSchema: 0, toSchema: 0))

            let burn: LuaValue = ["type": "burn", "seconds": 0.25]
            let runStart = clock.now
            let outcome = engine.reduce(run: [burn, burn, burn, burn, burn])
            #expect(seconds(clock.now - runStart) > 1, "the run outlasted one budget")
            #expect(outcome.applied == 5)
            #expect(outcome.failures.isEmpty, "each burn had a budget of its own")
            #expect(try engine.state()["burned"] == 5)

            let mixed = engine.reduce(run: [["type": "increment"], ["type": "loop"], ["type": "increment"]])
            #expect(mixed.applied == 3)
            #expect(mixed.failures.map(\.offset) == [1])
            guard let error = mixed.failures.first?.error as? LuaError else {
                Issue.record("the loop did not fail")
                return
            }
            #expect(error.message == "time budget of 1000 ms exceeded")
            #expect(error.location == "app.lua:10")
            #expect(try engine.state()["count"] == 2, "the loop's write was undone, the actions around it applied")
        }
    }
}
