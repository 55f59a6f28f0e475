import Foundation
import Synchronization
import LuaKit
import LuaStoreCore
import LuaStoreScripting

/// Hot reload: how long a reload of a big app takes, and what watching its folder costs while nothing changes.
extension Scenarios {
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
}
