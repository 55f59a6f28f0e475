import Foundation
import Synchronization
import LuaKit
import LuaStoreCore
import LuaStoreScripting

/// The benchmark scenarios. Each returns its rows; sizes shrink with `--quick`.
struct Scenarios {
    let quick: Bool
    let workspace: URL
    /// Which side of each ratio runs (`--side`).
    var sides: Harness.Sides = .both
    /// How the apps' VMs collect garbage (`--collector`; default: `LuaLimits`'s).
    var collector = LuaLimits().garbageCollection

    /// The options every benchmarked app runs with.
    var options: ScriptedStoreOptions {
        var options = Self.quiet
        options.limits.garbageCollection = collector
        return options
    }

    var rounds: Int { quick ? 2 : 9 }

    func app(_ name: String, _ source: String) throws -> URL {
        let folder = workspace.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(source.utf8).write(to: folder.appendingPathComponent("app.lua"))
        return folder
    }

    /// Default options, except that failures go to standard error and a call may take 60 s: building a
    /// 100,000-item state in `init` takes ≈ 70 ms alone in a release build, more than 2 s in the test suite's debug
    /// build beside busy loops (the budget costs nothing while scripts stay within it, so this does not change what
    /// is measured).
    static let quiet: ScriptedStoreOptions = {
        var options = ScriptedStoreOptions(log: { _ in }, failures: { failure in
            FileHandle.standardError.write(Data("bench: \(failure)\n".utf8))
        })
        options.limits.timeBudget = .seconds(60)
        return options
    }()

    // MARK: counter

    // Both sides: a burst of dispatches, timed until the deduplicated props observer sees the last one. The Swift
    // side is a Swift reducer with a `Presenter` (props made on the presentation queue) — or, where every action is
    // observed, with one `Observer` as a ReSwift subscriber is; the Lua side is the same counter as an app (Lua
    // reduce and props, on the app's thread).

    static let counterApp = """
    local app = {}
    function app.init() return { count = 0, note = "", flag = false } end
    function app.reduce(state, action)
      local kind = action.type
      if kind == "increment" then state.count = state.count + 1
      elseif kind == "add" then state.count = state.count + action.by; state.note = action.note; state.flag = action.flag
      end
    end
    function app.props(state) return { count = state.count } end
    return app
    """

    struct Counter: Sendable, Equatable {
        var count = 0
        var note = ""
        var flag = false

        /// The Swift sides' reducer: what the Lua app's `reduce` does.
        mutating func apply(_ action: CounterAction) {
            switch action {
            case .increment: count += 1
            case .add(let by, let note, let flag):
                count += by
                self.note = note
                self.flag = flag
            }
        }
    }

    /// The Swift side's actions: `add` carries what the Lua side's fresh actions carry.
    enum CounterAction: Sendable {
        case increment
        case add(by: Int, note: String, flag: Bool)
    }

    /// How the two sides of a counter row dispatch: one value again and again, or each action made anew with a
    /// payload (an integer, a string, a boolean) as real actions are.
    enum Dispatching { case reused, fresh }

    /// ns per dispatch of the Lua counter (until the observer has the last props), and ns the dispatching
    /// thread itself spent per dispatch.
    func luaCounter(_ dispatching: Dispatching, notification: NotificationPolicy = .batched, actions: Int) async throws
        -> (total: Double, caller: Double) {
        var options = self.options
        options.notification = notification
        let store = try await ScriptedStore(app: try app("counter", Self.counterApp), options: options)
        let arrival = await Self.arrival(of: store, counting: "count")
        let action: LuaValue = ["type": "increment"]
        let caller = Box(0.0)
        let notes = (0..<16).map { LuaValue.string("note \($0)") }
        let total = await Harness.nanoseconds(operations: actions) {
            let clock = ContinuousClock()
            let start = clock.now
            switch dispatching {
            case .reused:
                for _ in 0..<actions { store.dispatch(action) }
            case .fresh:
                for index in 0..<actions {
                    store.dispatch(["type": "add", "by": 1, "note": notes[index & 15], "flag": .boolean(index & 1 == 0)])
                }
            }
            caller.value = Harness.milliseconds(clock.now - start) * 1_000_000 / Double(actions)
            await arrival.wait(for: Int64(actions))
        }
        store.shutdown()
        return (total, caller.value)
    }

    /// ns per dispatch of the same counter as a Swift store (LuaStoreCore), until the observer has the props.
    func swiftCounter(_ dispatching: Dispatching, actions: Int) async -> Double {
        let root = RootStore(
            initialState: Counter(),
            reducer: Reduce<Counter, CounterAction, Never> { state, action in
                state.apply(action)
                return []
            },
            configuration: StoreConfiguration())
        let arrival = Arrival()
        root.store.subscribe(Presenter<Counter, [String: Int]>(
            removeStateDuplicates: .asEquatable,
            removePropsDuplicates: .asEquatable,
            props: { ["count": $0.count] }
        ) { props in
            arrival.see(Int64(props["count"] ?? -1))
            return .active
        })
        await arrival.wait(for: 0)
        let notes = (0..<16).map { "note \($0)" }
        let result = await Harness.nanoseconds(operations: actions) {
            switch dispatching {
            case .reused:
                for _ in 0..<actions { root.dispatch(.increment) }
            case .fresh:
                for index in 0..<actions { root.dispatch(.add(by: 1, note: notes[index & 15], flag: index & 1 == 0)) }
            }
            await arrival.wait(for: Int64(actions))
        }
        root.shutdown()
        return result
    }

    /// ns per dispatch of the same counter as a Swift store (LuaStoreCore) whose one observer is told of every action
    /// as a ReSwift subscriber is: a closure with the new state, repeats skipped, on the store's own serial context
    /// (no props, no queue hop) — the Swift side of `counter.every_action_lua_vs_swift_ratio`.
    func swiftObserverCounter(actions: Int) async -> Double {
        let root = RootStore(
            initialState: Counter(),
            reducer: Reduce<Counter, CounterAction, Never> { state, action in
                state.apply(action)
                return []
            },
            configuration: StoreConfiguration(notification: .everyAction))
        let arrival = Arrival()
        root.store.subscribe(Observer<Counter>(removeDuplicates: .asEquatable) { state in
            arrival.see(Int64(state.count))
            return .active
        })
        await arrival.wait(for: 0)
        let result = await Harness.nanoseconds(operations: actions) {
            for _ in 0..<actions { root.dispatch(.increment) }
            await arrival.wait(for: Int64(actions))
        }
        root.shutdown()
        return result
    }

    /// ns per dispatch of the same counter in a ReSwift-shaped store (`PeerStore`): every action observed by one
    /// subscriber, which sees the count (as the Lua side's observer sees its props), until it has seen the last.
    func peerCounter(actions: Int) async -> Double {
        let store = PeerStore<Counter, CounterAction>(state: Counter()) { action, state in
            var state = state
            state.apply(action)
            return state
        }
        let arrival = Arrival()
        store.subscribe { state in arrival.see(Int64(state.count)) }
        await arrival.wait(for: 0)
        return await Harness.nanoseconds(operations: actions) {
            for _ in 0..<actions { store.dispatch(.increment) }
            await arrival.wait(for: Int64(actions))
        }
    }

    func counter() async throws -> [Scenario] {
        let actions = quick ? 2_000 : 50_000
        let (lua, swift, ratio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await luaCounter(.reused, actions: actions).total },
            { await swiftCounter(.reused, actions: actions) })
        // What the dispatching thread paid, in each round (the first is the warm-up's): its median, as every row.
        let callerNanoseconds = Box<[Double]>([])
        let (freshLua, freshSwift, freshRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            {
                let (total, caller) = try await luaCounter(.fresh, actions: actions)
                callerNanoseconds.value.append(caller)
                return total
            },
            { await swiftCounter(.fresh, actions: actions) })
        let everyActions = quick ? 1_000 : 20_000
        let (everyLua, everySwift, everyRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await luaCounter(.reused, notification: .everyAction, actions: everyActions).total },
            { await swiftObserverCounter(actions: everyActions) })
        let (_, peer, peerRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await luaCounter(.reused, notification: .everyAction, actions: everyActions).total },
            { await peerCounter(actions: everyActions) })
        let caller = Harness.median(Array(callerNanoseconds.value.dropFirst()))
        let floor = try await freshActionFloor(actions: actions)
        let everyFloor = try await everyActionFloor(actions: everyActions)
        return [
            Scenario(name: "counter.lua_vs_swift_ratio", value: ratio, unit: "×", goal: "≤ 1.3", pass: ratio <= 1.3),
            Scenario(name: "counter.lua_ns_per_dispatch", value: lua, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.swift_ns_per_dispatch", value: swift, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.fresh_actions_lua_vs_swift_ratio", value: freshRatio, unit: "×", goal: "≤ 1.5", pass: freshRatio <= 1.5),
            Scenario(name: "counter.fresh_actions_lua_ns_per_dispatch", value: freshLua, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.fresh_actions_swift_ns_per_dispatch", value: freshSwift, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.caller_ns_per_fresh_dispatch", value: caller, unit: "ns", goal: "≤ 250", pass: caller <= 250),
        ] + floor + [
            Scenario(name: "counter.every_action_lua_vs_swift_ratio", value: everyRatio, unit: "×", goal: "≤ 1.5", pass: everyRatio <= 1.5),
            Scenario(name: "counter.every_action_lua_ns_per_dispatch", value: everyLua, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.every_action_swift_ns_per_dispatch", value: everySwift, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.every_action_lua_vs_reswift_ratio", value: peerRatio, unit: "×", goal: "≤ 1.0", pass: peerRatio <= 1.0),
            Scenario(name: "counter.every_action_reswift_ns_per_dispatch", value: peer, unit: "ns", goal: "—", pass: nil),
        ] + everyFloor
    }

    /// How the stock-Lua floors run (`Workloads/dispatch_floor.lua`, written into the workspace once): a function
    /// that runs the script's `mode` over `actions` and returns its `field` (ns per action) — the script times its
    /// own loops, so its start-up is not counted — or nil, with a note naming `rows`, where `lua5.4` is not
    /// installed or only one side runs (`--side`).
    func dispatchFloor(_ mode: String, field: String, actions: Int, rows: String) throws -> (() throws -> Double)? {
        guard let stock = Self.stockLua else {
            FileHandle.standardError.write(Data("bench: lua5.4 is not installed; \(rows) is left out\n".utf8))
            return nil
        }
        guard sides == .both else { return nil }
        let script = workspace.appendingPathComponent("dispatch_floor.lua")
        try Data(EmbeddedLua.dispatchFloor.source.utf8).write(to: script)
        return {
            let output = try Self.output(of: stock, [script.path, String(actions), mode])
            guard let text = output.split(whereSeparator: \.isWhitespace).first(where: { $0.hasPrefix("\(field)=") }),
                  let nanoseconds = Double(text.dropFirst(field.count + 1)) else {
                throw BenchFailure("dispatch_floor.lua \(mode) printed \(output.debugDescription), without \(field)=N")
            }
            return nanoseconds
        }
    }

    /// `counter.every_action_floor_vs_reswift_ratio`: what Debian's stock `lua5.4` alone needs for the core of a
    /// dispatch whose every action is observed (`dispatch_floor.lua every`: `pcall` the reducer behind the simplest
    /// journaling barrier, run `props`, skip a repeat, tell one observer; no store, no second thread, no
    /// conversion) ÷ `PeerStore`'s whole dispatch, the two alternated — the least that
    /// `counter.every_action_lua_vs_reswift_ratio` can come to while the reducer and `props` are Lua run by Lua's
    /// own interpreter.
    func everyActionFloor(actions: Int) async throws -> [Scenario] {
        guard let measureFloor = try dispatchFloor("every", field: "every", actions: quick ? 20_000 : 500_000,
                                                   rows: "counter.every_action_floor_…") else { return [] }
        let (floor, _, ratio) = try await Harness.alternate(rounds: rounds, measureFloor, { await peerCounter(actions: actions) })
        return [
            Scenario(name: "counter.every_action_floor_vs_reswift_ratio", value: ratio, unit: "×", goal: "—", pass: nil),
            Scenario(name: "counter.every_action_floor_ns", value: floor, unit: "ns", goal: "—", pass: nil),
        ]
    }

    /// `counter.fresh_actions_floor_vs_swift_ratio`: what Debian's stock `lua5.4` alone needs for the core of a fresh
    /// dispatch behind the simplest journaling barrier (`dispatch_floor.lua fresh`: make the action, `pcall` the
    /// reducer; no store, no second thread, no conversion) ÷ the Swift store's whole fresh dispatch, the two
    /// alternated as every ratio is — the ratio no scripted store whose state lives in the VM behind a barrier can
    /// go under; and `counter.fresh_actions_lua_vs_floor_ratio`, the scripted store's fresh dispatch ÷ that floor.
    func freshActionFloor(actions: Int) async throws -> [Scenario] {
        // (Over more actions than the store's side: a few hundred milliseconds a round.)
        guard let measureFloor = try dispatchFloor("fresh", field: "barrier", actions: quick ? 20_000 : 200_000,
                                                   rows: "counter.fresh_actions_floor_…") else { return [] }
        let (floor, _, ratio) = try await Harness.alternate(rounds: rounds, measureFloor, { await swiftCounter(.fresh, actions: actions) })
        // The scripted store's fresh dispatch against the floor, alternated with it: what is ours above it.
        let (_, _, luaRatio) = try await Harness.alternate(
            rounds: rounds, { try await luaCounter(.fresh, actions: actions).total }, measureFloor)
        return [
            Scenario(name: "counter.fresh_actions_lua_vs_floor_ratio", value: luaRatio, unit: "×", goal: "≤ 1.5", pass: luaRatio <= 1.5),
            Scenario(name: "counter.fresh_actions_floor_vs_swift_ratio", value: ratio, unit: "×", goal: "—", pass: nil),
            Scenario(name: "counter.fresh_actions_floor_ns", value: floor, unit: "ns", goal: "—", pass: nil),
        ]
    }

    // MARK: state size

    static func listApp(items: Int) -> String {
        """
        local app = {}
        function app.init()
          local items = {}
          for i = 1, \(items) do items[i] = { id = i, title = "item " .. i, done = false } end
          return { items = items, toggles = 0 }
        end
        function app.reduce(state, action)
          if action.type == "toggle" then
            local item = state.items[action.id]
            item.done = not item.done
            state.toggles = state.toggles + 1
          end
        end
        function app.props(state) return { toggles = state.toggles, size = #state.items } end
        return app
        """
    }

    /// Counts a store's props as they arrive (their integer `field`: the list app's `toggles`, the counter's
    /// `count`), once its first props (0) have.
    static func arrival(of store: ScriptedStore, counting field: String = "toggles") async -> Arrival {
        let arrival = Arrival()
        store.observeProps { props in
            arrival.see(props[.string(field)].integer ?? -1)
            return .active
        }
        await arrival.wait(for: 0)
        return arrival
    }

    /// ns per toggle of an `items`-item list; toggle `k` reaches item `k · 7919 mod spread + 1` (by default
    /// spread over the whole list, so at 100,000 items nearly every toggle reaches an item not touched lately).
    func toggleCost(items: Int, actions: Int, spread: Int? = nil) async throws -> Double {
        let folder = try app("list\(items)", Self.listApp(items: items))
        let store = try await ScriptedStore(app: folder, options: options)
        let arrival = await Self.arrival(of: store)
        // A full collection first: the garbage the 100,000-item init left is not collected in the measured window
        // (where a major collection of the whole heap, 15–20 ms, landed or not was most of the row's spread).
        _ = await store.memory()
        let reach = spread ?? items
        let actionsToSend: [LuaValue] = (0..<actions).map { ["type": "toggle", "id": .integer(Int64($0 * 7919 % reach + 1))] }
        let result = await Harness.nanoseconds(operations: actions) {
            for action in actionsToSend { store.dispatch(action) }
            await arrival.wait(for: Int64(actions))
        }
        store.shutdown()
        return result
    }

    func stateSize() async throws -> [Scenario] {
        let actions = quick ? 2_000 : 30_000
        let big = quick ? 10_000 : 100_000
        let (large, small, ratio) = try await Harness.alternate(
            rounds: rounds, sides: sides, { try await toggleCost(items: big, actions: actions) }, { try await toggleCost(items: 10, actions: actions) })
        // The same ten items toggled in both lists: what the size of the state alone costs, apart from reaching
        // items scattered over a large heap.
        let (_, _, sameItems) = try await Harness.alternate(
            rounds: rounds, sides: sides, { try await toggleCost(items: big, actions: actions, spread: 10) },
            { try await toggleCost(items: 10, actions: actions) })
        // What 100,000 items add over 10, ours and stock Lua's: each side the fastest of its rounds (a difference of
        // two timings is as noisy as the noisier; on a busy machine a median of differences can come out below
        // zero), and at 100,000 items in a quick run too (at 10,000 the extra is within a quick run's noise).
        let coldItems = 100_000
        let floor = try coldStateFloor(items: coldItems)
        var coldLarge = Double.infinity, coldSmall = Double.infinity
        for _ in 0..<max(1, rounds) {
            coldLarge = min(coldLarge, try await toggleCost(items: coldItems, actions: max(actions, 20_000)))
            coldSmall = min(coldSmall, try await toggleCost(items: 10, actions: max(actions, 20_000)))
        }
        let extra = coldLarge - coldSmall
        var coldRows: [Scenario] = []
        if let floor {
            let coldRatio = extra / floor
            coldRows = [
                Scenario(name: "state_size.cold_extra_vs_floor_ratio", value: coldRatio, unit: "×", goal: "≤ 2.0", pass: coldRatio <= 2),
                Scenario(name: "state_size.cold_extra_ns", value: extra, unit: "ns", goal: "—", pass: nil),
                Scenario(name: "state_size.cold_extra_floor_ns", value: floor, unit: "ns", goal: "—", pass: nil),
            ]
        }
        return [
            Scenario(name: "state_size.ratio_100k_vs_10", value: ratio, unit: "×", goal: "≤ 1.5", pass: ratio <= 1.5),
            Scenario(name: "state_size.ns_per_toggle_100k", value: large, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "state_size.ns_per_toggle_10", value: small, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "state_size.ratio_100k_vs_10_same_items", value: sameItems, unit: "×", goal: "—", pass: nil),
        ] + coldRows
    }

    /// The extra ns per toggle that `items` items add over 10 when stock `lua5.4` runs the same app logic
    /// (`Workloads/cold_state_floor.lua`: cache misses no runtime avoids), each size the fastest of `rounds` runs; nil where
    /// `lua5.4` is not installed (the rows are left out, with a note) or with `--side`.
    func coldStateFloor(items: Int) throws -> Double? {
        guard let stock = Self.stockLua else {
            FileHandle.standardError.write(Data("bench: lua5.4 is not installed; state_size.cold_extra_… is left out\n".utf8))
            return nil
        }
        guard sides == .both else { return nil }
        let script = workspace.appendingPathComponent("cold_state_floor.lua")
        try Data(EmbeddedLua.coldStateFloor.source.utf8).write(to: script)
        // (The very apps the store's rows run, as files the script loads.)
        let small = try app("list10", Self.listApp(items: 10)).appendingPathComponent("app.lua").path
        let large = try app("list\(items)", Self.listApp(items: items)).appendingPathComponent("app.lua").path
        var fastestSmall = Double.infinity, fastestLarge = Double.infinity
        for _ in 0..<max(1, rounds) {
            let output = try Self.output(of: stock, [script.path, quick ? "100000" : "300000", small, large])
            let fields = output.split(whereSeparator: \.isWhitespace)
            func field(_ name: String) -> Double? {
                fields.first { $0.hasPrefix(name + "=") }.flatMap { Double($0.dropFirst(name.count + 1)) }
            }
            guard let small = field("small"), let large = field("large") else {
                throw BenchFailure("cold_state_floor.lua printed \(output.debugDescription), not small=N large=N")
            }
            fastestSmall = min(fastestSmall, small)
            fastestLarge = min(fastestLarge, large)
        }
        return fastestLarge - fastestSmall
    }

    // MARK: fan-out

    func fanoutCost(observers: Int, actions: Int) async throws -> Double {
        let folder = try app("fanout", Self.listApp(items: 1000))
        var options = self.options
        options.notification = .everyAction
        let store = try await ScriptedStore(app: folder, options: options)
        let arrival = Arrival()
        for index in 1...observers {
            store.observe(["items", .integer(Int64(index))]) { _ in
                arrival.count()
                return .active
            }
        }
        await arrival.wait(for: Int64(observers))
        let toggles: [LuaValue] = (0..<actions).map { ["type": "toggle", "id": .integer(Int64($0 % observers + 1))] }
        let result = await Harness.nanoseconds(operations: actions) {
            for action in toggles { store.dispatch(action) }
            await arrival.wait(for: Int64(observers + actions))
        }
        store.shutdown()
        return result
    }

    func fanout() async throws -> [Scenario] {
        let actions = quick ? 1_000 : 20_000
        let (many, one, ratio) = try await Harness.alternate(
            rounds: rounds, sides: sides, { try await fanoutCost(observers: 1000, actions: actions) }, { try await fanoutCost(observers: 1, actions: actions) })
        return [
            Scenario(name: "fanout.ratio_1000_vs_1", value: ratio, unit: "×", goal: "≤ 5.0", pass: ratio <= 5.0),
            Scenario(name: "fanout.ns_per_action_1000", value: many, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "fanout.ns_per_action_1", value: one, unit: "ns", goal: "—", pass: nil),
        ]
    }

    // MARK: reload

    static func reloadApp(items: Int, version: Int) -> String {
        listApp(items: items).replacingOccurrences(
            of: "return { toggles = state.toggles, size = #state.items }",
            with: "return { toggles = state.toggles, size = #state.items, version = \(version) }")
    }

    /// Milliseconds from writing app.lua to the new props arriving, for each of `samples` saves.
    func reloadTimes(items: Int, samples: Int) async throws -> [Double] {
        let folder = try app("reload\(items)", Self.reloadApp(items: items, version: 0))
        let store = try await ScriptedStore(app: folder, options: options)
        let arrival = Arrival()
        store.observeProps { props in
            arrival.see(props["version"].integer ?? -1)
            return .active
        }
        store.startWatching()
        await arrival.wait(for: 0)
        try await Task.sleep(for: .milliseconds(30))
        var times: [Double] = []
        let clock = ContinuousClock()
        for sample in 1...samples {
            let start = clock.now
            try Data(Self.reloadApp(items: items, version: sample).utf8).write(to: folder.appendingPathComponent("app.lua"))
            await arrival.wait(for: Int64(sample))
            times.append(Harness.milliseconds(clock.now - start))
            try await Task.sleep(for: .milliseconds(30))
        }
        store.shutdown()
        return times
    }

    func reload() async throws -> [Scenario] {
        let samples = quick ? 5 : 20
        let big = quick ? 10_000 : 100_000
        var small: [Double] = []
        var large: [Double] = []
        for _ in 0..<(quick ? 1 : 2) {
            small += try await reloadTimes(items: 10, samples: samples / (quick ? 1 : 2))
            large += try await reloadTimes(items: big, samples: samples / (quick ? 1 : 2))
        }
        let p50 = Harness.median(small)
        let ratio = Harness.median(large) / p50
        let idle = try await idleWatchPercent(polls: false)
        let idlePolling = try await idleWatchPercent(polls: true)
        return [
            Scenario(name: "reload.p50_ms", value: p50, unit: "ms", goal: "≤ 10", pass: p50 <= 10),
            Scenario(name: "reload.ratio_100k_vs_10", value: ratio, unit: "×", goal: "≤ 1.5", pass: ratio <= 1.5),
            Scenario(name: "watch.idle_cpu_percent", value: idle, unit: "%", goal: "≤ 0.1", pass: idle <= 0.1),
            Scenario(name: "watch.idle_cpu_percent_polling", value: idlePolling, unit: "%", goal: "—", pass: nil),
        ]
    }

    /// The share of one core this process uses while a store of the todos sample (five files in two folders)
    /// watches its folder and nothing happens; `polls`: by looking every 10 ms instead of being told.
    func idleWatchPercent(polls: Bool) async throws -> Double {
        let sample = URL(fileURLWithPath: "samples/todos")
        guard FileManager.default.fileExists(atPath: sample.appendingPathComponent("app.lua").path) else {
            FileHandle.standardError.write(Data("bench: samples/todos not found (run from the package's folder); watch rows left out\n".utf8))
            return .nan
        }
        let store = try await ScriptedStore(app: sample, options: options)
        defer { store.shutdown() }
        store.startWatching(polls: polls)
        try await Task.sleep(for: .milliseconds(200)) // settled
        func processorSeconds() -> Double {
            var usage = rusage()
            getrusage(RUSAGE_SELF.rawValue, &usage)
            return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        }
        let clock = ContinuousClock()
        let (start, used) = (clock.now, processorSeconds())
        try await Task.sleep(for: .seconds(quick ? 1 : 3))
        let spent = processorSeconds() - used
        let wall = Harness.milliseconds(clock.now - start) / 1_000
        store.stopWatching()
        return spent / wall * 100
    }

    // MARK: memory and latency

    func memoryAndLatency() async throws -> [Scenario] {
        let items = quick ? 10_000 : 100_000
        let emptyStore = try await ScriptedStore(app: try app("empty", Self.listApp(items: 0)), options: options)
        let baseline = await emptyStore.memory().bytesInUse
        emptyStore.shutdown()
        let store = try await ScriptedStore(app: try app("memory", Self.listApp(items: items)), options: options)
        let used = await store.memory().bytesInUse
        let perItem = Double(used - baseline) / Double(items)
        // `memory()` runs a full collection: what a major collection of the generational collector costs here.
        var collections: [Double] = []
        for _ in 0..<5 {
            let start = ContinuousClock().now
            _ = await store.memory()
            collections.append(Harness.milliseconds(ContinuousClock().now - start))
        }

        let latencies = await Self.latencies(of: store, items: items, samples: quick ? 2_000 : 20_000)
        store.shutdown()
        let p999 = Harness.percentile(latencies, 0.999), maximum = latencies.max() ?? 0
        // A million items (≈ 224 MB in the VM): where a full collection would cost a dropped frame many times over.
        let million = quick ? 100_000 : 1_000_000
        var large = options
        large.limits.memoryBytes = 2 << 30
        large.limits.timeBudget = .seconds(60) // (init builds the million items in one call)
        let bigStore = try await ScriptedStore(app: try app("memory1m", Self.listApp(items: million)), options: large)
        _ = await bigStore.memory() // (init's garbage collected before the window, as above)
        let bigLatencies = await Self.latencies(of: bigStore, items: million, samples: quick ? 2_000 : 20_000)
        bigStore.shutdown()
        let bigP999 = Harness.percentile(bigLatencies, 0.999), bigMaximum = bigLatencies.max() ?? 0
        return [
            Scenario(name: "memory.bytes_per_item", value: perItem, unit: "B", goal: "≤ 250", pass: perItem <= 250),
            Scenario(name: "latency.p999_us", value: p999, unit: "µs", goal: "≤ 1000", pass: p999 <= 1000),
            Scenario(name: "latency.p50_us", value: Harness.percentile(latencies, 0.5), unit: "µs", goal: "—", pass: nil),
            Scenario(name: "latency.max_us", value: maximum, unit: "µs", goal: "≤ 1000", pass: maximum <= 1000),
            Scenario(name: "latency.full_collection_ms", value: Harness.median(collections), unit: "ms", goal: "—", pass: nil),
            Scenario(name: "latency_1m.p999_us", value: bigP999, unit: "µs", goal: "≤ 1000", pass: bigP999 <= 1000),
            Scenario(name: "latency_1m.p50_us", value: Harness.percentile(bigLatencies, 0.5), unit: "µs", goal: "—", pass: nil),
            Scenario(name: "latency_1m.max_us", value: bigMaximum, unit: "µs", goal: "≤ 2000", pass: bigMaximum <= 2000),
        ]
    }

    /// Microseconds from each of `samples` toggles (of items spread over the `items`-item list) dispatched to
    /// `store` until its props observer has the props after it, one at a time. The dispatching thread spins
    /// for the props before it sleeps (`DeliveryCounter`): sleeping at once, its own wake-up added 0.9–4 ms to
    /// the slowest samples on a 2-core machine.
    static func latencies(of store: ScriptedStore, items: Int, samples: Int) async -> [Double] {
        let delivered = DeliveryCounter()
        store.observeProps { _ in
            delivered.delivered()
            return .active
        }
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                delivered.wait(for: 1) // the first props
                var latencies: [Double] = []
                latencies.reserveCapacity(samples)
                let clock = ContinuousClock()
                for sample in 1...samples {
                    let start = clock.now
                    store.dispatch(["type": "toggle", "id": .integer(Int64(sample * 7919 % items + 1))])
                    delivered.wait(for: sample + 1)
                    latencies.append(Harness.milliseconds(clock.now - start) * 1000)
                }
                continuation.resume(returning: latencies)
            }
        }
    }
}

/// How many props a latency sample's observer has seen, and the wait for the next: the dispatching thread
/// spins for up to `spin` (the store's latency is measured, not the operating system's wake-up of a waiting
/// thread), then sleeps until the observer signals (so a store thread kept off its processor by the system can
/// take the spinning thread's instead of waiting behind it).
final class DeliveryCounter: Sendable {
    private let count = Atomic<Int>(0)
    private let sleeping = Atomic<Bool>(false)
    private let wakeup = DispatchSemaphore(value: 0)
    private let spin = Duration.microseconds(50)

    /// The observer saw props.
    func delivered() {
        count.add(1, ordering: .sequentiallyConsistent)
        if sleeping.exchange(false, ordering: .sequentiallyConsistent) { wakeup.signal() }
    }

    /// Returns once `deliveries` props have been seen; a wait past `Harness.stallLimit` ends the run.
    func wait(for deliveries: Int) {
        let clock = ContinuousClock()
        let deadline = clock.now + spin
        func sleep() {
            guard wakeup.wait(timeout: .now() + Harness.stallLimit) == .success else {
                Harness.stalled("the latency samples waited \(Harness.stallSeconds) s for props \(deliveries); \(count.load(ordering: .sequentiallyConsistent)) came")
            }
        }
        while count.load(ordering: .sequentiallyConsistent) < deliveries {
            if clock.now < deadline { sched_yield(); continue }
            sleeping.store(true, ordering: .sequentiallyConsistent)
            if count.load(ordering: .sequentiallyConsistent) >= deliveries {
                // Seen after all: unless the observer took the flag (and signals), take it back.
                if !sleeping.exchange(false, ordering: .sequentiallyConsistent) { sleep() }
                return
            }
            sleep()
        }
    }
}
