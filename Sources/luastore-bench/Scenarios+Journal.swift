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
        let recorder = record ? SessionRecorder(file: try OutputFile(path: path)) : nil
        if let recorder { options.journal = { entry in recorder.append(entry) } }
        let store = try await ScriptedStore(app: folder, options: options)
        if let recorder { recorder.start(app: "list", try await store.journalStart()) }
        let seen = Box(Int64(-1))
        store.observeProps { props in
            seen.value = props["toggles"].integer ?? -1
            return .active
        }
        await waitUntil { seen.value == 0 }
        _ = await recorder?.file.flushed()
        let before = record ? ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0) : 0
        let toggles: [LuaValue] = (0..<actions).map { ["type": "toggle", "id": .integer(Int64($0 * 7919 % items + 1))] }
        let result = await Harness.nanoseconds(operations: actions) {
            for action in toggles { store.dispatch(action) }
            await waitUntil { seen.value == Int64(actions) }
            _ = await recorder?.file.flushed()
        }
        store.shutdown()
        if let failure = recorder?.file.close() { throw failure }
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
        return [
            Scenario(name: "record.overhead_ratio_100k", value: ratio, unit: "×", goal: "≤ 1.3", pass: ratio <= 1.3),
            Scenario(name: "record.ns_per_toggle_100k", value: recorded, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "record.ns_per_toggle_100k_unrecorded", value: plain, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "record.bytes_per_toggle", value: bytes.value, unit: "B", goal: "≤ 200", pass: bytes.value <= 200),
        ]
    }
}
