import Foundation
import Testing

/// Polls `condition` until it holds or `timeout` passes (or the calling task is cancelled).
public func eventually(timeout: Duration = .seconds(15), _ condition: @Sendable () async -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while clock.now < deadline {
        if await condition() { return true }
        do { try await Task.sleep(for: .milliseconds(5)) } catch { break }
    }
    return await condition()
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
/// the result is `nil`. For a test that waits on something that may never come: the wait has a bound.
public func withinDeadline<T: Sendable>(_ timeout: Duration = .seconds(15), _ body: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await body() }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
