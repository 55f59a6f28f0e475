import LuaStoreConcurrency
import Synchronization

/// What became of an action `send` dispatched: reduced (with the commands it returned), failed (the reducer
/// threw; the state is as it was), or dropped (the store stopped before it was reduced, or an interceptor's
/// store was gone).
public enum SendOutcome<Effect: Sendable>: Sendable {
    /// Reduced; `commands` are what the reducer returned.
    case applied(commands: [Effect])
    /// `dispatchIndex`: the action's number among the dispatches from outside, as `StoreFailure` gives it.
    case failed(any Error, dispatchIndex: UInt64?)
    /// Never reduced: the store stopped first, or an interceptor's store was gone.
    case dropped

    /// The commands, when the action was applied.
    public var commands: [Effect]? {
        if case .applied(let commands) = self { return commands }
        return nil
    }
}

/// Rides with an action `send` dispatched: hears, on the store's executor, the action's outcome right after it
/// was reduced (`reduced`), then, once the store told its observers about that state, resolves (`resolve`) —
/// exactly once: a ticket dropped unresolved (its action never reduced: the store stopped) resolves `.dropped`.
@usableFromInline
package final class ActionTicket<Effect: Sendable>: Sendable {
    /// The outcome once the action was reduced.
    @usableFromInline let outcome = Protected<SendOutcome<Effect>?>(nil)
    /// Whether the ticket has resolved: an atomic of its own, not a field under the outcome's lock, so that the
    /// deinitializer of a ticket that resolved — every ticket of a store that runs — does no generic work at all.
    @usableFromInline let resolved = Atomic<Bool>(false)
    @usableFromInline let onReduced: @Sendable (SendOutcome<Effect>) -> Void
    @usableFromInline let onResolved: @Sendable (SendOutcome<Effect>) -> Void
    /// Where the reducer is told the action came from (nil: outside).
    @usableFromInline package let source: ActionSource?

    /// `onReduced` runs on the executor right after the reducer (what else the reducer's side knows of the
    /// action can be read there); `onResolved` once the observers were told, or when the action is dropped.
    // (Inlinable, as the rest of a sent action's path: compiled here once for every effect type, each call looked
    // up the generic types it touched.)
    @inlinable
    package init(source: ActionSource? = nil, onReduced: @escaping @Sendable (SendOutcome<Effect>) -> Void = { _ in },
                 onResolved: @escaping @Sendable (SendOutcome<Effect>) -> Void) {
        self.source = source
        self.onReduced = onReduced
        self.onResolved = onResolved
    }

    @inlinable func reduced(_ result: SendOutcome<Effect>) {
        outcome.withLock { $0 = result }
        onReduced(result)
    }

    @inlinable func resolve() {
        guard resolved.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        onResolved(outcome.withLock { $0 } ?? .dropped)
    }

    deinit {
        if !resolved.load(ordering: .acquiring) { resolve() }
    }
}
