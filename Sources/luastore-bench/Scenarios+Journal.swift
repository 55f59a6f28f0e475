import Foundation
import LuaKit
import LuaStoreScripting

/// The session journal: recording (`run --record`), replay, time travel — each at a 100,000-item state.
extension Scenarios {
    /// ns per toggle of a 100,000-item list, recorded to a file (encoded and written off the store's thread,
    /// the file closed within the time) or not; and the bytes recorded per toggle.
    func recordedToggleCost(items: Int, actions: Int, record: Bool) async throws -> (nanoseconds: Double, bytes: Double) {
        let folder = try app("list\(items)", Self.listApp(items: items))
        var options = self.options
        let path = workspace.appendingPathComponent("session-\(items).jsonl").path
        try? FileManager.default.removeItem(atPath: path) // (a new recording fills its file as it goes)
        let recorder = record ? SessionRecorder(file: try OutputFile(path: path)) : nil
        options.recorder = recorder
        let store = try await ScriptedStore(app: folder, options: options)
        if let recorder { recorder.start(app: "list", try await store.journalStart()) }
        let arrival = await Self.arrival(of: store)
        _ = await recorder?.file?.flushed()
        _ = await store.memory() // (a full collection first, as state_size's rows do: none lands in the window)
        let before = record ? ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) : 0
        let toggles: [LuaValue] = (0..<actions).map { ["type": "toggle", "id": .integer(Int64($0 * 7919 % items + 1))] }
        let result = await Harness.nanoseconds(operations: actions) {
            for action in toggles { store.dispatch(action) }
            await arrival.wait(for: Int64(actions))
            _ = await recorder?.file?.flushed()
        }
        store.shutdown()
        if let failure = recorder?.file?.close() { throw failure }
        let after = record ? ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) : 0
        return (result, Double(after - before) / Double(actions))
    }

    func journal() async throws -> [Scenario] {
        let actions = quick ? 2_000 : 30_000
        let items = quick ? 10_000 : 100_000
        let bytes = Box(0.0)
        let (recorded, plain, ratio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            {
                let (nanoseconds, perToggle) = try await recordedToggleCost(items: items, actions: actions, record: true)
                bytes.value = perToggle
                return nanoseconds
            },
            { try await recordedToggleCost(items: items, actions: actions, record: false).nanoseconds })
        let jump = try await Harness.median(rounds: rounds) { try await jumpMilliseconds(items: items, back: 1_000) }
        let replayActions = quick ? 20_000 : 100_000
        let replay = try await replayCost(items: items, actions: replayActions)
        return [
            Scenario(name: "record.overhead_ratio_100k", value: ratio, unit: "×", goal: "≤ 1.3", pass: ratio <= 1.3),
            Scenario(name: "record.ns_per_toggle_100k", value: recorded, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "record.ns_per_toggle_100k_unrecorded", value: plain, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "record.bytes_per_toggle", value: bytes.value, unit: "B", goal: "≤ 200", pass: bytes.value <= 200),
            Scenario(name: "history.jump_ms_100k", value: jump, unit: "ms", goal: "≤ 50", pass: jump <= 50),
            Scenario(name: "replay.ns_per_action_100k", value: replay.perAction, unit: "ns", goal: "≤ 3 × record", pass: replay.perAction <= 3 * recorded),
            Scenario(name: "replay.vs_record_ratio_100k", value: replay.perAction / recorded, unit: "×", goal: "≤ 3.0",
                     pass: replay.perAction / recorded <= 3),
            Scenario(name: "replay.startup_ms_100k", value: replay.startup, unit: "ms", goal: "—", pass: nil),
            Scenario(name: "replay.startup_vs_init_ratio", value: replay.startup / replay.initialized, unit: "×", goal: "≤ 2.0",
                     pass: replay.startup / replay.initialized <= 2),
        ]
    }

    /// Milliseconds to jump back `back` toggles on an `items`-item state (history on), props delivered.
    func jumpMilliseconds(items: Int, back: Int) async throws -> Double {
        let folder = try app("list\(items)", Self.listApp(items: items))
        var options = self.options
        options.historyEntries = back + 10
        let store = try await ScriptedStore(app: folder, options: options)
        defer { store.shutdown() }
        for index in 0...back { store.dispatch(["type": "toggle", "id": .integer(Int64(index * 7919 % items + 1))]) }
        await store.barrier()
        let first = (await store.history()).kept.first ?? 1
        let clock = ContinuousClock()
        let start = clock.now
        try await store.jump(to: first)
        await store.barrier()
        return Harness.milliseconds(clock.now - start)
    }

    /// What `luastore replay` (the built binary beside this one) costs on an `items`-item state: ns per action
    /// replayed (recordings of `actions` and `2 × actions` toggles, each replayed; the difference per action, so
    /// that start-up is not spread over the actions) and ms to start (a recording of no action replayed: reading the
    /// recorded state, building it, the initial check), beside ms to start the same app in this process
    /// (`startMilliseconds`, as many rounds, after them: `replay.startup_vs_init_ratio`). Each side's time is the fastest
    /// of `rounds` runs: a difference of two timings is as noisy as the noisier, and on a busy machine a median of
    /// differences can even come out below zero.
    func replayCost(items: Int, actions: Int) async throws -> (perAction: Double, startup: Double, initialized: Double) {
        guard let luastore = luastoreBinary else { return (.nan, .nan, .nan) }
        let folder = try app("list\(items)", Self.listApp(items: items))
        let short = try await recording(items: items, actions: actions, folder: folder)
        let long = try await recording(items: items, actions: 2 * actions, folder: folder)
        let arguments = { (path: String) in ["replay", folder.path, path, "--time-budget-ms", "60000"] }
        let none = try await recording(items: items, actions: 0, folder: folder)
        var noneTime = Double.infinity, shortTime = Double.infinity, longTime = Double.infinity, initTime = Double.infinity
        for _ in 0..<max(1, rounds) {
            noneTime = min(noneTime, Harness.milliseconds(try timeLuastore(luastore, arguments(none))))
            shortTime = min(shortTime, Harness.milliseconds(try timeLuastore(luastore, arguments(short))))
            longTime = min(longTime, Harness.milliseconds(try timeLuastore(luastore, arguments(long))))
        }
        // (After the replays, not between them: a store of this process tearing its state down would overlap the
        // next replay.)
        for _ in 0..<max(1, rounds) { initTime = min(initTime, try await startMilliseconds(items: items, resume: false)) }
        return ((longTime - shortTime) * 1_000_000 / Double(actions), noneTime, initTime)
    }

    /// A recording of `actions` toggles on an `items`-item state; its path.
    func recording(items: Int, actions: Int, folder: URL) async throws -> String {
        let path = workspace.appendingPathComponent("replay-\(items)-\(actions).jsonl").path
        try? FileManager.default.removeItem(atPath: path)
        let recorder = SessionRecorder(file: try OutputFile(path: path))
        var options = self.options
        options.recorder = recorder
        let store = try await ScriptedStore(app: folder, options: options)
        recorder.start(app: "list", try await store.journalStart())
        for index in 0..<actions { store.dispatch(["type": "toggle", "id": .integer(Int64(index * 7919 % items + 1))]) }
        await store.barrier()
        store.shutdown()
        if let failure = recorder.file?.close() { throw failure }
        return path
    }
}
