import Dispatch


/// Where a presenter computes props.
public enum PresentationQueue: Sendable {
    /// A serial queue shared by presenters (the default; keeps the main queue free).
    case shared
    /// The main queue.
    case main
    /// A serial queue of your own.
    case serial(DispatchQueue)
    /// The store's own serial context (no hop; for props that must read state only reachable there).
    case storeContext

    static let sharedQueue = DispatchQueue(label: "LuaStore.presentation", qos: .userInitiated)

    var queue: DispatchQueue? {
        switch self {
        case .shared: Self.sharedQueue
        case .main: .main
        case .serial(let queue): queue
        case .storeContext: nil
        }
    }
}

/// Maps state to props off the store's context, deduplicated, delivered where the caller chooses
/// (Puredux's presenter with props prepared on a presentation queue).
///
/// When states arrive faster than props are made, the presenter skips to the latest state: it sees at most one
/// pending state at a time.
///
/// ```swift
/// let presenter = Presenter<AppState, TitleProps>(
///     removeStateDuplicates: .equal { $0.title },
///     props: { TitleProps(text: $0.title.uppercased()) },
///     deliverOn: .main
/// ) { props in label.text = props.text; return .active }
/// store.subscribe(presenter)
/// ```
public struct Presenter<State: Sendable, Props: Sendable>: Sendable {
    let presentation: PresentationQueue
    let deliveryQueue: DispatchQueue?
    let stateEquating: Equating<State>?
    let propsEquating: Equating<Props>?
    let makeProps: @Sendable (State) throws -> Props
    let body: @Sendable (Props) -> ObserverStatus
    let failed: (@Sendable (any Error) -> Void)?

    /// A presenter.
    ///
    /// - Parameters:
    ///   - presentation: where props are computed.
    ///   - removeStateDuplicates: skip states equal to the last one presented.
    ///   - removePropsDuplicates: skip props equal to the last ones delivered.
    ///   - props: the props function.
    ///   - deliverOn: where `body` runs; `nil` runs it where props are computed.
    ///   - failed: receives errors thrown by `props` (the presenter stays subscribed).
    ///   - body: receives props; returns `.dead` to unsubscribe.
    public init(
        presentation: PresentationQueue = .shared,
        removeStateDuplicates: Equating<State>? = nil,
        removePropsDuplicates: Equating<Props>? = nil,
        props: @escaping @Sendable (State) throws -> Props,
        deliverOn: DispatchQueue? = nil,
        failed: (@Sendable (any Error) -> Void)? = nil,
        _ body: @escaping @Sendable (Props) -> ObserverStatus
    ) {
        self.presentation = presentation
        self.deliveryQueue = deliverOn
        self.stateEquating = removeStateDuplicates
        self.propsEquating = removePropsDuplicates
        self.makeProps = props
        self.body = body
        self.failed = failed
    }

    /// The observer that feeds this presenter.
    func observer() -> Observer<State> {
        let pipeline = PresenterPipeline(self)
        return Observer(removeDuplicates: stateEquating) { state in pipeline.offer(state) }
    }
}

/// One subscribed presenter: coalesces states, makes props on the presentation queue, and hands them to an
/// `ObserverDelivery` of their own (deduplicated by props, delivered on the presenter's queue).
final class PresenterPipeline<State: Sendable, Props: Sendable>: Sendable {
    private struct Pending {
        var state: State?
        var scheduled = false
    }

    private let presenter: Presenter<State, Props>
    private let pending = Protected(Pending())
    private let delivery: ObserverDelivery<Props>

    init(_ presenter: Presenter<State, Props>) {
        self.presenter = presenter
        let body = presenter.body
        delivery = ObserverDelivery(Observer(on: presenter.deliveryQueue, removeDuplicates: presenter.propsEquating) { body($0) })
    }

    /// Called on the store's context with a new (deduplicated) state.
    func offer(_ state: State) -> ObserverStatus {
        guard let queue = presenter.presentation.queue else {
            present(state)
            return delivery.isDead ? .dead : .active
        }
        let schedule = pending.withLock { pending -> Bool in
            pending.state = state
            guard !pending.scheduled, !delivery.isDead else { return false }
            pending.scheduled = true
            return true
        }
        if schedule {
            queue.async { [self] in
                let latest = pending.withLock { pending -> State? in
                    pending.scheduled = false
                    defer { pending.state = nil }
                    return pending.state
                }
                if let latest { present(latest) }
            }
        }
        return delivery.isDead ? .dead : .active
    }

    /// Makes props on the presentation queue (one at a time) and offers them.
    private func present(_ state: State) {
        guard !delivery.isDead else { return }
        let props: Props
        do {
            props = try presenter.makeProps(state)
        } catch {
            presenter.failed?(error)
            return
        }
        delivery.offer(props) // (the body does not throw)
    }
}
