import Dispatch

/// When observers hear about changes.
public enum NotificationPolicy: Sendable, Equatable {
    /// After every action.
    case everyAction
    /// Once the queued actions have been reduced, or after `maximumActions` of them, whichever comes first:
    /// under a burst observers see the latest state once per batch. Reducers still see every action.
    case batched(maximumActions: Int)

    /// Batches of at most 64 actions.
    public static let batched = NotificationPolicy.batched(maximumActions: 64)

    /// The most actions reduced between two notifications: 1 for `.everyAction`, and for batches of one action
    /// or fewer (`.batched(maximumActions: 1)` is every action, as its words say).
    public var maximumActions: Int {
        switch self {
        case .everyAction: 1
        case .batched(let maximumActions): max(1, maximumActions)
        }
    }

    /// Whether observers see the state after every action.
    public var isEveryAction: Bool { maximumActions == 1 }
}

/// Sends actions to a store.
public struct Dispatcher<Action: Sendable>: Sendable {
    let send: @Sendable (Action) -> Void

    /// A dispatcher calling `send`.
    public init(_ send: @escaping @Sendable (Action) -> Void) { self.send = send }

    /// Dispatches `action`.
    public func callAsFunction(_ action: Action) { send(action) }
}

/// How a store runs: its serial context, when observers are notified, an interceptor, an error reporter.
public struct StoreConfiguration<State: Sendable, Action: Sendable>: Sendable {
    /// The serial context actions are reduced on. Default: a new serial dispatch queue.
    public var executor: any StoreExecutor
    /// When observers are notified. Default: `.batched`.
    public var notification: NotificationPolicy
    /// Sees each action before the reducer does (on the store's context), with a dispatcher to the store the
    /// action was dispatched to: for logging and async actions (Puredux's interceptor).
    public var interceptor: (@Sendable (Action, Dispatcher<Action>) -> Void)?
    /// Receives every failure. Default: logs them.
    public var errorReporter: ErrorReporter<State, Action>
    /// Where the executor sends big batches of the actions it reduced to be destroyed (`Reclaimer`); with none, it
    /// destroys them itself.
    @usableFromInline package var reclaimer: Reclaimer?

    /// A configuration; every part has a default.
    public init(
        executor: any StoreExecutor = DispatchQueue(label: "LuaStore.store", qos: .userInitiated),
        notification: NotificationPolicy = .batched,
        interceptor: (@Sendable (Action, Dispatcher<Action>) -> Void)? = nil,
        errorReporter: ErrorReporter<State, Action> = .log()
    ) {
        self.executor = executor
        self.notification = notification
        self.interceptor = interceptor
        self.errorReporter = errorReporter
    }
}
