import Foundation

/// The peer a user would pick when every action must be observed: a store shaped like ReSwift's, written here
/// (no vendored code) as the baseline of `counter.every_action_lua_vs_reswift_ratio`. `dispatch` runs the reducer
/// under a lock on the caller's thread (a reducer may not dispatch), then calls each subscriber with the new state,
/// skipping a subscriber's repeats (ReSwift's `skipRepeats` for an `Equatable` state) — one closure per action,
/// no queue, no props machinery.
final class PeerStore<State: Equatable, Action>: @unchecked Sendable {
    // (@unchecked: `state`, `subscribers` and `isDispatching` are touched only under `lock`. The peer takes its
    // lock as ReSwift does, directly — the one `NSLock` outside `Protected`, so that the baseline pays no
    // closure the peer does not.)
    private final class Subscription {
        let newState: (State) -> Void
        var last: State?
        init(_ newState: @escaping (State) -> Void) { self.newState = newState }
    }

    private let lock = NSLock()
    private var state: State
    private let reducer: (Action, State) -> State
    private var subscribers: [Subscription] = []
    private var isDispatching = false

    init(state: State, reducer: @escaping (Action, State) -> State) {
        self.state = state
        self.reducer = reducer
    }

    /// Subscribes `newState`; it gets the current state at once.
    func subscribe(_ newState: @escaping (State) -> Void) {
        let subscription = Subscription(newState)
        lock.lock()
        subscribers.append(subscription)
        let current = state
        lock.unlock()
        deliver(current, to: subscription)
    }

    func dispatch(_ action: Action) {
        lock.lock()
        precondition(!isDispatching, "a reducer dispatched an action")
        isDispatching = true
        state = reducer(action, state)
        isDispatching = false
        let (current, subscribers) = (state, subscribers)
        lock.unlock()
        for subscription in subscribers { deliver(current, to: subscription) }
    }

    private func deliver(_ state: State, to subscription: Subscription) {
        if let last = subscription.last, last == state { return }
        subscription.last = state
        subscription.newState(state)
    }
}
