import Foundation
import LuaKit
import LuaStoreCluster
import LuaStoreConcurrency
import LuaStoreDevtools
import LuaStorePersistence
import LuaStoreScripting

/// What became of one action sent to a key, as the server answers it (`outcome` of the live protocol).
public struct ActionOutcome: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// Reduced: the state is the one after it (`seq` is its journal entry).
        case applied
        /// The reducer (or its commands) failed: the state is as it was; `error` says why, with the script's line.
        case failed
        /// Never given to the store: not an action, over a limit, or the store stopped; `error` says which.
        case refused
    }

    public var kind: Kind
    public var seq: UInt64?
    public var error: String?
    /// Whether this is the remembered answer to an id sent before (the action was not applied again).
    public var repeated = false

    public static func refused(_ why: String) -> ActionOutcome { ActionOutcome(kind: .refused, seq: nil, error: why) }

    /// The outcome as the live protocol's JSON object: `{"id":…,"seq":N,"outcome":"applied"}`.
    public func json(id: String?) -> String {
        var fields: [String] = []
        if let id { fields.append("\"id\":\(Wire.quote(id))") }
        if let seq { fields.append("\"seq\":\(seq)") }
        fields.append("\"outcome\":\"\(kind.rawValue)\"")
        if let error { fields.append("\"error\":\(Wire.quote(error))") }
        if repeated { fields.append("\"repeated\":true") }
        return "{" + fields.joined(separator: ",") + "}"
    }
}

/// One key's store while it is live: the scripted store on its durable file, the props changes kept for
/// clients that reconnect, the ids of the actions it answered, and its live clients.
///
/// Every action a client sends goes through `send(_:id:)`; the props the store's observer is handed are numbered
/// (`seq`: the key's journal sequence of the last entry they show, never less than one more than the last
/// number given) and handed to every live client in order.
actor HostedStore {
    let key: String
    private let store: ScriptedStore
    private let database: KeyJournal
    private let limits: ServerLimits
    /// The last journal entry's sequence (the store's thread writes it).
    private let journaled: Protected<UInt64>
    /// Props the observer was handed, as JSON text, not yet numbered (the store's thread appends).
    private let pending: Protected<Handed<String>>
    /// Outcomes the store's thread resolved, not yet answered (the store's thread appends).
    private let resolved = Protected(Handed<Resolved>())
    private var current: (seq: UInt64, props: String)?
    private var changes: [(seq: UInt64, message: String)] = []
    private var clients: [Int: AsyncStream<LiveEvent>.Continuation] = [:]
    private var nextClient = 0
    private var answered: [String: ActionOutcome] = [:]
    private var answeredOrder: [String] = []
    private var answeredStart = 0
    private var waitingForId: [String: [PendingOutcome]] = [:]
    private var inFlight = 0
    private var rate: TokenBucket
    private(set) var lastUsed = ContinuousClock.now
    /// When it was opened (a lease renewed before that did not know it).
    let opened = ContinuousClock.now
    /// Whether it resumed what its journal held (rather than starting from `init`).
    nonisolated var resumed: Bool { database.persistence.resumed != nil }
    private var closed = false
    /// What the devtools keep of the store's journal (`serve --devtools`), and their server once asked for.
    private let devtoolsJournal: DevtoolsJournal?
    private var devtools: DevtoolsServer?

    private init(key: String, store: ScriptedStore, database: KeyJournal, limits: ServerLimits,
                 journaled: Protected<UInt64>, pending: Protected<Handed<String>>, devtoolsJournal: DevtoolsJournal?) {
        self.key = key
        self.devtoolsJournal = devtoolsJournal
        self.store = store
        self.database = database
        self.limits = limits
        self.journaled = journaled
        self.pending = pending
        rate = TokenBucket(perSecond: limits.actionsPerKeyPerSecond)
    }

    /// Opens `key`'s store: resumed from `KEY.db` in the data folder, or made by the app's `init` when new.
    static func open(key: String, options: ServerOptions, log: @escaping @Sendable (String) -> Void) async throws(ServeFailure) -> HostedStore {
        let database = try await KeyJournal.open(key: key, options: options)
        let journaled = Protected(database.persistence.resumed?.sequence ?? 0)
        let pending = Protected(Handed<String>())
        var storeOptions = options.store
        storeOptions.persistence = database.persistence
        storeOptions.threads = options.threads
        storeOptions.notification = .everyAction
        storeOptions.rememberedClientActions = options.limits.rememberedIds
        let devtoolsJournal = options.devtools.map { DevtoolsJournal(capacity: $0.keep, bytes: $0.keepBytes) }
        if let devtoolsJournal, let settings = options.devtools {
            storeOptions.historyEntries = settings.keep
            storeOptions.subscriptionsChanged = { change in devtoolsJournal.hear(change) }
        }
        let heard = storeOptions.journal
        storeOptions.journal = { entry in
            journaled.withLock { $0 = max($0, entry.sequence) }
            devtoolsJournal?.hear(entry)
            heard?(entry)
        }
        let reported = storeOptions.failures
        storeOptions.failures = { failure in
            // (An action's failure is its sender's answer; the rest are the server's log.)
            if failure.stage != .reduce { log("key \(key): \(failure.stage.rawValue) failed: \(failure.error)") }
            reported(failure)
        }
        let store: ScriptedStore
        do {
            store = try await ScriptedStore(app: options.app, options: storeOptions)
        } catch {
            _ = await database.close()
            throw ServeFailure("the store of key \(key) cannot start: \(error.error) (\(error.stage.rawValue))")
        }
        let hosted = HostedStore(key: key, store: store, database: database, limits: options.limits,
                                 journaled: journaled, pending: pending, devtoolsJournal: devtoolsJournal)
        await hosted.readAnswered()
        store.observeProps { [weak hosted] props in
            let text = (try? LuaJSON.encode(props, root: "props")) ?? "null"
            if pending.withLock({ $0.append(text) }), let hosted { Task { await hosted.numberPending() } }
            return .active
        }
        await store.barrier()
        await hosted.numberPending()
        return hosted
    }

    /// The address of the store's devtools page (with its token), started the first time it is asked for.
    func devtools(_ settings: DevtoolsSettings) async throws(ServeFailure) -> String {
        if let devtools { return devtools.url }
        guard let devtoolsJournal, !closed else { throw ServeFailure("the devtools of key \(key) are not kept") }
        var options = DevtoolsOptions()
        options.host = settings.host
        options.port = 0
        options.app = key
        do {
            let started = try await DevtoolsServer.start(store: store, journal: devtoolsJournal, options: options)
            if let devtools { // (asked for twice at once: the first one stays)
                await started.stop()
                return devtools.url
            }
            devtools = started
            return started.url
        } catch {
            throw ServeFailure("the devtools of key \(key) cannot start: \(error)")
        }
    }

    /// Installs the app's version in `folder` (`ScriptedStore.install(folder:)`: checked, loaded, migrated, swapped
    /// in whole); nil, or why the store keeps the version it runs.
    func install(folder: URL) async -> ScriptFailure? {
        do {
            _ = try await store.install(folder: folder)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Actions

    /// Sends `action` and waits for its outcome (`begin`).
    func send(_ action: LuaValue, id: String?) async -> ActionOutcome {
        await begin(action, id: id).outcome
    }

    /// Puts `action` in line now — in the order of the calls, so a connection's actions are reduced in the order
    /// they came however many it keeps in flight — and returns its outcome to come. An id, when given, is
    /// remembered: a resent id is answered with its first outcome (marked `repeated`), never applied twice, even
    /// while the first is still in flight.
    func begin(_ action: LuaValue, id: String?) -> PendingOutcome {
        lastUsed = .now
        if let id {
            if var known = answered[id] {
                known.repeated = true
                return PendingOutcome(known)
            }
            if waitingForId[id] != nil { // (the same id, sent again while the first is in flight)
                let repeated = PendingOutcome()
                waitingForId[id, default: []].append(repeated)
                return repeated
            }
        }
        guard !closed else { return PendingOutcome(.refused("the store of key \(key) is closing; send it again")) }
        guard case .table = action, action["type"].string != nil else {
            return PendingOutcome(.refused("an action is a JSON object with a string \"type\""))
        }
        guard rate.take() else {
            return PendingOutcome(.refused("rate limit: key \(key) takes \(limits.actionsPerKeyPerSecond) actions a second"))
        }
        if let id { waitingForId[id] = [] }
        inFlight += 1
        let pending = PendingOutcome()
        let journaled = self.journaled, resolved = self.resolved
        store.submit(action, id: id) { result in
            // (On the store's thread: a failed action's sequence is the last entry journaled when it failed.)
            let seq = journaled.withLock { $0 }
            if resolved.withLock({ $0.append(Resolved(result: result, failedAt: seq, id: id, pending: pending)) }) {
                Task { await self.answerResolved() }
            }
        }
        return pending
    }

    /// Answers the outcomes the store resolved, in order (one task for however many came meanwhile).
    private func answerResolved() {
        for done in resolved.withLock({ $0.take() }) {
            finish(done.result, failedAt: done.failedAt, id: done.id, pending: done.pending)
        }
    }

    private func finish(_ result: SendResult, failedAt seq: UInt64, id: String?, pending: PendingOutcome) {
        inFlight -= 1
        lastUsed = .now
        numberPending()
        let outcome: ActionOutcome
        switch result {
        case .applied(let entry):
            outcome = ActionOutcome(kind: .applied, seq: entry.sequence, error: nil)
        case .failed(let failure):
            outcome = ActionOutcome(kind: .failed, seq: seq, error: ClientAction.failureText(failure.error))
        case .held:
            outcome = .refused("the store of key \(key) stands at a past entry; the action is held")
        case .dropped:
            outcome = .refused("the store of key \(key) stopped before the action was reduced; send it again")
        }
        if let id {
            remember(outcome, for: id)
            var repeated = outcome
            repeated.repeated = true
            for waiter in waitingForId.removeValue(forKey: id) ?? [] { waiter.resolve(repeated) }
        }
        pending.resolve(outcome)
    }

    private func remember(_ outcome: ActionOutcome, for id: String) {
        guard outcome.kind != .refused else { return } // (refused: nothing happened; sending it again may work)
        answered[id] = outcome
        answeredOrder.append(id)
        if answeredOrder.count - answeredStart > limits.rememberedIds {
            answered[answeredOrder[answeredStart]] = nil
            answeredStart += 1
            if answeredStart > 4_096 {
                answeredOrder.removeFirst(answeredStart)
                answeredStart = 0
            }
        }
    }

    /// The ids the journal remembers (a durable store's, across hibernation, restarts and crashes).
    private func readAnswered() async {
        for action in await store.recentClientActions() {
            remember(ActionOutcome(kind: action.failure == nil ? .applied : .failed, seq: action.sequence, error: action.failure), for: action.id)
        }
    }

    // MARK: Props

    /// Numbers the props the observer was handed and tells every live client, in order.
    func numberPending() {
        let texts = pending.withLock { $0.take() }
        guard !texts.isEmpty else { return }
        let last = journaled.withLock { $0 }
        for text in texts {
            if let current, current.props == text { continue }
            let seq = max(last, (current?.seq ?? 0) + (current == nil ? 0 : 1))
            current = (seq, text)
            let message = "{\"seq\":\(seq),\"props\":\(text)}"
            changes.append((seq, message))
            if changes.count > limits.keptChanges { changes.removeFirst(changes.count - limits.keptChanges) }
            for (id, client) in clients {
                if case .dropped = client.yield(.message(message)) { // (fell behind: it reconnects with ?since=)
                    client.yield(.end(.fellBehind))
                    client.finish()
                    clients[id] = nil
                }
            }
        }
    }

    /// The props now, as the live protocol's snapshot message.
    func snapshotMessage() -> String {
        guard let current else { return "{\"seq\":0,\"props\":null,\"snapshot\":true}" }
        return "{\"seq\":\(current.seq),\"props\":\(current.props),\"snapshot\":true}"
    }

    func propsText() -> String? { current?.props }

    func stateText() async throws(ServeFailure) -> String {
        lastUsed = .now
        do {
            return try LuaJSON.encode(try await store.state(), root: "state")
        } catch {
            throw ServeFailure("the state of key \(key) cannot be read: \(error)")
        }
    }

    /// A live client: what it missed since `since` (every change after it, or a snapshot when those are gone or
    /// it gave none), then each change as it comes. Ends when the client ends (`leave`) or falls behind.
    func join(since: UInt64?) -> (id: Int, first: [String], changes: AsyncStream<LiveEvent>) {
        lastUsed = .now
        // (One slot more than the changes kept: the last is the end's.)
        let (stream, continuation) = AsyncStream.makeStream(of: LiveEvent.self, bufferingPolicy: .bufferingOldest(limits.keptChanges + 1))
        let id = nextClient
        nextClient += 1
        clients[id] = continuation
        var first: [String]
        if let since, let current, since <= current.seq,
           since == current.seq || changes.first.map({ $0.seq <= since + 1 }) == true {
            first = changes.filter { $0.seq > since }.map(\.message)
        } else {
            first = [snapshotMessage()]
        }
        if closed {
            continuation.yield(.end(.goingAway))
            continuation.finish()
        }
        return (id, first, stream)
    }

    /// Ends every live client, telling it why.
    func endClients(_ reason: LiveEvent.End) {
        for client in clients.values {
            client.yield(.end(reason))
            client.finish()
        }
        clients.removeAll()
    }

    func leave(_ id: Int) {
        clients.removeValue(forKey: id)?.finish()
        lastUsed = .now
    }

    // MARK: Life

    /// Whether nothing uses the store and nothing has for `idle`.
    func isIdle(_ idle: Duration) -> Bool {
        inFlight == 0 && clients.isEmpty && waitingForId.isEmpty && ContinuousClock.now - lastUsed >= idle
    }

    var clientCount: Int { clients.count }

    /// Stops the store, writes what is queued and lets its file go; live clients are ended.
    func close() async -> PersistenceFailure? {
        closed = true
        endClients(.goingAway)
        if let devtools {
            self.devtools = nil
            await devtools.stop()
        }
        _ = await store.waitUntilIdle(timeout: .seconds(5))
        store.shutdown()
        await store.barrier()
        return await database.close()
    }
}

/// What the store's thread hands a hosted store, kept until the store's task takes it: `append` says whether a
/// task must be started to take it (none is on its way), so a burst costs one task, not one per item.
struct Handed<Item: Sendable>: Sendable {
    private var items: [Item] = []
    private var scheduled = false

    /// Keeps `item`; true when no task is on its way to take it.
    mutating func append(_ item: Item) -> Bool {
        items.append(item)
        defer { scheduled = true }
        return !scheduled
    }

    mutating func take() -> [Item] {
        scheduled = false
        defer { items.removeAll(keepingCapacity: true) }
        return items
    }
}

/// An action the store resolved: what became of it, for `HostedStore.finish`.
struct Resolved: Sendable {
    let result: SendResult
    let failedAt: UInt64
    let id: String?
    let pending: PendingOutcome
}

/// An action's outcome to come (`HostedStore.begin`): resolved once, awaited by one waiter.
final class PendingOutcome: Sendable {
    private let state: Protected<(outcome: ActionOutcome?, waiter: CheckedContinuation<ActionOutcome, Never>?)>

    init(_ outcome: ActionOutcome? = nil) {
        state = Protected((outcome, nil))
    }

    func resolve(_ outcome: ActionOutcome) {
        let waiter = state.withLock { state in
            defer { state = (outcome, nil) }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    /// Whether it is known already.
    var isResolved: Bool { state.withLock { $0.outcome != nil } }

    var outcome: ActionOutcome {
        get async {
            await withCheckedContinuation { continuation in
                let known = state.withLock { state -> ActionOutcome? in
                    if state.outcome == nil { state.waiter = continuation }
                    return state.outcome
                }
                if let known { continuation.resume(returning: known) }
            }
        }
    }
}

/// Where one key's journal is kept: its SQLite file (`DATA/KEY.db`), or — with a cluster — PostgreSQL, under the
/// key's lease, which closing lets go.
enum KeyJournal: Sendable {
    case file(StoreDatabase)
    case cluster(PostgresJournal, ClusterDatabase)

    var persistence: any StatePersistence {
        switch self {
        case .file(let database): database
        case .cluster(let journal, _): journal
        }
    }

    static func open(key: String, options: ServerOptions) async throws(ServeFailure) -> KeyJournal {
        guard let cluster = options.cluster else {
            let path = options.dataFolder.appendingPathComponent(key + ".db").path
            do {
                return .file(try StoreDatabase(path: path, app: options.app.lastPathComponent, durability: options.durability,
                                               snapshotInterval: options.snapshotInterval))
            } catch {
                throw ServeFailure("the store of key \(key) cannot be opened: \(error)")
            }
        }
        let opened = await Blocking.run { () -> Result<KeyJournal, ServeFailure> in
            let epoch: Int64
            do {
                switch try cluster.acquire(key) {
                case .taken(let taken): epoch = taken
                case .heldBy(let holder): return .failure(ServeFailure(heldBy: holder, key: key))
                }
            } catch {
                return .failure(ServeFailure("the lease of key \(key) cannot be taken: \(error)"))
            }
            do {
                return .success(.cluster(try PostgresJournal(database: cluster, key: key, epoch: epoch, durability: options.durability,
                                                             snapshotInterval: options.snapshotInterval), cluster))
            } catch {
                cluster.release(key, epoch: epoch)
                return .failure(ServeFailure("the store of key \(key) cannot be opened: \(error)"))
            }
        }
        return try opened.get()
    }

    /// Writes what is queued and lets the file (or the lease) go.
    func close() async -> PersistenceFailure? {
        switch self {
        case .file(let database):
            return database.close()
        case .cluster(let journal, let cluster):
            return await Blocking.run {
                let failure = journal.close()
                if failure == nil { cluster.release(journal.key, epoch: journal.epoch) }
                return failure
            }
        }
    }
}

/// Runs blocking work (the cluster's database calls) on a thread of its own, off Swift's cooperative pool.
public enum Blocking {
    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: body()) }
        }
    }
}

/// What a live client's writer is handed: a message, or the end of the connection and why.
enum LiveEvent: Sendable {
    enum End: Sendable {
        /// The server is shutting down, or the store closing: reconnect (with `?since=`).
        case goingAway
        /// More changes came than the client read: reconnect with `?since=` to catch up.
        case fellBehind
    }

    case message(String)
    case end(End)
}

/// A failure of the server's own (a store that cannot open, a bad request), in words for the client.
public struct ServeFailure: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// The node that holds the key, when that is why (a cluster): its clients go there.
    public var holder: ClusterDatabase.Holder?
    public init(_ description: String) { self.description = description }

    init(heldBy holder: ClusterDatabase.Holder, key: String) {
        description = "key \(key) is served by node \(holder.node)" + (holder.address.map { " at \($0)" } ?? "")
        self.holder = holder
    }
}

/// A token bucket: `perSecond` tokens a second, at most `perSecond` saved.
struct TokenBucket: Sendable {
    let perSecond: Double
    private var tokens: Double
    private var refilled = ContinuousClock.now

    init(perSecond: Int) {
        self.perSecond = Double(max(1, perSecond))
        tokens = self.perSecond
    }

    mutating func take() -> Bool {
        let now = ContinuousClock.now
        let elapsed = now - refilled
        refilled = now
        tokens = min(perSecond, tokens + perSecond * (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// JSON text pieces of the live protocol.
enum Wire {
    static func quote(_ text: String) -> String {
        (try? LuaJSON.encode(.string(text), root: "text")) ?? "\"\""
    }
}
