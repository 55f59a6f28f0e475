import CoreMetrics
import Foundation
import Prometheus

/// What a server counts (swift-metrics, kept in a Prometheus registry of its own), shown at `GET /metrics` in
/// Prometheus' text format: live stores, hibernations and resumes, keys refused for room, live connections, actions by outcome, and how
/// long an action took from its arrival to its answer.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let liveStores: Meter
    private let connections: Meter
    private let hibernations: CoreMetrics.Counter
    private let resumes: CoreMetrics.Counter
    private let refusedKeys: CoreMetrics.Counter
    private let outcomes: [ActionOutcome.Kind: CoreMetrics.Counter]
    private let dispatch: CoreMetrics.Timer

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["luastore_action_seconds"] = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1),
        ]
        liveStores = Meter(label: "luastore_live_stores", dimensions: [], factory: factory)
        connections = Meter(label: "luastore_live_connections", dimensions: [], factory: factory)
        hibernations = CoreMetrics.Counter(label: "luastore_hibernations_total", dimensions: [], factory: factory)
        resumes = CoreMetrics.Counter(label: "luastore_resumes_total", dimensions: [], factory: factory)
        refusedKeys = CoreMetrics.Counter(label: "luastore_keys_refused_total", dimensions: [], factory: factory)
        var outcomes: [ActionOutcome.Kind: CoreMetrics.Counter] = [:]
        for kind in [ActionOutcome.Kind.applied, .failed, .refused] {
            outcomes[kind] = CoreMetrics.Counter(label: "luastore_actions_total", dimensions: [("outcome", kind.rawValue)], factory: factory)
        }
        self.outcomes = outcomes
        dispatch = CoreMetrics.Timer(label: "luastore_action_seconds", dimensions: [], factory: factory)
    }

    func action(_ outcome: ActionOutcome, since start: ContinuousClock.Instant) {
        guard !outcome.repeated else { return }
        outcomes[outcome.kind]?.increment()
        if outcome.kind != .refused { dispatch.recordInterval(since: start) }
    }

    func stores(live count: Int) { liveStores.set(count) }
    func hibernated() { hibernations.increment() }
    func resumed() { resumes.increment() }
    /// A key not opened: every live store was in use (`ServerLimits.liveStores`).
    func refusedForRoom() { refusedKeys.increment() }
    func connected() { connections.increment() }
    func disconnected() { connections.decrement() }

    /// The registry in Prometheus' text format.
    func text() -> String {
        var bytes: [UInt8] = []
        registry.emit(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension CoreMetrics.Timer {
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}
