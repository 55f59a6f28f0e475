import Foundation
import Testing

/// Polls `condition` until it holds or `timeout` passes (or the calling task is cancelled).
public func eventually(timeout: Duration = .seconds(5), _ condition: @Sendable () async -> Bool) async -> Bool {
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
