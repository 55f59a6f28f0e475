/// One observer subscribed to a store: its delivery, primed with the state current when the subscription reached
/// the store's executor. Touched on that executor.
@usableFromInline
final class ObserverEntry<State: Sendable>: Sendable {
    private let delivery: ObserverDelivery<State>
    private let primed = ExecutorConfined(false)

    /// An entry for `observer`; `report` hears what its body throws.
    init(_ observer: Observer<State>, report: @escaping @Sendable (any Error) -> Void) {
        delivery = ObserverDelivery(observer, report: report)
    }

    @usableFromInline var isDead: Bool { delivery.isDead }

    /// Delivers the state current when the subscription reaches the store's executor; until then the
    /// observer hears nothing, so its first delivery is never stale and never doubled.
    func prime(_ state: State) {
        guard !primed.value else { return }
        primed.value = true
        delivery.offer(state)
    }

    /// Delivers `state` to a primed observer unless it equals the last one delivered. On the store's executor.
    @usableFromInline func notify(_ state: State) {
        guard primed.value else { return }
        delivery.offer(state)
    }
}
