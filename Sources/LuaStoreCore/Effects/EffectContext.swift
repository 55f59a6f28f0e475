import Synchronization

/// Whether an effect may still report back. Cancelled when its subscription is removed, when the store
/// shuts down, or when its owner goes away; actions dispatched after that never reach the reducer.
@usableFromInline
final class EffectLease: Sendable {
    private let cancelled = Atomic<Bool>(false)
    /// The effect's kind and subscription key: where the actions it sends come from.
    @usableFromInline let source: ActionSource

    init(source: ActionSource) { self.source = source }

    @usableFromInline var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() { cancelled.store(true, ordering: .releasing) }
}

/// What a running effect gets: a way to dispatch result actions, to read the current state, and to tell
/// whether it has been cancelled.
public struct EffectContext<State: Sendable, Action: Sendable>: Sendable {
    let lease: EffectLease
    let send: @Sendable (Action, EffectLease) -> Void
    let read: @Sendable () async -> State

    /// The subscription key, for subscriptions; `nil` for commands.
    public let subscriptionKey: String?

    /// Dispatches `action` to the store, unless the effect has been cancelled by then (checked again when the
    /// store reaches the action, so a late result of a cancelled effect never reaches the reducer).
    public func dispatch(_ action: Action) {
        guard !lease.isCancelled else { return }
        send(action, lease)
    }

    /// The state as of the last completed transition (read on the store's serial context).
    public func state() async -> State { await read() }

    /// Whether the effect has been cancelled.
    public var isCancelled: Bool { lease.isCancelled }
}
