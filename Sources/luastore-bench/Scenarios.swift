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
    /// The built `luastore-serve` the `serve.*` rows run (`--serve-binary`).
    var serveBinary: URL?
    /// `--only` as given: a row's name or its start. A group whose rows are measured in parts of their own
    /// (`serve`) measures only the parts with a row it names (`--only serve.ws`); a group's name runs it whole.
    var only: String?

    /// Whether a part of a group whose rows start with one of `rows` is to be measured (`only`).
    func wants(_ rows: String...) -> Bool {
        guard let only, only.contains(".") else { return true }
        return rows.contains { $0.hasPrefix(only) || only.hasPrefix($0) }
    }

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

    /// The same counter with its contract declared (docs/contracts.md): every action is checked before its reducer.
    static let declaredCounterApp = """
    ---@class Increment
    ---@field type "increment"

    ---@class Add
    ---@field type "add"
    ---@field by integer
    ---@field note string
    ---@field flag boolean

    ---@alias Action Increment|Add

    ---@class Props
    ---@field count integer

    """ + counterApp.replacingOccurrences(of: "function app.reduce(state, action)", with: "---@param action Action\nfunction app.reduce(state, action)")

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
    func luaCounter(_ dispatching: Dispatching, notification: NotificationPolicy = .batched, actions: Int, declared: Bool = false) async throws
        -> (total: Double, caller: Double) {
        var options = self.options
        options.notification = notification
        let folder = declared ? try app("declared-counter", Self.declaredCounterApp) : try app("counter", Self.counterApp)
        let store = try await ScriptedStore(app: folder, options: options)
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
        // An app with its contract declared against the same app without: each fresh action checked before its reducer.
        let (declared, _, declaredRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await luaCounter(.fresh, actions: actions, declared: true).total },
            { try await luaCounter(.fresh, actions: actions).total })
        // The same, with one action dispatched again and again, and with every action observed (its props checked too).
        let (_, _, declaredReusedRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await luaCounter(.reused, actions: actions, declared: true).total },
            { try await luaCounter(.reused, actions: actions).total })
        let (_, _, declaredEveryRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await luaCounter(.reused, notification: .everyAction, actions: everyActions, declared: true).total },
            { try await luaCounter(.reused, notification: .everyAction, actions: everyActions).total })
        let caller = Harness.median(Array(callerNanoseconds.value.dropFirst()))
        let floor = try await freshActionFloor(actions: actions)
        let everyFloor = try await everyActionFloor(actions: everyActions, luaActions: everyActions)
        return [
            Scenario(name: "counter.lua_vs_swift_ratio", value: ratio, unit: "×", goal: "≤ 1.3", pass: ratio <= 1.3),
            Scenario(name: "counter.lua_ns_per_dispatch", value: lua, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.swift_ns_per_dispatch", value: swift, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.fresh_actions_lua_vs_swift_ratio", value: freshRatio, unit: "×", goal: "≤ 1.5", pass: freshRatio <= 1.5),
            Scenario(name: "counter.fresh_actions_lua_ns_per_dispatch", value: freshLua, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.fresh_actions_swift_ns_per_dispatch", value: freshSwift, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.caller_ns_per_fresh_dispatch", value: caller, unit: "ns", goal: "≤ 250", pass: caller <= 250),
            Scenario(name: "counter.declared_vs_undeclared_ratio", value: declaredRatio, unit: "×", goal: "≤ 1.1", pass: declaredRatio <= 1.1),
            Scenario(name: "counter.declared_fresh_ns_per_dispatch", value: declared, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "counter.declared_reused_vs_undeclared_ratio", value: declaredReusedRatio, unit: "×", goal: "≤ 1.1", pass: declaredReusedRatio <= 1.1),
            Scenario(name: "counter.declared_every_action_vs_undeclared_ratio", value: declaredEveryRatio, unit: "×", goal: "≤ 1.1", pass: declaredEveryRatio <= 1.1),
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
        guard let (stock, script) = try floorScript(EmbeddedLua.dispatchFloor, rows: rows) else { return nil }
        return {
            let output = try Self.output(of: stock, [script.path, String(actions), mode])
            guard let text = output.split(whereSeparator: \.isWhitespace).first(where: { $0.hasPrefix("\(field)=") }),
                  let nanoseconds = Double(text.dropFirst(field.count + 1)) else {
                throw BenchFailure("dispatch_floor.lua \(mode) printed \(output.debugDescription), without \(field)=N")
            }
            return nanoseconds
        }
    }

    /// Stock `lua5.4` and a floor script written where it can run it; nil (the `rows` left out, with a note) where
    /// `lua5.4` is not installed or only one side runs (`--side`).
    func floorScript(_ embedded: EmbeddedLuaFile, rows: String) throws -> (stock: String, script: URL)? {
        guard let stock = Self.stockLua else {
            FileHandle.standardError.write(Data("bench: lua5.4 is not installed; \(rows) is left out\n".utf8))
            return nil
        }
        guard sides == .both else { return nil }
        let script = workspace.appendingPathComponent(URL(fileURLWithPath: embedded.path).lastPathComponent)
        try Data(embedded.source.utf8).write(to: script)
        return (stock, script)
    }

    /// `counter.every_action_floor_vs_reswift_ratio`: what Debian's stock `lua5.4` alone needs for the core of a
    /// dispatch whose every action is observed (`dispatch_floor.lua every`: `pcall` the reducer behind the simplest
    /// journaling barrier, run `props`, skip a repeat, tell one observer; no store, no second thread, no
    /// conversion) ÷ `PeerStore`'s whole dispatch, the two alternated — the least that
    /// `counter.every_action_lua_vs_reswift_ratio` can come to while the reducer and `props` are Lua run by Lua's
    /// own interpreter; and `counter.every_action_lua_vs_floor_ratio`, the scripted store's observed dispatch (over
    /// `luaActions`) ÷ that floor, alternated with it.
    func everyActionFloor(actions: Int, luaActions: Int) async throws -> [Scenario] {
        guard let measureFloor = try dispatchFloor("every", field: "every", actions: quick ? 20_000 : 500_000,
                                                   rows: "counter.every_action_floor_…") else { return [] }
        let (floor, _, ratio) = try await Harness.alternate(rounds: rounds, measureFloor, { await peerCounter(actions: actions) })
        // The scripted store's observed dispatch against the floor, alternated with it: what is ours above it.
        let (_, _, luaRatio) = try await Harness.alternate(
            rounds: rounds, { try await luaCounter(.reused, notification: .everyAction, actions: luaActions).total }, measureFloor)
        return [
            Scenario(name: "counter.every_action_lua_vs_floor_ratio", value: luaRatio, unit: "×", goal: "≤ 3.0", pass: luaRatio <= 3),
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
}
