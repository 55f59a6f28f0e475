import Foundation
import Synchronization
import LuaKit
import LuaStoreCore
import LuaStoreScripting
import RawHTTPClient

/// Memory per store and the pauses an observer sees: latency percentiles measured at rest and beside busy loops.
extension Scenarios {
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
        // The same beside two busy loops (`yes`, as the suite is run under load): reported, not gated — on a loaded
        // 2-core machine they measure its scheduler as much as the store.
        let loops = try BusyLoops(2)
        let loaded = await Self.latencies(of: store, items: items, samples: quick ? 2_000 : 20_000)
        loops.stop()
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
            Scenario(name: "latency.loaded_p50_us", value: Harness.percentile(loaded, 0.5), unit: "µs", goal: "—", pass: nil),
            Scenario(name: "latency.loaded_p999_us", value: Harness.percentile(loaded, 0.999), unit: "µs", goal: "—", pass: nil),
            Scenario(name: "latency.loaded_max_us", value: loaded.max() ?? 0, unit: "µs", goal: "—", pass: nil),
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

/// Busy loops beside a measurement: `yes` into /dev/null, as many as asked, stopped by `stop()` (or killed with the
/// bench's other children if a wait stalls). Spawned and reaped here, not with Foundation's `Process`, which learns
/// that a child ended when a socket every later child inherits closes: waiting for the first loop while the second
/// still ran never ended.
final class BusyLoops: Sendable {
    private let pids: [pid_t]

    init(_ count: Int) throws {
        var pids: [pid_t] = []
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("yes"), nil]
        defer { free(argv[0]) }
        for _ in 0..<count {
            var pid: pid_t = 0
            let spawned = posix_spawn(&pid, "/usr/bin/yes", &actions, nil, &argv, environ)
            guard spawned == 0 else {
                for started in pids { Self.end(started) }
                throw RawSocket.Failure("cannot start /usr/bin/yes: \(String(cString: strerror(spawned)))")
            }
            pids.append(pid)
            Harness.children.withLock { _ = $0.insert(pid) }
        }
        self.pids = pids
    }

    func stop() {
        for pid in pids { Self.end(pid) }
    }

    private static func end(_ pid: pid_t) {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        Harness.children.withLock { _ = $0.remove(pid) }
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

