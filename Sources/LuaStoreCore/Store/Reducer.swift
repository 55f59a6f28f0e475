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

    /// The long-running effects `state` asks for, by key. Default: none.
    func subscriptions(for state: State) throws -> [String: Effect]

    /// Whether `subscriptions(for:)` can ask for anything (lets the store skip the diff). Default: `true`.
    var declaresSubscriptions: Bool { get }
}

extension Reducer {
    public func subscriptions(for state: State) throws -> [String: Effect] { [:] }
    public var declaresSubscriptions: Bool { true }
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
