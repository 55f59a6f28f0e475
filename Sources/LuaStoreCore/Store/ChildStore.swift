
/// The state a child store's observers see: the root's state and the child's own.
public struct ChildState<Root: Sendable, Local: Sendable>: Sendable {
    /// The root store's state.
    public var root: Root
    /// The child's local state.
    public var local: Local
}

extension ChildState: Equatable where Root: Equatable, Local: Equatable {}

/// What a root engine knows of a child: it reduces the actions dispatched to it and hears root changes.
@usableFromInline
protocol ChildNode<RootState, Action, Effect>: AnyObject, Sendable {
    associatedtype RootState: Sendable
    associatedtype Action: Sendable
    associatedtype Effect: StoreEffect
    /// Reduces an action dispatched to this child (on the root's executor) into the local state.
    func reduceLocal(_ action: Action) throws -> [Effect]
    /// The root state changed (or the local one did): notify the child's observers.
    func rootChanged(_ root: RootState)
}

/// A root's weak link to a child, so the child lives exactly as long as its owner keeps it.
@usableFromInline
final class WeakChild<RootState: Sendable, Action: Sendable, Effect: StoreEffect>: Sendable {
    private let reference: Protected<WeakBox>

    private struct WeakBox: @unchecked Sendable {
        // Read and written only under the mutex.
        weak var node: (any ChildNode<RootState, Action, Effect>)?
    }

    init(_ node: any ChildNode<RootState, Action, Effect>) { reference = Protected(WeakBox(node: node)) }

    @usableFromInline var node: (any ChildNode<RootState, Action, Effect>)? { reference.withLock { $0.node } }
}

/// A store with its own local state and reducer, attached to a root store for as long as it lives
/// (Puredux's child store).
///
/// Actions dispatched to the child go to the root's reducer and then to the child's; actions dispatched to
/// the root never reach the child's reducer, and nothing flows between sibling children. Observers of the
/// child see `ChildState(root:local:)` after every root or local change. Everything runs on the root's serial
/// context. Keep the `ChildStore` for as long as the feature lives; dropping it detaches it.
///
/// ```swift
/// let editor = root.child(initialState: Draft(), reducer: DraftReducer())
/// editor.subscribe(Observer { state in render(state.root.todos, state.local.text); return .active })
/// editor.dispatch(.draftEdited("Buy milk"))
/// ```
public final class ChildStore<RootState: Sendable, LocalState: Sendable, Action: Sendable>: Sendable {
    private let node: any ChildStoreNode<RootState, LocalState, Action>

    init(node: any ChildStoreNode<RootState, LocalState, Action>) { self.node = node }

    /// Dispatches `action` to the root's reducer and then to this child's.
    public func dispatch(_ action: Action) { node.dispatch(action) }

    /// Subscribes `observer` to the composition of root and local state.
    public func subscribe(_ observer: Observer<ChildState<RootState, LocalState>>) { node.subscribe(observer) }

    /// A lightweight handle to this child (it keeps the child alive).
    public var store: Store<ChildState<RootState, LocalState>, Action> {
        let node = self.node
        return Store(dispatch: { node.dispatch($0) }, subscribe: { node.subscribe($0) })
    }
}

/// A child's public face, independent of the root's reducer type.
protocol ChildStoreNode<RootState, LocalState, Action>: Sendable {
    associatedtype RootState: Sendable
    associatedtype LocalState: Sendable
    associatedtype Action: Sendable
    func dispatch(_ action: Action)
    func subscribe(_ observer: Observer<ChildState<RootState, LocalState>>)
}

/// A child of a root whose reducer is `R`, with its own reducer `C`.
final class ChildEngine<R: Reducer, C: Reducer>: ChildNode, ChildStoreNode
where C.Action == R.Action, C.Effect == R.Effect {
    typealias RootState = R.State
    typealias LocalState = C.State
    typealias Action = R.Action
    typealias Effect = R.Effect

    private let root: StoreEngine<R>
    private let reducer: C
    private let local: ExecutorConfined<(state: C.State, root: R.State?)>
    private let observers = Protected<[ObserverEntry<ChildState<R.State, C.State>>]>([])
    private let link = Protected<WeakChild<R.State, R.Action, R.Effect>?>(nil)

    init(root: StoreEngine<R>, initialState: C.State, reducer: C) {
        self.root = root
        self.reducer = reducer
        self.local = ExecutorConfined((initialState, nil))
    }

    func attach() {
        let weakLink = root.attach(self)
        link.withLock { $0 = weakLink }
    }

    func dispatch(_ action: Action) {
        root.dispatch(action, origin: link.withLock { $0 })
    }

    func subscribe(_ observer: Observer<ChildState<R.State, C.State>>) {
        let entry = ObserverEntry(observer, report: reportObserverFailure)
        observers.withLock { $0.append(entry) }
        root.configuration.executor.execute { [self] in
            guard let rootState = local.value.root else { return }
            entry.prime(ChildState(root: rootState, local: local.value.state))
        }
    }

    func reduceLocal(_ action: Action) throws -> [Effect] {
        try reducer.reduce(into: &local.value.state, action: action)
    }

    func rootChanged(_ rootState: R.State) {
        local.value.root = rootState
        let state = ChildState(root: rootState, local: local.value.state)
        var anyDead = false
        for entry in observers.withLock({ $0 }) where !entry.isDead {
            entry.notify(state)
            anyDead = anyDead || entry.isDead
        }
        if anyDead { observers.withLock { $0.removeAll(where: \.isDead) } }
    }

    private var reportObserverFailure: @Sendable (any Error) -> Void {
        let reporter = root.configuration.errorReporter
        return { error in reporter.report(StoreFailure(stage: .observer, error: error, action: nil, state: nil)) }
    }
}
