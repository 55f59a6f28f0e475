import Dispatch
import Synchronization

/// A root store's effects: commands launched after each reduction, subscriptions diffed against what runs, and the
/// effects in flight that `waitUntilIdle` and `shutdown` wait for or cancel.
extension StoreEngine {
    @usableFromInline
    func launch(_ commands: [Effect], action: Action?) {
        for command in commands {
            _ = start(command, key: nil, action: action)
        }
    }

    /// Starts an effect as a task; returns its handle.
    private func start(_ effect: Effect, key: String?, action: Action?) -> RunningEffect<Effect>? {
        guard let handler = effects.handler(for: effect.kind) else {
            report(.effect(effect.kind), UnhandledEffect(kind: effect.kind), action: action)
            return nil
        }
        let lease = EffectLease(source: .effect(effect.kind, subscription: key))
        let stateAtLaunch = confined.value.state
        let context = EffectContext<State, Action>(
            lease: lease,
            send: { [weak self] action, lease in self?.dispatch(action, lease: lease) },
            read: { [weak self] in await self?.currentState() ?? stateAtLaunch },
            subscriptionKey: key
        )
        let ledger = key == nil ? commandsInFlight : subscriptionsInFlight
        let token = ledger.begin()
        let inTurn = key == nil && effects.runsInTurn(effect.kind)
        let turn = inTurn ? confined.value.lastInTurn : nil // (launched in order, on the executor)
        let task = Task { [weak self] in
            defer { ledger.end(token) }
            await turn?.value
            do {
                try await handler(effect, context)
            } catch is CancellationError {
            } catch {
                guard !lease.isCancelled, let self else { return }
                // The state is read where it lives: on the store's executor.
                configuration.executor.execute { [self] in report(.effect(effect.kind), error, action: action) }
            }
        }
        if inTurn { confined.value.lastInTurn = task }
        let running = RunningEffect(effect: effect, lease: lease, task: task)
        ledger.attach(token, running, kind: effect.kind)
        return running
    }

    /// Launches what the state asks for and is not running, cancels what runs and is no longer asked for.
    @usableFromInline
    func diffSubscriptions(action: Action?) {
        let wanted: [String: Effect]
        do {
            wanted = try reducer.subscriptions(for: confined.value.state)
        } catch {
            report(.subscriptions, error, action: action)
            return
        }
        if wanted.isEmpty, confined.value.running.isEmpty { return }
        for (key, running) in confined.value.running where wanted[key] != running.effect {
            running.cancel()
            confined.value.running[key] = nil
        }
        for (key, effect) in wanted.sorted(by: { $0.key < $1.key }) where confined.value.running[key] == nil {
            confined.value.running[key] = start(effect, key: key, action: action)
        }
    }

    /// The keys and effects of the running subscriptions.
    func runningSubscriptions() async -> [String: Effect] {
        await onExecutor { engine in engine.confined.value.running.mapValues(\.effect) }
    }

    /// Waits until no action is queued, no command is in flight and no subscription of a kind in `finishing`
    /// is running, or `timeout` passes, or the calling task is cancelled; returns whether idle.
    func waitUntilIdle(timeout: Duration, finishing: Set<EffectKind> = []) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        /// Whether nothing waits in the inbox or is being reduced, and how many additions it has had.
        func inboxIdle() async -> (idle: Bool, additions: UInt64) {
            await onExecutor { engine in engine.inbox.withLock { ($0.queue.actions.isEmpty && !$0.draining, $0.additions) } }
        }
        while true {
            // Idle when the inbox is, then no effect is in flight, then the inbox still is and had nothing added
            // in between: an effect dispatches its result before it leaves the in-flight set, and effects are
            // launched only while actions are reduced — so whatever finished while the effects were counted has
            // been reduced, and nothing launched since. (Looking once at each, an effect that dispatched and
            // finished between the two looks left its result unreduced.)
            let before = await inboxIdle()
            if before.idle, commandsInFlight.count == 0, subscriptionsInFlight.count(of: finishing) == 0 {
                let after = await inboxIdle()
                if after.idle, after.additions == before.additions { return true }
            }
            guard clock.now < deadline else { return false }
            do { try await Task.sleep(for: .milliseconds(2)) } catch { return false }
        }
    }

    /// Diffs the subscriptions against what the state asks for now, on the executor (for a state that changed
    /// without an action: time travel going on from a past point).
    func refreshSubscriptions() {
        configuration.executor.execute { [self] in
            if reducer.declaresSubscriptions { diffSubscriptions(action: nil) }
        }
    }

    /// `RootStore.reinstate(_:)`, on the executor. The actions from outside were counted when the reducer set
    /// them aside, and nothing from outside has been counted since (it set aside every one), so taking them off
    /// the count and counting them again gives each its number back.
    func reinstate(_ held: [(action: Action, source: ActionSource)], diffingSubscriptions: Bool) {
        if diffingSubscriptions, reducer.declaresSubscriptions { diffSubscriptions(action: nil) }
        let counted = UInt64(held.count { $0.source.isOutside })
        confined.value.outsideReduced -= min(counted, confined.value.outsideReduced)
        for (action, source) in held {
            // (An action from a child store goes to the root only: which child sent it is not kept.)
            switch source {
            case .outside: process(action, route: Route(origin: nil, lease: nil))
            case .client: process(action, route: Route(origin: nil, lease: nil, ticket: ActionTicket(source: source, onResolved: { _ in })))
            case .child, .effect: process(action, route: Route(origin: nil, lease: EffectLease(source: source)))
            }
        }
        notifyIfChanged()
    }

    /// Stops taking actions; cancels every subscription and command.
    func shutdown() {
        inbox.withLock { $0.stopped = true }
        commandsInFlight.cancelAll()
        subscriptionsInFlight.cancelAll()
    }
}

/// A running effect: its lease (cancel stops its results) and its task (cancel stops its work).
@usableFromInline
struct RunningEffect<Effect: StoreEffect>: Sendable {
    let effect: Effect
    let lease: EffectLease
    let task: Task<Void, Never>

    func cancel() {
        lease.cancel()
        task.cancel()
    }
}

/// Effects whose tasks have not finished, so a store can wait for them or cancel them all.
final class InFlightEffects: Sendable {
    private struct Entries {
        var next = 0
        var running: [Int: (lease: EffectLease, task: Task<Void, Never>)?] = [:]
        var kinds: [Int: EffectKind] = [:]
    }

    private let entries = Protected(Entries())

    var count: Int { entries.withLock { $0.running.count } }

    /// How many of the running effects are of one of `kinds`.
    func count(of kinds: Set<EffectKind>) -> Int {
        guard !kinds.isEmpty else { return 0 }
        return entries.withLock { entries in entries.kinds.values.filter(kinds.contains).count }
    }

    func begin() -> Int {
        entries.withLock { entries in
            entries.next += 1
            entries.running[entries.next] = .some(nil)
            return entries.next
        }
    }

    func attach(_ token: Int, _ effect: RunningEffect<some StoreEffect>, kind: EffectKind) {
        entries.withLock { entries in
            if entries.running[token] != nil {
                entries.running[token] = (effect.lease, effect.task)
                entries.kinds[token] = kind
            }
        }
    }

    func end(_ token: Int) {
        entries.withLock { entries in
            entries.running.removeValue(forKey: token)
            entries.kinds.removeValue(forKey: token)
        }
    }

    func cancelAll() {
        let all = entries.withLock { $0.running.values.compactMap { $0 } }
        for (lease, task) in all {
            lease.cancel()
            task.cancel()
        }
    }
}
