/// The update function of a store: applies an action to the state and returns the effects it asks for.
///
/// A reducer is pure: it does no I/O and reads no clock; effects are returned as data (`StoreEffect` values)
/// for an `EffectInterpreter` to perform. Long-running effects are declared by `subscriptions(for:)` as a keyed
/// set that the store diffs after every transition (the Apex model: insert to launch, remove to cancel).
///
/// A reducer that throws must leave `state` as it found it: the store does not copy the state before
/// reducing, so that an action costs what it changes, not what exists.
///
/// ```swift
/// struct Counter: Reducer {
///     func reduce(into state: inout Int, action: CounterAction) -> [Never] {
///         if action == .increment { state += 1 }
///         return []
///     }
/// }
/// ```
public protocol Reducer<State, Action, Effect>: Sendable {
    /// The state the reducer updates.
    associatedtype State: Sendable
    /// The actions it handles.
    associatedtype Action: Sendable
    /// The effects it can ask for; `Never` when it asks for none.
    associatedtype Effect: StoreEffect = Never

    /// Applies `action` to `state`; returns the one-off effects (commands) to perform, in order.
    func reduce(into state: inout State, action: Action) throws -> [Effect]

    /// `reduce(into:action:)`, told where the action came from (for reducers that record sessions). Default:
    /// `reduce(into:action:)`. Actions of a run (`reduce(into:actions:)`) all come from outside.
    func reduce(into state: inout State, action: Action, source: ActionSource) throws -> [Effect]

    /// The long-running effects `state` asks for, by key. Default: none.
    func subscriptions(for state: State) throws -> [String: Effect]

    /// Whether `subscriptions(for:)` can ask for anything (lets the store skip the diff). Default: `true`.
    var declaresSubscriptions: Bool { get }

    /// Whether the store should hand this reducer runs of queued actions (`reduce(into:actions:)`) rather than
    /// one action at a time. For reducers whose every call has a fixed cost worth paying once per run (one
    /// that crosses into a scripting VM, say). Default: `false`.
    var reducesRuns: Bool { get }

    /// Whether this reducer tells its own observers within a run, at the points the store's notification policy
    /// sets — after every action under `.everyAction`; under `.batched(maximumActions: n)`, after every n-th
    /// action, counted across runs (`reduce(into:actions:sinceNotification:)`). The store then hands it whole
    /// runs under either policy, and notifies its own observers and child stores after a run only when the run
    /// ended at such a point, and once the queue is drained. (A scripted store runs its props and selectors
    /// inside the VM's run, only when an action changed what they read.) Default: `false` — the store splits
    /// runs at its notification points, and under `.everyAction` hands one action at a time.
    var notifiesWithinRuns: Bool { get }

    /// Applies a run of queued actions in order, each as `reduce(into:action:)` would — a failing action
    /// leaves the state as it was and the ones after it still run — and says how many it applied and what
    /// came of them. It may stop early (after at least one action), and must stop after any action that
    /// changed what `subscriptions(for:)` returns: the store diffs subscriptions once, after the run, and hands
    /// the remaining actions over again. Called only when `reducesRuns` is `true`, and never while an
    /// interceptor is set (it sees each action before its reduction). Default: the first action alone.
    func reduce(into state: inout State, actions: ArraySlice<Action>) -> RunOutcome<Effect>

    /// `reduce(into:actions:)` for a reducer that notifies within runs (`notifiesWithinRuns`):
    /// `sinceNotification` actions were reduced since the store's last notification point (fewer than the
    /// policy's `maximumActions`), so the run's first point falls after its
    /// `maximumActions - sinceNotification`-th action. Default: `reduce(into:actions:)`.
    func reduce(into state: inout State, actions: ArraySlice<Action>, sinceNotification: Int) -> RunOutcome<Effect>
}

/// Where an action a store reduces came from.
public enum ActionSource: Sendable, Hashable {
    /// `dispatch` on the store (or a scoped handle of it).
    case outside
    /// A child store it was dispatched to.
    case child
    /// An effect that sent it: its kind, and its key when it runs as a subscription.
    case effect(EffectKind, subscription: String?)
}

extension Reducer {
    public func reduce(into state: inout State, action: Action, source: ActionSource) throws -> [Effect] {
        try reduce(into: &state, action: action)
    }

    public func subscriptions(for state: State) throws -> [String: Effect] { [:] }
    public var declaresSubscriptions: Bool { true }
    public var reducesRuns: Bool { false }
    public var notifiesWithinRuns: Bool { false }

    public func reduce(into state: inout State, actions: ArraySlice<Action>) -> RunOutcome<Effect> {
        var outcome = RunOutcome<Effect>()
        guard let action = actions.first else { return outcome }
        outcome.applied = 1
        do {
            let commands = try reduce(into: &state, action: action)
            if !commands.isEmpty { outcome.commands.append((0, commands)) }
        } catch {
            outcome.failures.append((0, error))
        }
        return outcome
    }

    public func reduce(into state: inout State, actions: ArraySlice<Action>, sinceNotification: Int) -> RunOutcome<Effect> {
        reduce(into: &state, actions: actions)
    }
}

/// What came of a run of actions (`Reducer.reduce(into:actions:)`): only what needs the store's attention is
/// listed, so a run of plain state changes costs nothing per action here.
public struct RunOutcome<Effect: StoreEffect> {
    /// How many actions of the run were reduced (from its start), failed ones included.
    public var applied = 0
    /// The commands of the actions that returned some, by offset in the run, in order.
    public var commands: [(offset: Int, commands: [Effect])] = []
    /// The actions that failed (and changed nothing), by offset in the run, in order.
    public var failures: [(offset: Int, error: any Error)] = []

    /// An outcome of nothing applied yet. (Inlinable: a reducer making one per run then knows its type without
    /// asking the runtime.)
    @inlinable public init() {}
}

/// A reducer made of closures.
///
/// ```swift
/// let counter = Reduce<Int, String, Never> { state, action in
///     if action == "increment" { state += 1 }
///     return []
/// }
/// ```
public struct Reduce<State: Sendable, Action: Sendable, Effect: StoreEffect>: Reducer {
    let body: @Sendable (inout State, Action) throws -> [Effect]
    let subscriptionsBody: (@Sendable (State) throws -> [String: Effect])?

    /// A reducer running `body`, with subscriptions declared by `subscriptions` (none when `nil`).
    public init(
        _ body: @escaping @Sendable (inout State, Action) throws -> [Effect],
        subscriptions: (@Sendable (State) throws -> [String: Effect])? = nil
    ) {
        self.body = body
        self.subscriptionsBody = subscriptions
    }

    public func reduce(into state: inout State, action: Action) throws -> [Effect] {
        try body(&state, action)
    }

    public func subscriptions(for state: State) throws -> [String: Effect] {
        try subscriptionsBody?(state) ?? [:]
    }

    public var declaresSubscriptions: Bool { subscriptionsBody != nil }
}

/// Wraps a reducer so that, if it throws, the state is restored to what it was before the action.
/// For Swift reducers that may throw after mutating; costs a copy of whatever the reducer changed.
public struct Transactional<Base: Reducer>: Reducer {
    let base: Base

    /// Makes `base` transactional.
    public init(_ base: Base) { self.base = base }

    public func reduce(into state: inout Base.State, action: Base.Action) throws -> [Base.Effect] {
        let before = state
        do {
            return try base.reduce(into: &state, action: action)
        } catch {
            state = before
            throw error
        }
    }

    public func subscriptions(for state: Base.State) throws -> [String: Base.Effect] {
        try base.subscriptions(for: state)
    }

    public var declaresSubscriptions: Bool { base.declaresSubscriptions }
}
