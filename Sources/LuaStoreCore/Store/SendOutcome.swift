import LuaStoreConcurrency

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
    /// The outcome once the action was reduced, and whether the ticket has resolved.
    private let progress = Protected<(outcome: SendOutcome<Effect>?, resolved: Bool)>((nil, false))
    private let onReduced: @Sendable (SendOutcome<Effect>) -> Void
    private let onResolved: @Sendable (SendOutcome<Effect>) -> Void
    /// Where the reducer is told the action came from (nil: outside).
    @usableFromInline package let source: ActionSource?

    /// `onReduced` runs on the executor right after the reducer (what else the reducer's side knows of the
    /// action can be read there); `onResolved` once the observers were told, or when the action is dropped.
    package init(source: ActionSource? = nil, onReduced: @escaping @Sendable (SendOutcome<Effect>) -> Void = { _ in },
                 onResolved: @escaping @Sendable (SendOutcome<Effect>) -> Void) {
        self.source = source
        self.onReduced = onReduced
        self.onResolved = onResolved
    }

    func reduced(_ result: SendOutcome<Effect>) {
        progress.withLock { $0.outcome = result }
        onReduced(result)
    }

    func resolve() {
        let outcome = progress.withLock { progress -> SendOutcome<Effect>?? in
            guard !progress.resolved else { return nil }
            progress.resolved = true
            return .some(progress.outcome)
        }
        guard let outcome else { return }
        onResolved(outcome ?? .dropped)
    }

    deinit { resolve() }
}
