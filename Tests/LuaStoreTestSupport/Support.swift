import Foundation

/// A value shared between threads (behind an `NSLock`, which the Thread Sanitizer understands).
public final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    public init(_ value: Value) { stored = value }

    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&stored)
    }

    public var value: Value { withLock { $0 } }
}

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

