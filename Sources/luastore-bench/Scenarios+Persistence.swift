import Foundation
import LuaStoreCore
import LuaKit
import LuaStorePersistence
import LuaStoreScripting

/// Durable stores (`LuaStorePersistence`): what keeping each action's changes in SQLite costs a 100,000-item
/// store, what `full` sync allows, the bytes kept per toggle, and resuming against building the state with `init`.
extension Scenarios {
    /// A fresh database path in the workspace (no file yet).
    func databasePath(_ name: String) -> String {
        let path = workspace.appendingPathComponent(name).path
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        return path
    }

    /// ns per toggle of an `items`-item list, persisted (`batch`: timed until the last toggle is committed) or
    /// not; and the bytes the database grew by per toggle (no snapshot in between).
    func persistedToggleCost(items: Int, actions: Int, persist: Bool) async throws -> (nanoseconds: Double, bytes: Double) {
        let folder = try app("list\(items)", Self.listApp(items: items))
        var options = self.options
        let database = persist
            ? try StoreDatabase(path: databasePath("persist-\(items).db"), app: "list", durability: .batch, snapshotInterval: .max)
            : nil
        options.persistence = database
        let store = try await ScriptedStore(app: folder, options: options)
        let arrival = await Self.arrival(of: store)
        try database?.waitUntilCommitted(through: 0)
        _ = await store.memory()
        let before = database?.storedBytes() ?? 0
        let toggles: [LuaValue] = (0..<actions).map { ["type": "toggle", "id": .integer(Int64($0 * 7919 % items + 1))] }
        let result = try await Harness.nanoseconds(operations: actions) {
            for action in toggles { store.dispatch(action) }
            await arrival.wait(for: Int64(actions))
            try database?.waitUntilCommitted(through: UInt64(actions))
        }
        let after = database?.storedBytes() ?? 0
        store.shutdown()
        await store.barrier()
        if let failure = database?.close() { throw failure }
        return (result, Double(after - before) / Double(actions))
    }

    /// Actions per second with `full` sync (each committed and synced before the next).
    func fullSyncActionsPerSecond(actions: Int) async throws -> Double {
        let folder = try app("list100", Self.listApp(items: 100))
        var options = self.options
        let database = try StoreDatabase(path: databasePath("persist-full.db"), app: "list", durability: .full)
        options.persistence = database
        let store = try await ScriptedStore(app: folder, options: options)
        let arrival = await Self.arrival(of: store)
        let clock = ContinuousClock()
        let start = clock.now
        for index in 0..<actions { store.dispatch(["type": "toggle", "id": .integer(Int64(index % 100 + 1))]) }
        await arrival.wait(for: Int64(actions))
        Reclaimer.shared.settle()
        let elapsed = clock.now - start
        store.shutdown()
        await store.barrier()
        if let failure = database.close() { throw failure }
        return Double(actions) * 1_000 / Harness.milliseconds(elapsed)
    }

    /// Milliseconds from nothing to the first props of an `items`-item store: resumed from its database, or
    /// built by `init`.
    func startMilliseconds(items: Int, resume: Bool) async throws -> Double {
        let folder = try app("list\(items)", Self.listApp(items: items))
        let path = workspace.appendingPathComponent("persist-resume-\(items).db").path
        if resume && !FileManager.default.fileExists(atPath: path) { // (made once, then resumed every round)
            var options = self.options
            let database = try StoreDatabase(path: path, app: "list")
            options.persistence = database
            let store = try await ScriptedStore(app: folder, options: options)
            for index in 0..<100 { store.dispatch(["type": "toggle", "id": .integer(Int64(index * 7919 % items + 1))]) }
            await store.barrier()
            store.shutdown()
            await store.barrier()
            if let failure = database.close() { throw failure }
        }
        let clock = ContinuousClock()
        let start = clock.now
        var options = self.options
        let database = resume ? try StoreDatabase(path: path, app: "list") : nil
        options.persistence = database
        let store = try await ScriptedStore(app: folder, options: options)
        _ = await Self.arrival(of: store) // (until the first props)
        let elapsed = clock.now - start
        store.shutdown()
        await store.barrier()
        if let failure = database?.close() { throw failure }
        return Harness.milliseconds(elapsed)
    }

    func persistence() async throws -> [Scenario] {
        let actions = quick ? 2_000 : 30_000
        let items = quick ? 10_000 : 100_000
        let bytes = Box(0.0)
        let (persisted, plain, ratio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            {
                let (nanoseconds, perToggle) = try await persistedToggleCost(items: items, actions: actions, persist: true)
                bytes.value = perToggle
                return nanoseconds
            },
            { try await persistedToggleCost(items: items, actions: actions, persist: false).nanoseconds })
        let full = try await Harness.median(rounds: rounds) { try await fullSyncActionsPerSecond(actions: quick ? 20 : 200) }
        let (resumed, built, resumeRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await startMilliseconds(items: items, resume: true) },
            { try await startMilliseconds(items: items, resume: false) })
        var floorRows: [Scenario] = []
        if let floor = try initFloor(items: items) {
            let (_, _, floorRatio) = try await Harness.alternate(
                rounds: rounds, { try await startMilliseconds(items: items, resume: true) }, floor)
            floorRows = [
                Scenario(name: "persist.resume_vs_floor_ratio", value: floorRatio, unit: "×", goal: "≤ 3.0", pass: floorRatio <= 3),
            ]
        }
        return [
            Scenario(name: "persist.overhead_ratio_100k", value: ratio, unit: "×", goal: "≤ 1.3", pass: ratio <= 1.3),
            Scenario(name: "persist.ns_per_toggle_100k", value: persisted, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "persist.ns_per_toggle_100k_unpersisted", value: plain, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "persist.bytes_per_toggle", value: bytes.value, unit: "B", goal: "≤ 200", pass: bytes.value <= 200),
            Scenario(name: "persist.full_sync_actions_per_second", value: full, unit: "/s", goal: "—", pass: nil),
            Scenario(name: "persist.resume_ms_100k", value: resumed, unit: "ms", goal: "—", pass: nil),
            Scenario(name: "persist.init_ms_100k", value: built, unit: "ms", goal: "—", pass: nil),
            Scenario(name: "persist.resume_vs_init_ratio_100k", value: resumeRatio, unit: "×", goal: "≤ 1.0", pass: resumeRatio <= 1.0),
        ] + floorRows
    }

    /// A function timing stock `lua5.4` starting the list app of `items` items as the store's start-up rows do
    /// (`Workloads/init_floor.lua`: load the app's file, run `init`, answer the first props; the whole process,
    /// as the store's rows count from nothing to its first props), in milliseconds; nil where `lua5.4` is not
    /// installed or one side runs.
    func initFloor(items: Int) throws -> (() async throws -> Double)? {
        guard let (stock, script) = try floorScript(EmbeddedLua.initFloor, rows: "init.vs_floor_ratio, persist.resume_vs_floor_ratio") else {
            return nil
        }
        let app = try app("list\(items)", Self.listApp(items: items)).appendingPathComponent("app.lua").path
        return {
            let clock = ContinuousClock()
            let start = clock.now
            let output = try Self.output(of: stock, [script.path, app])
            let elapsed = clock.now - start
            guard output.hasPrefix("items=\(items)") else {
                throw BenchFailure("init_floor.lua printed \(output.debugDescription), not items=\(items)")
            }
            return Harness.milliseconds(elapsed)
        }
    }

    /// Starting a big state: the list app of 100,000 items (10,000 in a quick run) loaded and its first props
    /// answered (`init.ms_100k`), against stock Lua doing the same (`initFloor`), alternated.
    func startUp() async throws -> [Scenario] {
        let items = quick ? 10_000 : 100_000
        guard let floor = try initFloor(items: items) else {
            return [Scenario(name: "init.ms_100k", value: try await Harness.median(rounds: rounds) {
                try await startMilliseconds(items: items, resume: false)
            }, unit: "ms", goal: "—", pass: nil)]
        }
        let (built, floorMilliseconds, ratio) = try await Harness.alternate(
            rounds: rounds, { try await startMilliseconds(items: items, resume: false) }, floor)
        return [
            Scenario(name: "init.ms_100k", value: built, unit: "ms", goal: "—", pass: nil),
            Scenario(name: "init.floor_ms_100k", value: floorMilliseconds, unit: "ms", goal: "—", pass: nil),
            Scenario(name: "init.vs_floor_ratio", value: ratio, unit: "×", goal: "≤ 2.0", pass: ratio <= 2),
        ]
    }
}
