import Dispatch
import Synchronization


/// The machinery behind a root store: the action inbox, the drain loop on the store's serial context, the
/// subscription diff, observers and child stores.
///
/// `dispatch` may be called from any thread: it appends to the inbox (FIFO) and, if no drain is scheduled,
/// schedules one on the executor. The drain reduces queued actions one at a time (or hands runs of them to a
/// reducer that takes runs, `RunReducer`); an action dispatched while another is reduced or while
/// observers are notified joins the inbox and is reduced after, never recursively.
@usableFromInline
final class StoreEngine<R: Reducer>: Sendable {
    @usableFromInline typealias State = R.State
    @usableFromInline typealias Action = R.Action
    @usableFromInline typealias Effect = R.Effect
    typealias Child = any ChildNode<State, Action, Effect>

    /// Where a queued action came from, when not from outside: a child store it was dispatched to, or the
    /// effect that sent it (whose cancellation drops it).
    @usableFromInline
    struct Route: Sendable {
        @usableFromInline let origin: WeakChild<State, Action, Effect>?
        @usableFromInline let lease: EffectLease?
        /// Set for an action `send` dispatched.
        @usableFromInline var ticket: ActionTicket<Effect>? = nil

        @inlinable init(origin: WeakChild<State, Action, Effect>?, lease: EffectLease?, ticket: ActionTicket<Effect>? = nil) {
            self.origin = origin
            self.lease = lease
            self.ticket = ticket
        }
    }

    /// Queued actions, oldest first. The actions are an array of their own, not fields of envelopes: where the
    /// engine's code runs unspecialized, reading one field of a generic struct in an array copies the whole
    /// struct; and a run hands the reducer a slice of `actions` as it is. Dispatching
    /// from outside appends one action; the few that came from a child store or an effect also note their route.
    @usableFromInline
    struct Queue {
        @usableFromInline var actions: [Action] = []
        /// The actions that did not come from outside, by position in `actions`, in order.
        @usableFromInline var routed: [(position: Int, route: Route)] = []

        @inlinable init() {}

        @inlinable mutating func append(_ action: Action, origin: WeakChild<State, Action, Effect>?, lease: EffectLease?,
                                        ticket: ActionTicket<Effect>? = nil) {
            if origin != nil || lease != nil || ticket != nil {
                routed.append((actions.count, Route(origin: origin, lease: lease, ticket: ticket)))
            }
            actions.append(action)
        }

        /// Empties the queue (its actions go to `reclaimer`, if any, which may destroy them on a thread of its own).
        @inlinable mutating func removeAll(reclaimer: Reclaimer?) {
            if let reclaimer { reclaimer.removeAll(from: &actions) } else { actions.removeAll(keepingCapacity: true) }
            if !routed.isEmpty { routed.removeAll(keepingCapacity: true) }
        }
    }

    @usableFromInline
    struct Inbox {
        @usableFromInline var queue = Queue()
        @usableFromInline var draining = false
        @usableFromInline var stopped = false
        /// Additions to the inbox so far (how `waitUntilIdle` knows nothing came in while it looked elsewhere).
        @usableFromInline var additions: UInt64 = 0

        /// Takes every queued action, oldest first, by exchanging buffers (nothing is copied): `batch` must be
        /// empty, and its storage becomes the inbox's.
        @inlinable mutating func takeAll(into batch: inout Queue) {
            swap(&queue, &batch)
        }
    }

    /// What only the executor touches.
    @usableFromInline struct Confined {
        @usableFromInline var state: State
        @usableFromInline var running: [String: RunningEffect<Effect>] = [:]
        /// The command launched last of the kinds that run in turn (`EffectInterpreter.inTurn(_:)`): the next one
        /// waits for it.
        @usableFromInline var lastInTurn: Task<Void, Never>?
        @usableFromInline var changedSinceNotification = false
        /// Actions dispatched from outside the store (not by effects, not routed from a child) reduced so far.
        @usableFromInline var outsideReduced: UInt64 = 0
        /// The observers and child links as of `listsVersion` `copiedVersion` (taken again when it moves).
        @usableFromInline var observersCopy: [ObserverEntry<State>] = []
        @usableFromInline var childrenCopy: [WeakChild<State, Action, Effect>] = []
        @usableFromInline var copiedVersion = -1
        /// Tickets of actions reduced since the last notification: resolved once the observers were told.
        @usableFromInline var reducedTickets: [ActionTicket<Effect>] = []
    }

    @usableFromInline let reducer: R
    /// What a `RunReducer` adds (nil for any other reducer).
    @usableFromInline let runHooks: RunHooks<State, Action, Effect>?
    let effects: EffectInterpreter<Effect, State, Action>
    @usableFromInline let configuration: StoreConfiguration<State, Action>
    @usableFromInline let confined: ExecutorConfined<Confined>
    @usableFromInline let inbox = Protected(Inbox())
    private let observers = Protected<[ObserverEntry<State>]>([])
    private let children = Protected<[WeakChild<State, Action, Effect>]>([])
    /// Moves on whenever `observers` or `children` change: notifications keep copies of the lists and take them
    /// again only then (taking them under their locks on every notification looked up generic type metadata each
    /// time — a tenth of a busy store's time under `.everyAction`).
    @usableFromInline let listsVersion = Atomic<Int>(0)
    let commandsInFlight = InFlightEffects()
    let subscriptionsInFlight = InFlightEffects()

    init(initialState: State, reducer: R, runHooks: RunHooks<State, Action, Effect>? = nil,
         effects: EffectInterpreter<Effect, State, Action>, configuration: StoreConfiguration<State, Action>) {
        self.reducer = reducer
        self.runHooks = runHooks
        self.effects = effects
        self.configuration = configuration
        self.confined = ExecutorConfined(Confined(state: initialState))
        configuration.executor.execute { [self] in
            if reducer.declaresSubscriptions { diffSubscriptions(action: nil) }
        }
    }

    // MARK: Dispatch

    /// Dispatches an action from outside (not from a child store, not from an effect). Inlined into the module
    /// that dispatches, so it runs specialized there: generic code appending to the inbox looked up the array's
    /// type metadata on every call (about a hundred nanoseconds the dispatching thread paid).
    @inlinable
    func dispatch(_ action: Action) {
        enqueue { $0.actions.append(action) }
    }

    @usableFromInline
    func dispatch(_ action: Action, origin: WeakChild<State, Action, Effect>? = nil, lease: EffectLease? = nil) {
        enqueue { $0.append(action, origin: origin, lease: lease) }
    }

    /// Dispatches an action from outside with a ticket that hears its outcome (`RootStore.send`). It counts as
    /// a dispatch from outside, and is reduced in order with the others (on its own, not in a run). Inlined, as
    /// `dispatch(_:)` is, so that the drain it schedules is the one specialized for the reducer: compiled here, a
    /// store that only ever heard sends (`luastore serve`'s) ran the generic drain, looking up type metadata at
    /// every step.
    @inlinable
    func dispatch(_ action: Action, ticket: ActionTicket<Effect>) {
        enqueue { $0.append(action, origin: nil, lease: nil, ticket: ticket) }
    }

    /// Adds to the inbox with `append` and schedules a drain unless one is scheduled (nothing once stopped).
    @inlinable
    func enqueue(_ append: (inout Queue) -> Void) {
        let scheduleDrain = inbox.withLock { inbox -> Bool in
            guard !inbox.stopped else { return false }
            append(&inbox.queue)
            inbox.additions &+= 1
            guard !inbox.draining else { return false }
            inbox.draining = true
            return true
        }
        if scheduleDrain { configuration.executor.execute { [self] in drain() } }
    }

    /// Reduces what the inbox holds, run by run, and notifies, until it is empty. Inlinable, as the rest of the
    /// path an action takes (`processRun`, `process`, `notifyIfChanged`): the module whose reducer the store
    /// runs compiles it specialized for its types. Compiled
    /// here once for every reducer, each generic type it touched was a search of the runtime's metadata cache
    /// (≈ 30–50 ns each, dozens per drain): a Swift store, dispatched to from another module, paid ≈ 400 ns per
    /// action where it now pays ≈ 70 (docs/benchmarks.md). What runs rarely (failures, commands,
    /// subscriptions, observers joining) stays compiled here; tickets do not (each action `luastore serve` hears
    /// has one).
    @inlinable
    func drain() {
        var sinceNotification = 0
        let limit = configuration.notification.maximumActions
        // Everything queued is taken from the inbox at once (one lock per batch, not per action; the two buffers
        // trade places, so nothing is copied); actions dispatched meanwhile join the inbox behind the batch, so
        // the order stays first in, first out.
        var batch = Queue()
        let reclaimer = configuration.reclaimer
        let runs = runHooks != nil && configuration.interceptor == nil
        // A reducer that tells its observers within runs, at the policy's points, gets whole runs; the store
        // notifies after one that ended at a point (where the reducer may have stopped before telling them).
        let notifiesWithinRuns = runs && runHooks?.notifiesWithinRuns == true
        while true {
            batch.removeAll(reclaimer: reclaimer)
            let more = inbox.withLock { inbox -> Bool in
                inbox.takeAll(into: &batch)
                if batch.actions.isEmpty { inbox.draining = false }
                return !batch.actions.isEmpty
            }
            guard more else { break }
            var index = 0
            var nextRouted = 0 // in batch.routed
            let count = batch.actions.count
            while index < count {
                let routedAt = nextRouted < batch.routed.count ? batch.routed[nextRouted].position : count
                if index == routedAt {
                    process(batch.actions[index], route: batch.routed[nextRouted].route)
                    nextRouted += 1
                    index += 1
                    sinceNotification += 1
                } else if notifiesWithinRuns {
                    let applied = processRun(batch.actions[index..<routedAt], sinceNotification: sinceNotification)
                    index += applied
                    sinceNotification = (sinceNotification + applied) % limit
                    if sinceNotification == 0 { sinceNotification = limit }
                } else if runs {
                    // A run of actions from outside (up to the next routed one), no longer than the notification
                    // policy allows. Runs go to a reducer that asks for them, unless an interceptor must see each
                    // action before it is reduced.
                    let end = min(routedAt, index + (limit - sinceNotification))
                    let applied = processRun(batch.actions[index..<end])
                    index += applied
                    sinceNotification += applied
                } else {
                    process(batch.actions[index], route: Route(origin: nil, lease: nil))
                    index += 1
                    sinceNotification += 1
                }
                if sinceNotification >= limit {
                    notifyIfChanged()
                    sinceNotification = 0
                }
            }
        }
        notifyIfChanged()
    }

    /// Reduces a run of plain actions with one call of the reducer; returns how many it applied (≥ 1).
    /// `sinceNotification`: for a reducer that notifies within runs, how many actions were reduced since the
    /// last notification point.
    @inlinable
    func processRun(_ actions: ArraySlice<Action>, sinceNotification: Int = 0) -> Int {
        if actions.count == 1 {
            process(actions[actions.startIndex], route: Route(origin: nil, lease: nil))
            return 1
        }
        return processLongerRun(actions, sinceNotification: sinceNotification)
    }

    /// `processRun` for two actions or more. (Apart, so that a run of one, the usual run when observers see every
    /// action, stays small where it is inlined.)
    @inlinable @inline(never)
    func processLongerRun(_ actions: ArraySlice<Action>, sinceNotification: Int) -> Int {
        let first = actions.startIndex
        let outcome = runHooks!.reduceRun(&confined.value.state, actions, sinceNotification)
        let applied = min(outcome.applied, actions.count)
        guard applied > 0 else {
            process(actions[first], route: Route(origin: nil, lease: nil))
            return 1
        }
        if outcome.failures.count < applied { confined.value.changedSinceNotification = true }
        let before = confined.value.outsideReduced
        confined.value.outsideReduced += UInt64(applied)
        if !outcome.failures.isEmpty || !outcome.commands.isEmpty {
            reportAndLaunch(outcome, of: actions, outsideBefore: before)
        }
        if reducer.declaresSubscriptions { diffSubscriptions(action: actions[first + applied - 1]) }
        return applied
    }

    /// Reports a run's failures and launches its commands, in the order of their actions.
    @usableFromInline @inline(never)
    func reportAndLaunch(_ outcome: RunOutcome<Effect>, of actions: ArraySlice<Action>, outsideBefore before: UInt64) {
        let first = actions.startIndex
        var failures = outcome.failures[...]
        for (offset, commands) in outcome.commands {
            while let failure = failures.first, failure.offset < offset {
                report(.reducer, failure.error, action: actions[first + failure.offset], dispatchIndex: before + UInt64(failure.offset) + 1)
                failures = failures.dropFirst()
            }
            if !commands.isEmpty { launch(commands, action: actions[first + offset]) }
        }
        for failure in failures {
            report(.reducer, failure.error, action: actions[first + failure.offset], dispatchIndex: before + UInt64(failure.offset) + 1)
        }
    }

    @inlinable
    func process(_ action: Action, route: Route) {
        if let lease = route.lease, lease.isCancelled { return }
        if let interceptor = configuration.interceptor {
            interceptor(action, Dispatcher { [weak self] in self?.dispatch($0, origin: route.origin) })
        }
        let commands: [Effect]
        var dispatchIndex: UInt64?
        if route.origin == nil, route.lease == nil {
            confined.value.outsideReduced += 1
            dispatchIndex = confined.value.outsideReduced
        }
        do {
            if let runHooks {
                let source: ActionSource = route.origin != nil ? .child : route.lease?.source ?? route.ticket?.source ?? .outside
                commands = try runHooks.reduce(&confined.value.state, action, source)
            } else {
                commands = try reducer.reduce(into: &confined.value.state, action: action)
            }
        } catch {
            if let ticket = route.ticket { settle(ticket, .failed(error, dispatchIndex: dispatchIndex)) }
            report(.reducer, error, action: action, dispatchIndex: dispatchIndex)
            return
        }
        if let ticket = route.ticket { settle(ticket, .applied(commands: commands)) }
        confined.value.changedSinceNotification = true
        if !commands.isEmpty { launch(commands, action: action) }
        if let child = route.origin?.node {
            do {
                let childCommands = try child.reduceLocal(action)
                if !childCommands.isEmpty { launch(childCommands, action: action) }
            } catch {
                report(.reducer, error, action: action)
            }
        }
        if reducer.declaresSubscriptions { diffSubscriptions(action: action) }
    }

    // MARK: Observers

    func subscribe(_ observer: Observer<State>) {
        let entry = ObserverEntry(observer, report: reportObserverFailure)
        observers.withLock { $0.append(entry) }
        listsVersion.add(1, ordering: .releasing)
        configuration.executor.execute { [self] in
            entry.prime(confined.value.state)
            if entry.isDead { removeDead() }
        }
    }

    func attach(_ child: Child) -> WeakChild<State, Action, Effect> {
        let link = WeakChild(child)
        children.withLock { $0.append(link) }
        listsVersion.add(1, ordering: .releasing)
        configuration.executor.execute { [self] in child.rootChanged(confined.value.state) }
        return link
    }

    /// Tells `ticket` its action's outcome now; it resolves after the next notification.
    @inlinable
    func settle(_ ticket: ActionTicket<Effect>, _ outcome: SendOutcome<Effect>) {
        ticket.reduced(outcome)
        confined.value.reducedTickets.append(ticket)
    }

    @inlinable
    func notifyIfChanged() {
        if !confined.value.reducedTickets.isEmpty { resolveTickets() }
        guard confined.value.changedSinceNotification else { return }
        confined.value.changedSinceNotification = false
        let state = confined.value.state
        let version = listsVersion.load(ordering: .acquiring)
        if version != confined.value.copiedVersion { copyLists(version) }
        let entries = confined.value.observersCopy
        var anyDead = false
        for entry in entries where !entry.isDead {
            entry.notify(state)
            anyDead = anyDead || entry.isDead
        }
        if anyDead { removeDead() }
        let links = confined.value.childrenCopy
        var anyGone = false
        for link in links {
            if let node = link.node { node.rootChanged(state) } else { anyGone = true }
        }
        if anyGone { listsVersion.add(1, ordering: .releasing) } // (pruned at the next notification)
    }

    /// Notifies (if anything changed), then resolves the tickets of the actions reduced before it.
    @inlinable @inline(never)
    func resolveTickets() {
        let tickets = confined.value.reducedTickets
        confined.value.reducedTickets = []
        defer { for ticket in tickets { ticket.resolve() } }
        notifyIfChanged()
    }

    /// Takes copies of the observers and child links, as of `version`. (Apart from `notifyIfChanged`, which runs
    /// after every action or run, so that it does not look up the lists' generic types each time.)
    @inline(never)
    @usableFromInline
    func copyLists(_ version: Int) {
        confined.value.observersCopy = observers.withLock { $0 }
        confined.value.childrenCopy = children.withLock { links in
            links.removeAll { $0.node == nil }
            return links
        }
        confined.value.copiedVersion = version
    }

    @usableFromInline
    func removeDead() {
        observers.withLock { $0.removeAll(where: \.isDead) }
        listsVersion.add(1, ordering: .releasing)
    }

    /// Runs `body` on the executor and returns its result.
    func onExecutor<T: Sendable>(_ body: @escaping @Sendable (StoreEngine) -> T) async -> T {
        await withCheckedContinuation { continuation in
            configuration.executor.execute { [self] in continuation.resume(returning: body(self)) }
        }
    }

    /// The current state (read on the executor).
    func currentState() async -> State {
        await onExecutor { $0.confined.value.state }
    }

    // MARK: Failures

    @usableFromInline
    func report(_ stage: StoreFailure<State, Action>.Stage, _ error: any Error, action: Action?, dispatchIndex: UInt64? = nil) {
        configuration.errorReporter.report(StoreFailure(stage: stage, error: error, action: action, state: confined.value.state,
                                                        dispatchIndex: dispatchIndex))
    }

    private var reportObserverFailure: @Sendable (any Error) -> Void {
        { [weak self] error in
            guard let self else { return }
            configuration.errorReporter.report(StoreFailure(stage: .observer, error: error, action: nil, state: nil))
        }
    }
}

/// A value touched only on a store's serial executor. (Its accesses are not checked for exclusivity at run time:
/// one job at a time touches it, and an observer's delivery specialized in another module reads it per value.)
@usableFromInline
final class ExecutorConfined<Value> {
    @usableFromInline @exclusivity(unchecked) var value: Value
    @usableFromInline init(_ value: Value) { self.value = value }
}

// Every access happens on the owning store's serial executor, one job at a time.
extension ExecutorConfined: @unchecked Sendable {}
