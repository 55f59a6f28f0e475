import Foundation

/// A value behind a lock. Built on `NSLock` (a pthread mutex), which the Thread Sanitizer understands; the
/// futex-based `Synchronization.Mutex` is invisible to it on Linux and shows up as false races.
final class Protected<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
