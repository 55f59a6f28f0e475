import Foundation
import Testing

/// Polls `condition` until it holds or `timeout` passes (or the calling task is cancelled).
///
/// The bound is counted in polls of 5 ms, not read off the wall clock: the tests share the cooperative pool (two
/// threads on a two-core machine), and a moment when other tests hold both threads passes for this wait and for
/// the work it waits on alike. Read off the clock, such a moment spent the bound while nothing could run, and the
/// first look after it failed a condition whose work was queued behind it (an effect's task, under load).
public func eventually(timeout: Duration = .seconds(15), _ condition: @Sendable () async -> Bool) async -> Bool {
    for _ in 0..<polls(in: timeout) {
        if await condition() { return true }
        do { try await Task.sleep(for: pollInterval) } catch { break }
    }
    return await condition()
}

private let pollInterval = Duration.milliseconds(5)

/// How many polls of `pollInterval` make `timeout` (at least one).
private func polls(in timeout: Duration) -> Int {
    max(1, Int(timeout / pollInterval))
}

extension Tag {
    /// Suites about threads and concurrency: `scripts/test` runs every suite with this tag a second time, under
    /// the Thread Sanitizer (it finds them by this tag; suites about time budgets stay out, as the sanitizer's
    /// tenfold slowdown turns their deadlines into noise).
    @Tag public static var concurrency: Self
}

/// A deterministic generator (SplitMix64), so a failure of a generated test reproduces from its seed.
public struct SplitMix: RandomNumberGenerator, Sendable {
    public var state: UInt64
    public init(state: UInt64) { self.state = state }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Runs `body` until it returns or `timeout` passes; then it is cancelled (an `AsyncStream` it iterates ends) and
/// the result is `nil`. For a test that waits on something that may never come: the wait has a bound, counted as
/// `eventually`'s is (in slices of sleep, so that a moment when the pool runs nothing does not spend it).
public func withinDeadline<T: Sendable>(_ timeout: Duration = .seconds(15), _ body: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            for _ in 0..<polls(in: timeout) {
                do { try await Task.sleep(for: pollInterval) } catch { return nil }
            }
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
