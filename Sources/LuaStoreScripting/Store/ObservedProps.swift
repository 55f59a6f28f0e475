import Dispatch
import LuaKit
import LuaStoreCore
import Observation

/// An app's props (or a child store's) as an `@Observable` model: views and `withObservationTracking` read
/// `value`, and hear of each new props — decoded as `Props` (`LuaValue` for them as they are), deduplicated as
/// every props observer is (equal props are not delivered again) — set on the queue the host names (`.main` by
/// default: the main actor's). Read it there. It observes for as long as it lives.
///
/// ```swift
/// let model = ObservedProps(store, as: CounterProps.self)   // updated on the main queue
/// withObservationTracking { render(model.value) } onChange: { scheduleRender() }
/// ```
@Observable
public final class ObservedProps<Props: Decodable & Sendable>: @unchecked Sendable {
    // (@unchecked: every property is written on the one queue named at init, where it is to be read.)

    /// The latest props; `nil` until the first arrive (at once, after the store's thread has run the props).
    public private(set) var value: Props?
    /// Why the latest props did not decode as `Props` (`value` keeps the last that did); `nil` when they did.
    public private(set) var failure: ScriptFailure?
    /// How many distinct props have arrived.
    public private(set) var updates = 0

    private init() {}

    /// Observes `store`'s props, set on `queue`.
    public convenience init(_ store: ScriptedStore, as type: Props.Type = Props.self, on queue: DispatchQueue = .main) {
        self.init()
        store.observeProps(on: queue) { [weak self] props in self?.receive(props) ?? .dead }
    }

    /// Observes a child store's props (`props(local, root)`), set on `queue`.
    public convenience init(_ child: ScriptedChildStore, as type: Props.Type = Props.self, on queue: DispatchQueue = .main) {
        self.init()
        child.observeProps(on: queue) { [weak self] props in self?.receive(props) ?? .dead }
    }

    private func receive(_ props: LuaValue) -> ObserverStatus {
        do throws(LuaError) {
            value = try LuaDecoder().decode(Props.self, from: props, root: "props")
            if failure != nil { failure = nil }
        } catch {
            failure = ScriptFailure(stage: .props, error: error)
        }
        updates += 1
        return .active
    }
}
