/// A lightweight handle to a store (root, scoped or child): dispatch actions, subscribe observers. Safe to
/// pass anywhere and to use from any thread. A handle to a root store does not keep it alive.
///
/// ```swift
/// let titles: Store<[String], TodoAction> = root.store.scope { $0.todos.map(\.title) }
/// titles.subscribe(Observer(removeDuplicates: .asEquatable) { titles in print(titles); return .active })
/// titles.dispatch(.todoAdded("Buy milk"))
/// ```
public struct Store<State: Sendable, Action: Sendable>: Sendable {
    private let dispatchAction: @Sendable (Action) -> Void
    private let subscribeObserver: @Sendable (Observer<State>) -> Void

    /// A store made of a dispatch function and a subscribe function.
    public init(dispatch: @escaping @Sendable (Action) -> Void, subscribe: @escaping @Sendable (Observer<State>) -> Void) {
        dispatchAction = dispatch
        subscribeObserver = subscribe
    }

    /// Dispatches `action`: it is queued and reduced in order on the store's serial context.
    public func dispatch(_ action: Action) { dispatchAction(action) }

    /// Subscribes `observer`; it receives the current state right away, then changes.
    public func subscribe(_ observer: Observer<State>) { subscribeObserver(observer) }

    /// A scoped store: a mapped view of this one, with no state or reducer of its own.
    public func scope<Part: Sendable>(_ transform: @escaping @Sendable (State) -> Part) -> Store<Part, Action> {
        let subscribe = subscribeObserver
        return Store<Part, Action>(dispatch: dispatchAction, subscribe: { subscribe($0.pulled(back: transform)) })
    }

    /// Subscribes a presenter: props computed from the state off this store's context, delivered deduplicated.
    public func subscribe<Props: Sendable>(_ presenter: Presenter<State, Props>) {
        subscribeObserver(presenter.observer())
    }
}

/// The owner of a store's state: create it with the initial state, the reducer and the effect handlers, keep
/// it for the store's lifetime. Hand out `store` (or scoped stores) to the parts of the app.
///
/// ```swift
/// let root = RootStore(initialState: AppState(), reducer: AppReducer(), effects: appEffects)
/// root.store.dispatch(.appStarted)
/// ```
public final class RootStore<R: Reducer>: Sendable {
    @usableFromInline let engine: StoreEngine<R>

    /// Creates the store; subscriptions the initial state asks for are launched right away.
    public init(
        initialState: R.State,
        reducer: R,
        effects: EffectInterpreter<R.Effect, R.State, R.Action> = EffectInterpreter(),
        configuration: StoreConfiguration<R.State, R.Action> = StoreConfiguration()
    ) {
        engine = StoreEngine(initialState: initialState, reducer: reducer, effects: effects, configuration: configuration)
    }

    /// Creates a store whose reducer takes runs of queued actions (`RunReducer`).
    package init(
        initialState: R.State,
        runReducer reducer: R,
        effects: EffectInterpreter<R.Effect, R.State, R.Action> = EffectInterpreter(),
        configuration: StoreConfiguration<R.State, R.Action> = StoreConfiguration()
    ) where R: RunReducer {
        engine = StoreEngine(initialState: initialState, reducer: reducer, runHooks: RunHooks(reducer), effects: effects,
                             configuration: configuration)
    }

    deinit {
        engine.shutdown()
    }

    /// A handle to this store. It does not keep the store alive: once the `RootStore` is gone, dispatching
    /// does nothing.
    public var store: Store<R.State, R.Action> {
        let engine = self.engine
        return Store(
            dispatch: { [weak engine] in engine?.dispatch($0) },
            subscribe: { [weak engine] in engine?.subscribe($0) }
        )
    }

    /// Dispatches `action`.
    @inlinable public func dispatch(_ action: R.Action) { engine.dispatch(action) }

    /// Dispatches `action` and waits for what became of it: applied (with its commands) or failed, returned once
    /// the store has told its observers about the state after it; `.dropped` if the store stopped first. It is
    /// reduced in order with every other action (a dispatch from outside; `StoreFailure.dispatchIndex` counts
    /// it). Cancelling the waiting task does not take the action back.
    public func send(_ action: R.Action) async -> SendOutcome<R.Effect> {
        await withCheckedContinuation { continuation in
            engine.dispatch(action, ticket: ActionTicket(onResolved: { continuation.resume(returning: $0) }))
        }
    }

    /// `send`'s dispatch, for a store built on this one: `ticket` hears the outcome on the executor right after
    /// the reducer, and resolves after the notification.
    @inlinable package func dispatch(_ action: R.Action, ticket: ActionTicket<R.Effect>) { engine.dispatch(action, ticket: ticket) }

    /// Subscribes `observer`.
    public func subscribe(_ observer: Observer<R.State>) { engine.subscribe(observer) }

    /// A child store with its own local state and reducer (see `ChildStore`).
    public func child<C: Reducer>(initialState: C.State, reducer: C) -> ChildStore<R.State, C.State, R.Action>
    where C.Action == R.Action, C.Effect == R.Effect {
        let child = ChildEngine(root: engine, initialState: initialState, reducer: reducer)
        child.attach()
        return ChildStore(node: child)
    }

    /// The current state, read on the store's serial context after the actions queued before this call.
    public func state() async -> R.State { await engine.currentState() }

    /// The subscriptions running now, by key.
    public func runningSubscriptions() async -> [String: R.Effect] { await engine.runningSubscriptions() }

    /// Waits until no action is queued and no command is in flight, or until `timeout` (or the calling task is
    /// cancelled); returns whether the store became idle. Running subscriptions do not count, except those of the kinds in `finishing`
    /// (subscriptions that end by themselves, such as requests).
    public func waitUntilIdle(timeout: Duration, finishing: Set<EffectKind> = []) async -> Bool {
        await engine.waitUntilIdle(timeout: timeout, finishing: finishing)
    }

    /// Stops taking actions and cancels every running subscription and command.
    public func shutdown() { engine.shutdown() }

    /// Diffs the subscriptions again (launching and cancelling) against the state as it is now: for a state
    /// that changed without an action (a store going on from a past point of its history).
    public func refreshSubscriptions() { engine.refreshSubscriptions() }

    /// Reduces actions the reducer set aside (while the state stood at a past point of its
    /// history), in order, each from its source, before anything still queued: those from outside keep the
    /// dispatch numbers they were given when they arrived (`StoreFailure.dispatchIndex`). Call it on the store's
    /// executor, in the job that ends the setting aside, so that nothing comes in between. With
    /// `diffingSubscriptions`, the subscriptions are diffed against the state first (it changed without an action).
    package func reinstate(_ held: [(action: R.Action, source: ActionSource)], diffingSubscriptions: Bool = false) {
        engine.reinstate(held, diffingSubscriptions: diffingSubscriptions)
    }
}
