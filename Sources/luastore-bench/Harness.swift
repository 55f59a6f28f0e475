import Synchronization
import Foundation
import LuaStoreCore

/// One line of the results table.
struct Scenario: Encodable {
    let name: String
    let value: Double
    let unit: String
    let goal: String
    let pass: Bool?
}

/// Measuring helpers: ratios come from alternating the two sides, several rounds, and taking the median.
enum Harness {
    /// How long one of the benchmark's waits for an observer may last before it is taken for a stall (a whole
    /// scenario takes seconds; a wait that never ends would hang the run and say nothing).
    static let stallSeconds = 120
    static var stallLimit: DispatchTimeInterval { .seconds(stallSeconds) }

    /// Says which wait stalled and what it had seen, on standard error, and ends the run (exit status 3).
    static func stalled(_ what: String) -> Never {
        FileHandle.standardError.write(Data("luastore-bench: stalled: \(what)\n".utf8))
        for child in children.withLock({ $0 }) { kill(child, SIGKILL) } // (no server of the bench outlives it)
        exit(3)
    }

    /// The processes the bench started and has not stopped yet (`serve.*` rows' servers).
    static let children = Protected<Set<pid_t>>([])

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count.isMultiple(of: 2) ? (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2 : sorted[sorted.count / 2]
    }

    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
    }

    /// Nanoseconds per operation of `body`, which performs `operations` operations.
    static func nanoseconds(operations: Int, _ body: () async throws -> Void) async rethrows -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        try await body()
        Reclaimer.shared.settle() // (the actions a scripted store handed over destroyed: their cost counts here)
        let elapsed = clock.now - start
        return Double(elapsed.components.seconds) * 1e9 / Double(operations) + Double(elapsed.components.attoseconds) / 1e9 / Double(operations)
    }

    /// Nanoseconds per operation of `body` (synchronous, for work on a VM's own thread).
    static func nanosecondsSync(operations: Int, _ body: () throws -> Void) rethrows -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        try body()
        let elapsed = clock.now - start
        return Double(elapsed.components.seconds) * 1e9 / Double(operations) + Double(elapsed.components.attoseconds) / 1e9 / Double(operations)
    }

    /// The median of `rounds` runs of `body`, after one that is not counted.
    static func median(rounds: Int, _ body: () async throws -> Double) async rethrows -> Double {
        _ = try await body()
        var values: [Double] = []
        for _ in 0..<rounds { values.append(try await body()) }
        return median(values)
    }

    /// Which side of each ratio runs: both (measuring), or only one (to profile it alone).
    enum Sides: String, Sendable {
        case both, first, second
    }

    /// Runs `a` and `b` alternately for `rounds` rounds, after one round of each that is not counted (it warms
    /// up caches, allocators and thread pools: first rounds were often outliers); returns the medians of each
    /// and of the ratios a/b. With `sides` other than `.both` only that side runs (the other's figures and the
    /// ratio are NaN). The order turns each round (a then b, then b then a): a side run right after the other's
    /// store was shut down shares the machine with what that store leaves to reclaim, and a side that always ran
    /// first read ≈ 10 % slower than the same side run second (two runs of one app against itself, 12 rounds).
    static func alternate(rounds: Int, sides: Sides = .both, _ a: () async throws -> Double, _ b: () async throws -> Double)
        async rethrows -> (a: Double, b: Double, ratio: Double) {
        if sides != .second { _ = try await a() }
        if sides != .first { _ = try await b() }
        var first: [Double] = []
        var second: [Double] = []
        var ratios: [Double] = []
        for round in 0..<rounds {
            var x = Double.nan, y = Double.nan
            if round.isMultiple(of: 2) {
                if sides != .second { x = try await a() }
                if sides != .first { y = try await b() }
            } else {
                if sides != .first { y = try await b() }
                if sides != .second { x = try await a() }
            }
            first.append(x)
            second.append(y)
            ratios.append(x / y)
        }
        return (median(first), median(second), median(ratios))
    }

    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

/// A value shared with observers on other threads.
final class Box<Value: Sendable>: Sendable {
    private let stored: Protected<Value>
    init(_ value: Value) { stored = Protected(value) }
    var value: Value {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

/// The last value an observer saw, and a wait for it to reach a target without polling: the observer's thread
/// resumes the waiter once. Every timed wait of the benchmark uses it: polling every 50 µs woke a timer thread
/// 20,000 times a second beside the stores measured, on a machine with two cores (a recorded store, whose writer
/// needs the second core, paid for it most).
final class Arrival: @unchecked Sendable {
    // (An observer's `see` is two atomic operations: it takes the lock only when the value reaches a waiter's target.
    // Under a lock, every observed delivery paid ≈ 40 ns of the instrument's own — through `Protected` 40–90 ns
    // more — where stock Lua's floor tells its observer by one assignment. The waiter publishes its target before
    // it reads `seen`, and the observer `seen` before it reads the target (both sequentially consistent), so at
    // least one of them sees the other's; the lock then lets only one of them resume the waiter.)
    private let seen = Atomic<Int64>(.min)
    private let target = Atomic<Int64>(.max)
    private let lock = NSLock()
    private var waiter: CheckedContinuation<Void, Never>?

    /// The observer saw `value`.
    func see(_ value: Int64) {
        seen.store(value, ordering: .sequentiallyConsistent)
        if value >= target.load(ordering: .sequentiallyConsistent) { resumeWaiter() }
    }

    /// Counts one more arrival (observers counting deliveries, from 0).
    func count() {
        var last = seen.load(ordering: .relaxed)
        while true {
            let next = last == .min ? 1 : last + 1
            let (exchanged, found) = seen.compareExchange(expected: last, desired: next, ordering: .sequentiallyConsistent)
            if exchanged {
                if next >= target.load(ordering: .sequentiallyConsistent) { resumeWaiter() }
                return
            }
            last = found
        }
    }

    /// Resumes the waiter, if it is still there (whoever comes first, the observer or the waiter itself).
    private func resumeWaiter() {
        lock.lock()
        let waiter = self.waiter
        self.waiter = nil
        target.store(.max, ordering: .sequentiallyConsistent)
        lock.unlock()
        waiter?.resume()
    }

    /// Returns once the observer has seen `target` (or more); a wait past `Harness.stallLimit` ends the run,
    /// naming the wait (its file and line).
    func wait(for target: Int64, file: StaticString = #fileID, line: UInt = #line) async {
        let stall = DispatchWorkItem { [self] in
            let saw = seen.load(ordering: .sequentiallyConsistent)
            guard saw < target else { return }
            Harness.stalled("\(file):\(line) waited \(Harness.stallSeconds) s for the observer to see \(target); it saw \(saw == .min ? "nothing" : String(saw))")
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + Harness.stallLimit, execute: stall)
        defer { stall.cancel() }
        if seen.load(ordering: .sequentiallyConsistent) >= target { return }
        await withCheckedContinuation { continuation in
            lock.lock()
            waiter = continuation
            self.target.store(target, ordering: .sequentiallyConsistent)
            lock.unlock()
            if seen.load(ordering: .sequentiallyConsistent) >= target { resumeWaiter() }
        }
    }
}
