/// A reducer that takes runs of queued actions, for stores built on `RootStore` inside this package (a scripted
/// store: its every reducer call crosses into a VM, a fixed cost worth paying once per run). Not part of the public
/// API: a Swift app's reducer is a `Reducer`. A `RunReducer`'s state may live elsewhere (its `State` then is
/// `Void`), and it may tell its own observers within a run (`notifiesWithinRuns`).
///
/// The store hands it the actions dispatched from outside (not those sent by effects or routed from a child
/// store) as runs, unless an interceptor must see each action before it is reduced; the others, one at a time,
/// with their source.
package protocol RunReducer: Reducer {
    /// `reduce(into:action:)`, told where the action came from. Default: `reduce(into:action:)`.
    func reduce(into state: inout State, action: Action, source: ActionSource) throws -> [Effect]

    /// Whether this reducer tells its own observers within a run, at the points the store's notification policy
    /// sets — after every action under `.everyAction`; under `.batched(maximumActions: n)`, after every n-th
    /// action, counted across runs. The store then hands it whole runs under either policy, and notifies its own
    /// observers and child stores after a run only when the run ended at such a point, and once the queue is
    /// drained. Default: `false` — the store splits runs at its notification points, and under `.everyAction`
    /// hands one action at a time.
    var notifiesWithinRuns: Bool { get }

    /// Applies a run of queued actions in order, each as `reduce(into:action:)` would — a failing action leaves
    /// the state as it was and the ones after it still run — and says how many it applied and what came of them.
    /// It may stop early (after at least one action), and must stop after any action that changed what
    /// `subscriptions(for:)` returns: the store diffs subscriptions once, after the run, and hands the remaining
    /// actions over again. `sinceNotification` actions were reduced since the store's last notification point
    /// (fewer than the policy's `maximumActions`), so, for a reducer that notifies within runs, the run's first
    /// point falls after its `maximumActions - sinceNotification`-th action.
    func reduce(into state: inout State, actions: ArraySlice<Action>, sinceNotification: Int) -> RunOutcome<Effect>
}

extension RunReducer {
    package func reduce(into state: inout State, action: Action, source: ActionSource) throws -> [Effect] {
        try reduce(into: &state, action: action)
    }

    package var notifiesWithinRuns: Bool { false }
}

/// Where an action a store reduces came from.
@usableFromInline
package enum ActionSource: Sendable, Hashable {
    /// `dispatch` on the store (or a scoped handle of it).
    case outside
    /// Sent from outside with the sender's id for it (`ScriptedStore.send(_:id:)`): the journal keeps the id, so
    /// that a resent action is known.
    case client(id: String)
    /// A child store it was dispatched to.
    case child
    /// An effect that sent it: its kind, and its key when it runs as a subscription.
    case effect(EffectKind, subscription: String?)

    /// Whether it came from outside the store (counted among the dispatches from outside).
    @inlinable package var isOutside: Bool {
        switch self {
        case .outside, .client: true
        case .child, .effect: false
        }
    }
}

/// What came of a run of actions (`RunReducer.reduce(into:actions:sinceNotification:)`): only what needs the
/// store's attention is listed, so a run of plain state changes costs nothing per action here.
@usableFromInline
package struct RunOutcome<Effect: StoreEffect> {
    /// How many actions of the run were reduced (from its start), failed ones included.
    @usableFromInline package var applied = 0
    /// The commands of the actions that returned some, by offset in the run, in order.
    @usableFromInline package var commands: [(offset: Int, commands: [Effect])] = []
    /// The actions that failed (and changed nothing), by offset in the run, in order.
    @usableFromInline package var failures: [(offset: Int, error: any Error)] = []

    /// An outcome of nothing applied yet. (Inlinable: a reducer making one per run then knows its type without
    /// asking the runtime.)
    @inlinable package init() {}
}

/// What a `RunReducer` gives the store beyond `Reducer`, taken when the store is made (closures over the
/// reducer, so the store's code, generic over `Reducer`, calls them without asking whether it conforms).
@usableFromInline
struct RunHooks<State, Action, Effect: StoreEffect>: Sendable {
    @usableFromInline let reduce: @Sendable (inout State, Action, ActionSource) throws -> [Effect]
    @usableFromInline let reduceRun: @Sendable (inout State, ArraySlice<Action>, Int) -> RunOutcome<Effect>
    @usableFromInline let notifiesWithinRuns: Bool

    init<R: RunReducer>(_ reducer: R) where R.State == State, R.Action == Action, R.Effect == Effect {
        reduce = { state, action, source in try reducer.reduce(into: &state, action: action, source: source) }
        reduceRun = { state, actions, since in reducer.reduce(into: &state, actions: actions, sinceNotification: since) }
        notifiesWithinRuns = reducer.notifiesWithinRuns
    }
}
