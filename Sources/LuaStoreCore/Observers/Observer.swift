import Dispatch

/// What an observer answers after each notification: keep notifying it, or unsubscribe it.
public enum ObserverStatus: Sendable, Equatable {
    /// Keep notifying.
    case active
    /// Unsubscribe.
    case dead
}

/// Receives a store's state (or a scoped part of it), deduplicated, on the queue it chooses.
///
/// ```swift
/// let observer = Observer<AppState>(removeDuplicates: .equal { $0.title }) { state in
///     render(state.title)
///     return .active
/// }
/// store.subscribe(observer)
/// ```
public struct Observer<State: Sendable>: Sendable {
    @usableFromInline let deliveryQueue: DispatchQueue?
    @usableFromInline let equating: Equating<State>?
    @usableFromInline let body: @Sendable (State) throws -> ObserverStatus

    /// An observer.
    ///
    /// - Parameters:
    ///   - queue: where `body` runs; `nil` runs it on the store's own serial context (cheapest).
    ///   - removeDuplicates: skips states equal to the last one delivered; `nil` delivers every change.
    ///   - body: receives the state; returns `.dead` to unsubscribe. A thrown error goes to the store's
    ///     error reporter and the observer stays subscribed.
    public init(
        on queue: DispatchQueue? = nil,
        removeDuplicates: Equating<State>? = nil,
        _ body: @escaping @Sendable (State) throws -> ObserverStatus
    ) {
        deliveryQueue = queue
        equating = removeDuplicates
        self.body = body
    }

    /// This observer, seeing `transform(state)` of a larger state.
    func pulled<Whole: Sendable>(back transform: @escaping @Sendable (Whole) -> State) -> Observer<Whole> {
        let equating = self.equating
        let body = self.body
        return Observer<Whole>(
            on: deliveryQueue,
            removeDuplicates: equating.map { equating in Equating { equating.isEqual(transform($0), transform($1)) } },
            { try body(transform($0)) }
        )
    }
}
