import Foundation
import LuaStoreCore

/// The peer a user would pick when every action must be observed: a store shaped like ReSwift's, written here
/// (no vendored code) as the baseline of `counter.every_action_lua_vs_reswift_ratio`. `dispatch` runs the reducer
/// under a lock on the caller's thread (a reducer may not dispatch), then calls each subscriber with the new state,
/// skipping a subscriber's repeats (ReSwift's `skipRepeats` for an `Equatable` state) — one closure per action,
/// no queue, no props machinery.
final class PeerStore<State: Equatable, Action>: @unchecked Sendable {
    // (@unchecked: a subscription's `last` is touched only by the dispatching thread, as ReSwift's are.)
    private final class Subscription {
        let newState: (State) -> Void
        var last: State?
        init(_ newState: @escaping (State) -> Void) { self.newState = newState }
    }

    /// What the lock guards.
    private struct Guarded {
        var state: State
        var subscribers: [Subscription] = []
        var isDispatching = false
    }

    private let guarded: Protected<Guarded>
    private let reducer: (Action, State) -> State

    init(state: State, reducer: @escaping (Action, State) -> State) {
        guarded = Protected(Guarded(state: state))
        self.reducer = reducer
    }

    /// Subscribes `newState`; it gets the current state at once.
    func subscribe(_ newState: @escaping (State) -> Void) {
        let subscription = Subscription(newState)
        let current = guarded.withLock { guarded in
            guarded.subscribers.append(subscription)
            return guarded.state
        }
        deliver(current, to: subscription)
    }

    func dispatch(_ action: Action) {
        let (current, subscribers) = guarded.withLock { guarded in
            precondition(!guarded.isDispatching, "a reducer dispatched an action")
            guarded.isDispatching = true
            guarded.state = reducer(action, guarded.state)
            guarded.isDispatching = false
            return (guarded.state, guarded.subscribers)
        }
        for subscription in subscribers { deliver(current, to: subscription) }
    }

    private func deliver(_ state: State, to subscription: Subscription) {
        if let last = subscription.last, last == state { return }
        subscription.last = state
        subscription.newState(state)
    }
}
