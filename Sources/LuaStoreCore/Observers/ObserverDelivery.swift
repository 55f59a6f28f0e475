import Dispatch
import Synchronization

/// How an observer is told — the one answer for every observer: a store's observers, a presenter's props, and
/// any other value a store derives for its observers are each delivered by one.
///
/// It skips a value equal to the last one it was offered (by the observer's `Equating`; every value when it has
/// none), runs the observer's body on the observer's queue (or right where the value was offered), and stops for
/// good once the body answers `.dead`. A body that throws stays subscribed; its error goes to `report`.
///
/// Offer values from one serial context at a time (a store's executor, a presentation queue): the
/// deduplication memory belongs to that context.
///
/// ```swift
/// let delivery = ObserverDelivery(Observer<Int>(removeDuplicates: .asEquatable) { print($0); return .active })
/// delivery.offer(1)   // prints 1
/// delivery.offer(1)   // skipped: equal to the last
/// ```
public final class ObserverDelivery<Value: Sendable>: Sendable {
    @usableFromInline let observer: Observer<Value>
    @usableFromInline let last: ExecutorConfined<Value?> = ExecutorConfined(nil)
    @usableFromInline let dead = Atomic<Bool>(false)
    @usableFromInline let report: @Sendable (any Error) -> Void
    @usableFromInline let ended: (@Sendable () -> Void)?

    /// A delivery to `observer`; `report` hears what its body throws; `ended` runs once, where the body ran, when
    /// the body answers `.dead`.
    public init(_ observer: Observer<Value>, report: @escaping @Sendable (any Error) -> Void = { _ in },
                ended: (@Sendable () -> Void)? = nil) {
        self.observer = observer
        self.report = report
        self.ended = ended
    }

    /// Whether the observer answered `.dead` (nothing is delivered to it any more).
    @inlinable
    public var isDead: Bool { dead.load(ordering: .acquiring) }

    /// Delivers `value` unless it equals the last one offered (by the observer's equating), on the observer's
    /// queue or right here. (Inlinable, so that a module offering values of one type compares and keeps them in
    /// code specialized for it: generic code across the module boundary
    /// cost a metadata lookup and a value-witness call per value.)
    @inlinable
    public func offer(_ value: Value) {
        if observer.equating != nil, isRepeat(value) { return }
        if let queue = observer.deliveryQueue {
            queue.async { [self] in deliver(value) }
        } else {
            deliver(value)
        }
    }

    /// Whether `value` equals the last one offered (by the observer's `equating`); remembers it if not. (Apart,
    /// so that observers without one do not look up the type of the memory on every notification.)
    @inlinable @inline(never)
    func isRepeat(_ value: Value) -> Bool {
        guard let equating = observer.equating else { return false }
        if let previous = last.value, equating.isEqual(previous, value) { return true }
        last.value = value
        return false
    }

    @inlinable
    func deliver(_ value: Value) {
        guard !isDead else { return }
        do {
            guard try observer.body(value) == .dead, !dead.exchange(true, ordering: .acquiringAndReleasing) else { return }
            ended?()
        } catch {
            report(error)
        }
    }
}
