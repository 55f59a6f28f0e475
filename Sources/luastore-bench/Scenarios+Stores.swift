import Foundation
import LuaKit
import LuaStoreScripting

/// Many stores in one process (a store per document, per session, per spec file): what a counter store costs to
/// create and to hold — a VM, its thread, its runtime and bookkeeping — with 1,000 of them alive at once, and one
/// action to each of them.
extension Scenarios {
    /// The process's resident memory in bytes (`VmRSS` in `/proc/self/status`).
    static func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
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
            for store in stores { await store.barrier() }
            return Harness.milliseconds(clock.now - begin) * 1_000_000 / Double(count)
        }
        for store in stores { store.shutdown() }
        for store in stores { await store.barrier() }
        let createMilliseconds = Harness.milliseconds(created) / Double(count)
        return [
            Scenario(name: "stores.create_ms", value: createMilliseconds, unit: "ms", goal: "≤ 2", pass: createMilliseconds <= 2),
            Scenario(name: "stores.kib_per_store", value: held, unit: "KiB", goal: "≤ 256", pass: held <= 256),
            Scenario(name: "stores.dispatch_ns_1k", value: dispatched, unit: "ns", goal: "—", pass: nil),
        ]
    }
}
