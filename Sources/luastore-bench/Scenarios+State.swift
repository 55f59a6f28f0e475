import Foundation
import Synchronization
import LuaKit
import LuaStoreCore
import LuaStoreScripting

/// A state of 100,000 items: what toggling one item costs, and what observers of it cost as they grow in number.
extension Scenarios {
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
        guard let (stock, script) = try floorScript(EmbeddedLua.coldStateFloor, rows: "state_size.cold_extra_…") else { return nil }
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
}
