import Dispatch

/// A serial context a store reduces on: jobs run one at a time, in the order submitted.
///
/// `DispatchQueue` (serial) is one; a store whose state is owned by a thread of its own uses that thread.
public protocol StoreExecutor: Sendable {
    /// Runs `job` after the jobs already submitted.
    func execute(_ job: @escaping @Sendable () -> Void)
}

extension DispatchQueue: StoreExecutor {
    /// Runs `job` asynchronously on the queue (which must be serial for a store).
    public func execute(_ job: @escaping @Sendable () -> Void) {
        async(execute: job)
    }
}
