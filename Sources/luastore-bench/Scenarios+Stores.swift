import Foundation
import Synchronization
import LuaKit
import LuaStoreScripting

/// Many stores in one process (a store per document, per session, per spec file): what a counter store costs to
/// create and to hold — a VM, its thread, its runtime and bookkeeping — with 1,000 of them alive at once, and one
/// action to each of them.
extension Scenarios {
    /// The process's resident memory in bytes (`VmRSS` in `/proc/self/status`).
    static func residentBytes(of process: String = "self") -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(process)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])
        else { return 0 }
        return kilobytes * 1024
    }

    /// Gives the memory the allocator holds free back to the system (glibc's `malloc_trim(0)`, found at run time:
    /// Swift's Glibc module does not declare it), so that the resident size grows with what is allocated next.
    static func trimAllocator() {
        typealias Trim = @convention(c) (Int) -> Int32
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
    }

    func manyStores() async throws -> [Scenario] {
        let count = quick ? 100 : 1_000
        let folder = try app("counter", Self.counterApp)
        let warm = try await ScriptedStore(app: folder, options: options) // (the first store loads what every store shares)
        warm.shutdown()
        await warm.barrier()
        let own = try await heldStores(count, of: folder, options: options)
        // 10,000 stores on a pool of as many threads as the machine has cores: no thread of their own.
        var pooled = options
        pooled.threads = LuaThreadPool(threads: ProcessInfo.processInfo.activeProcessorCount, name: "bench.pool")
        let many = try await heldStores(quick ? 1_000 : 10_000, of: folder, options: pooled)
        return [
            Scenario(name: "stores.create_ms", value: own.createMilliseconds, unit: "ms", goal: "≤ 2", pass: own.createMilliseconds <= 2),
            Scenario(name: "stores.kib_per_store", value: own.kibibytes, unit: "KiB", goal: "≤ 256", pass: own.kibibytes <= 256),
            Scenario(name: "stores.dispatch_ns_1k", value: own.dispatchNanoseconds, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "stores.pooled_create_ms_10k", value: many.createMilliseconds, unit: "ms", goal: "≤ 2",
                     pass: many.createMilliseconds <= 2),
            Scenario(name: "stores.pooled_kib_per_store_10k", value: many.kibibytes, unit: "KiB", goal: "≤ 256", pass: many.kibibytes <= 256),
            Scenario(name: "stores.dispatch_ns_10k", value: many.dispatchNanoseconds, unit: "ns", goal: "—", pass: nil),
        ]
    }

    /// What `count` counter stores cost: ms to create each, KiB each holds (resident), and ns per action when each
    /// of them gets one (dispatched to all, then waited for all at once: the stores work side by side). The wait
    /// is every store's barrier counted down together (`Countdown`); awaiting each store's `barrier()` in turn
    /// measured mostly the waiting task's own wake-ups, one per store (≈ 20 µs each, on 2 cores).
    func heldStores(_ count: Int, of folder: URL, options: ScriptedStoreOptions) async throws
        -> (createMilliseconds: Double, kibibytes: Double, dispatchNanoseconds: Double) {
        Self.trimAllocator() // (memory earlier scenarios freed goes back to the system: these stores' growth shows)
        let before = Self.residentBytes()
        let clock = ContinuousClock()
        var stores: [ScriptedStore] = []
        stores.reserveCapacity(count)
        let start = clock.now
        for _ in 0..<count { stores.append(try await ScriptedStore(app: folder, options: options)) }
        let created = clock.now - start
        for store in stores { await store.barrier() }
        let held = Double(Self.residentBytes() - before) / Double(count) / 1024
        let dispatched = await Harness.median(rounds: rounds) {
            let begin = clock.now
            for store in stores { store.dispatch(["type": "increment"]) }
            await Countdown.barrier(of: stores)
            return Harness.milliseconds(clock.now - begin) * 1_000_000 / Double(count)
        }
        for store in stores { store.shutdown() }
        for store in stores { await store.barrier() }
        return (Harness.milliseconds(created) / Double(count), held, dispatched)
    }
}

/// A count of jobs left, and what runs when the last is done.
final class Countdown: Sendable {
    private let left: Atomic<Int>
    private let done: @Sendable () -> Void

    init(_ count: Int, done: @escaping @Sendable () -> Void) {
        left = Atomic(count)
        self.done = done
        if count == 0 { done() }
    }

    /// One job done.
    func tick() {
        if left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done() }
    }

    /// Returns once each store's thread has run everything submitted to it before the call (what `barrier()`
    /// waits for, for every store at once).
    static func barrier(of stores: [ScriptedStore]) async {
        await withCheckedContinuation { continuation in
            let countdown = Countdown(stores.count) { continuation.resume() }
            for store in stores { store.thread.async { countdown.tick() } }
        }
    }
}
