import Synchronization

/// One subscribed observer: its deduplication memory (touched on the store's executor) and whether it is dead.
final class ObserverEntry<State: Sendable>: Sendable {
    let observer: Observer<State>
    private let last: ExecutorConfined<State?> = ExecutorConfined(nil)
    private let primed = ExecutorConfined(false)
    private let dead = Atomic<Bool>(false)

    init(_ observer: Observer<State>) { self.observer = observer }

    var isDead: Bool { dead.load(ordering: .acquiring) }

    /// Delivers the state current when the subscription reaches the store's executor; until then the
    /// observer hears nothing, so its first delivery is never stale and never doubled.
    func prime(_ state: State, report: @escaping @Sendable (any Error) -> Void) {
        guard !primed.value else { return }
        primed.value = true
        offer(state, report: report)
    }

    /// Delivers `state` to a primed observer unless it equals the last one delivered. On the store's executor.
    func notify(_ state: State, report: @escaping @Sendable (any Error) -> Void) {
        guard primed.value else { return }
        offer(state, report: report)
    }

    private func offer(_ state: State, report: @escaping @Sendable (any Error) -> Void) {
        if observer.equating != nil, isRepeat(state) { return }
        if let queue = observer.deliveryQueue {
            queue.async { [self] in deliver(state, report: report) }
        } else {
            deliver(state, report: report)
        }
    }

    /// Whether `state` equals the last one offered (by the observer's `equating`); remembers it if not. (Apart,
    /// so that observers without one do not look up the type of the memory on every notification.)
    @inline(never)
    private func isRepeat(_ state: State) -> Bool {
        guard let equating = observer.equating else { return false }
        if let previous = last.value, equating.isEqual(previous, state) { return true }
        last.value = state
        return false
    }

    private func deliver(_ state: State, report: @Sendable (any Error) -> Void) {
        guard !isDead else { return }
        do {
            if try observer.body(state) == .dead { dead.store(true, ordering: .releasing) }
        } catch {
            report(error)
        }
    }
}
