import Foundation

/// A value behind a lock, for effect handlers and observers that share state across threads — and LuaStore's
/// one lock wrapper: `LuaKit` and `LuaStoreCore` both use it (`LuaStoreCore` re-exports it). Built on `NSLock`
/// (a pthread mutex), which the Thread Sanitizer understands; the futex-based `Synchronization.Mutex` is
/// invisible to it on Linux and shows up as false races.
///
/// ```swift
/// let seen = Protected<[Int]>([])
/// store.subscribe(Observer { state in seen.withLock { $0.append(state.count) }; return .active })
/// ```
public final class Protected<Value>: @unchecked Sendable {
    @usableFromInline let lock = NSLock()
    // (Only ever reached under the lock, which is what makes access exclusive: not checked again at run time.)
    @usableFromInline @exclusivity(unchecked) var stored: Value

    /// A lock around `value`.
    public init(_ value: Value) { stored = value }

    /// A copy of the value, read under the lock.
    public var value: Value { withLock { $0 } }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&stored)
    }
}
