/// One observer subscribed to a store: its delivery, primed with the state current when the subscription reached
/// the store's executor. Touched on that executor.
final class ObserverEntry<State: Sendable>: Sendable {
    private let delivery: ObserverDelivery<State>
    private let primed = ExecutorConfined(false)

    init(_ observer: Observer<State>) { delivery = ObserverDelivery(observer) }

    var isDead: Bool { delivery.isDead }

    /// Delivers the state current when the subscription reaches the store's executor; until then the
    /// observer hears nothing, so its first delivery is never stale and never doubled.
    func prime(_ state: State, report: @escaping @Sendable (any Error) -> Void) {
        guard !primed.value else { return }
        primed.value = true
        delivery.offer(state, report: report)
    }

    /// Delivers `state` to a primed observer unless it equals the last one delivered. On the store's executor.
    func notify(_ state: State, report: @escaping @Sendable (any Error) -> Void) {
        guard primed.value else { return }
        delivery.offer(state, report: report)
    }
}
