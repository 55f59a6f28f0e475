import Foundation
import LuaKit
import LuaStoreCluster
import LuaStoreConcurrency
import LuaStoreDevtools
import LuaStorePersistence
import LuaStoreScripting
import NIOCore

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

    /// The outcome as the live protocol's JSON object: `{"id":…,"seq":N,"outcome":"applied"}`. (Written in one
    /// string as it goes: every action's answer is one.)
    public func json(id: String?) -> String {
        var json = JSONWriter()
        json.object { json in
            if let id { json.field("id", id) }
            if let seq { json.field("seq", seq) }
            json.field("outcome", kind.rawValue)
            if let error { json.field("error", error) }
            if repeated { json.field("repeated", true) }
        }
        return json.text
    }
}

/// One key's store while it is live: the scripted store on its durable file, the props changes kept for
/// clients that reconnect, the ids of the actions it answered, and its live clients.
///
/// Every action goes through `begin(_:id:reply:)`, on whatever thread its connection runs, without a hop: what
/// every action and every props change touch — the ids answered, the actions in flight, the props changes kept,
/// the live clients — is `Traffic`, under one lock, taken on the connection's thread to put an action in line
/// and on the store's thread to answer it and to number the props its observer is handed (`seq`: the key's
/// journal sequence of the last entry they show, never less than one more than the last number given), which
/// are handed to every live client there, in order. The actor keeps what is rare: the devtools, an install, the
/// close.
actor HostedStore {
    let key: String
    private let store: ScriptedStore
    private let database: KeyJournal
    private let limits: ServerLimits
    /// The last journal entry's sequence (the store's thread writes it).
    private let journaled: Protected<UInt64>
    /// Why the app's `props` failed after the last props it gave (nil: they are the state's): `GET …/props` says so
    /// rather than answer props the state no longer has.
    private let propsFailure: Protected<String?>
    private let traffic: Protected<Traffic>
    /// When it was opened (a lease renewed before that did not know it).
    let opened = ContinuousClock.now
    /// Whether it resumed what its journal held (rather than starting from `init`).
    nonisolated var resumed: Bool { database.persistence.resumed != nil }
    /// What the devtools keep of the store's journal (`serve --devtools`), and their server once asked for.
    private let devtoolsJournal: DevtoolsJournal?
    private var devtools: DevtoolsServer?

    private init(key: String, store: ScriptedStore, database: KeyJournal, limits: ServerLimits,
                 journaled: Protected<UInt64>, propsFailure: Protected<String?>, devtoolsJournal: DevtoolsJournal?) {
        self.key = key
        self.propsFailure = propsFailure
        self.devtoolsJournal = devtoolsJournal
        self.store = store
        self.database = database
        self.limits = limits
        self.journaled = journaled
        traffic = Protected(Traffic(rate: TokenBucket(perSecond: limits.actionsPerKeyPerSecond)))
    }

    /// Opens `key`'s store: resumed from `KEY.db` in the data folder, or made by the app's `init` when new. A store
    /// that resumes but cannot start on the app in `options.app` (its `migrate` fails on this state, say) starts on
    /// the version its journal last ran, when `version` finds it (`AppVersions.folder(ranBy:cluster:)`).
    static func open(key: String, options: ServerOptions, version: (_ scripts: String) async -> URL? = { _ in nil },
                     log: @escaping @Sendable (String) -> Void) async throws(ServeFailure) -> HostedStore {
        let database = try await KeyJournal.open(key: key, options: options)
        let journaled = Protected(database.persistence.resumed?.sequence ?? 0)
        var storeOptions = options.store
        // (Each key's `save` and `load` in a folder of its own: keys are apart, their saved data too.)
        storeOptions.storageFolder = options.store.storageFolder?.appendingPathComponent(key, isDirectory: true)
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
        let propsFailure = Protected<String?>(nil)
        // (Who hears that the props failed once the hosted store exists; before, `propsFailure` keeps it.)
        let propsFailed = Protected<(@Sendable (String) -> Void)?>(nil)
        storeOptions.failures = { failure in
            // (An action's failure is its sender's answer; the rest are the server's log.)
            if failure.stage != .reduce { log("key \(key): \(failure.stage.rawValue) failed: \(failure.error)") }
            if failure.stage == .props {
                propsFailure.withLock { $0 = "\(failure.error)" }
                propsFailed.withLock { $0 }?("\(failure.error)")
            }
            reported(failure)
        }
        let store: ScriptedStore
        do {
            store = try await ScriptedStore(app: options.app, options: storeOptions)
        } catch {
            let failure = error
            guard let resumed = database.persistence.resumed, let folder = await version(resumed.scripts), folder != options.app,
                  let earlier = try? await ScriptedStore(app: folder, options: storeOptions) else {
                _ = await database.close()
                throw ServeFailure("the store of key \(key) cannot start: \(failure.error) (\(failure.stage.rawValue))")
            }
            log("key \(key): the running version cannot start its store (\(failure.error) (\(failure.stage.rawValue))): "
                + "it runs the version its journal last ran, until one that installs")
            store = earlier
        }
        let hosted = HostedStore(key: key, store: store, database: database, limits: options.limits,
                                 journaled: journaled, propsFailure: propsFailure, devtoolsJournal: devtoolsJournal)
        await hosted.readAnswered()
        propsFailed.withLock { $0 = { [weak hosted] failure in hosted?.propsFailed(failure) } }
        if let failure = propsFailure.withLock({ $0 }) { hosted.propsFailed(failure) } // (at the start: none were given)
        // (Told on the store's thread, in order, before the actions that made them are answered.)
        store.observeProps { [weak hosted] props in
            // (Props JSON cannot hold — NaN, an infinity — are the props' failure, as any props failure: never `null`.)
            do {
                hosted?.number(try LuaJSON.encode(props, root: "props"))
            } catch {
                hosted?.propsFailed("\(error)")
            }
            return .active
        }
        await store.barrier()
        return hosted
    }

    /// The address of the store's devtools page (with its token), started the first time it is asked for.
    func devtools(_ settings: DevtoolsSettings) async throws(ServeFailure) -> String {
        if let devtools { return devtools.url }
        guard let devtoolsJournal, !traffic.withLock({ $0.closed }) else { throw ServeFailure("the devtools of key \(key) are not kept") }
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
    nonisolated func send(_ action: LuaValue, id: String?) async -> ActionOutcome {
        await withCheckedContinuation { continuation in
            begin(action, id: id) { continuation.resume(returning: $0) }
        }
    }

    /// Puts `action` in line now — in the order of the calls, so a connection's actions are reduced in the order
    /// they came however many it keeps in flight — and tells `reply` its outcome, once: on the store's thread, or
    /// here when it is known at once (refused, or the answer to an id sent before). An id, when given, is
    /// remembered: a resent id is answered with its first outcome (marked `repeated`), never applied twice, even
    /// while the first is still in flight.
    nonisolated func begin(_ action: LuaValue, id: String?, reply: @escaping Reply) {
        let key = self.key, limits = self.limits, actionID = id.map(ActionID.init)
        let start = traffic.withLock { traffic -> Start in
            traffic.lastUsed = .now
            if let actionID {
                if var known = traffic.answered[actionID] {
                    known.repeated = true
                    return .known(known)
                }
                if traffic.waitingForId[actionID] != nil { // (the same id, sent again while the first is in flight)
                    traffic.waitingForId[actionID, default: []].append(reply)
                    return .waiting
                }
            }
            guard !traffic.closed else { return .known(.refused("the store of key \(key) is closing; send it again")) }
            guard case .table = action, action["type"].string != nil else {
                return .known(.refused("an action is a JSON object with a string \"type\""))
            }
            guard traffic.rate.take() else {
                return .known(.refused("rate limit: key \(key) takes \(limits.actionsPerKeyPerSecond) actions a second"))
            }
            if let actionID { traffic.waitingForId[actionID] = [] }
            traffic.inFlight += 1
            return .submit
        }
        switch start {
        case .known(let outcome):
            reply(outcome)
        case .waiting:
            break
        case .submit:
            let journaled = self.journaled
            store.submit(action, id: id) { [self] result in
                // (On the store's thread: a failed action's sequence is the last entry journaled when it failed.)
                finish(result, failedAt: journaled.withLock { $0 }, id: id, reply: reply)
            }
        }
    }

    private enum Start {
        /// Answered at once (refused, or the answer to an id sent before).
        case known(ActionOutcome)
        /// The id is in flight: answered with its outcome.
        case waiting
        /// Given to the store.
        case submit
    }

    private nonisolated func finish(_ result: SendResult, failedAt seq: UInt64, id: String?, reply: Reply) {
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
        let limits = self.limits
        let waiters = traffic.withLock { traffic -> [Reply] in
            traffic.inFlight -= 1
            traffic.lastUsed = .now
            guard let id else { return [] }
            traffic.remember(outcome, for: id, keeping: limits.rememberedIds)
            return traffic.waitingForId.removeValue(forKey: ActionID(id)) ?? []
        }
        reply(outcome)
        var repeated = outcome
        repeated.repeated = true
        for waiter in waiters { waiter(repeated) }
    }

    /// The ids the journal remembers (a durable store's, across hibernation, restarts and crashes).
    private func readAnswered() async {
        let actions = await store.recentClientActions()
        let limits = self.limits
        traffic.withLock { traffic in
            for action in actions {
                traffic.remember(ActionOutcome(kind: action.failure == nil ? .applied : .failed, seq: action.sequence, error: action.failure),
                                 for: action.id, keeping: limits.rememberedIds)
            }
        }
    }

    // MARK: Props

    /// Numbers the props the observer was handed (on the store's thread) and tells every live client.
    private nonisolated func number(_ text: String) {
        propsFailure.withLock { $0 = nil }
        let last = journaled.withLock { $0 }
        traffic.withLock { traffic in
            // (Props as they were before they failed are news again: the clients were told they failed.)
            if traffic.failing == nil, let current = traffic.current, current.props == text { return }
            let seq = max(last, traffic.lastSeq.map { $0 + 1 } ?? 0)
            traffic.current = (seq, text)
            traffic.failing = nil
            tell(&traffic, seq, "{\"seq\":\(seq),\"props\":\(text)}")
        }
    }

    /// The app's props failed (`failure`): `GET …/props` says so from now on, and every live client is told —
    /// `{"seq": N, "error": "…"}`, numbered and kept as a change — until props succeed again.
    nonisolated func propsFailed(_ failure: String) {
        propsFailure.withLock { $0 = failure }
        let last = journaled.withLock { $0 }
        let words = "the props of key \(key) failed: \(failure)"
        let error = (try? LuaJSON.encode(.string(words), root: "error")) ?? "\"the props failed\""
        traffic.withLock { traffic in
            if traffic.failing?.error == error { return }
            let seq = max(last, traffic.lastSeq.map { $0 + 1 } ?? 0)
            traffic.failing = (seq, error)
            tell(&traffic, seq, "{\"seq\":\(seq),\"error\":\(error)}")
        }
    }

    /// Keeps a change's live `message` and tells every live client (those that fell behind are ended: they reconnect
    /// with `?since=`). Under the lock: a client joining now hears it either in what it missed or here, once.
    private nonisolated func tell(_ traffic: inout Traffic, _ seq: UInt64, _ message: String) {
        traffic.keep(seq, message, at: limits.keptChanges)
        for (id, client) in traffic.clients where !client.hear(message) {
            client.end(.fellBehind)
            traffic.clients[id] = nil
        }
    }

    /// The props now as JSON text; nil before any. Throws when the app's `props` failed since the last it gave (the
    /// state changed, and what they were no longer shows it).
    nonisolated func propsText() throws(ServeFailure) -> String? {
        if let failure = propsFailure.withLock({ $0 }) { throw ServeFailure("the props of key \(key) failed: \(failure)") }
        return traffic.withLock { $0.current?.props }
    }

    func stateText() async throws(ServeFailure) -> String {
        traffic.withLock { $0.lastUsed = .now }
        do {
            return try LuaJSON.encode(try await store.state(), root: "state")
        } catch {
            throw ServeFailure("the state of key \(key) cannot be read: \(error)")
        }
    }

    /// A live client: told what it missed since `since` (every change after it, or a snapshot when those are gone
    /// or it gave none), then each change as it comes, until it leaves (`leave`) or falls behind. Its number.
    nonisolated func join(since: UInt64?, _ client: any LiveClient) -> Int {
        traffic.withLock { traffic in
            traffic.lastUsed = .now
            let id = traffic.nextClient
            traffic.nextClient += 1
            for message in traffic.missed(since: since) { _ = client.hear(message) }
            if traffic.closed {
                client.end(.storeClosed)
            } else {
                traffic.clients[id] = client
            }
            return id
        }
    }

    /// Ends every live client, telling it why.
    nonisolated func endClients(_ reason: LiveEnd) {
        let clients = traffic.withLock { traffic in
            defer { traffic.clients.removeAll() }
            return Array(traffic.clients.values)
        }
        for client in clients { client.end(reason) }
    }

    nonisolated func leave(_ id: Int) {
        traffic.withLock { traffic in
            traffic.clients[id] = nil
            traffic.lastUsed = .now
        }
    }

    // MARK: Life

    /// When the store was last used, while nothing uses it (no action in flight, no live client); nil while
    /// something does.
    nonisolated func unusedSince() -> ContinuousClock.Instant? {
        traffic.withLock { $0.inFlight == 0 && $0.clients.isEmpty && $0.waitingForId.isEmpty ? $0.lastUsed : nil }
    }

    /// Whether nothing uses the store and nothing has for `idle`.
    nonisolated func isIdle(_ idle: Duration) -> Bool {
        traffic.withLock { $0.inFlight == 0 && $0.clients.isEmpty && $0.waitingForId.isEmpty && ContinuousClock.now - $0.lastUsed >= idle }
    }

    /// Stops the store, writes what is queued and lets its file go; live clients are ended.
    func close() async -> PersistenceFailure? {
        traffic.withLock { $0.closed = true }
        endClients(.storeClosed)
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

/// A client's action id as the bytes it sent: two ids are one exactly when their bytes are. (As Swift strings, "café"
/// written with a combining accent and with "é" are equal: the second action was answered as the first's repeat and
/// never applied.)
struct ActionID: Hashable, Sendable {
    let bytes: [UInt8]

    init(_ id: String) { bytes = Array(id.utf8) }
}

/// Where an action's outcome goes, told once.
typealias Reply = @Sendable (ActionOutcome) -> Void

/// What every action and every props change of a hosted store touch (`HostedStore`), under its lock.
struct Traffic {
    var answered: [ActionID: ActionOutcome] = [:]
    /// The ids `answered` holds, oldest first.
    var answeredOrder = CircularBuffer<ActionID>()
    /// The ids in flight, with the replies of the same id sent again meanwhile.
    var waitingForId: [ActionID: [Reply]] = [:]
    var inFlight = 0
    var rate: TokenBucket
    var lastUsed = ContinuousClock.now
    var closed = false
    /// The props now, numbered, as JSON text.
    var current: (seq: UInt64, props: String)?
    /// The props' failure since they last succeeded, numbered, its words as a JSON string (nil: they succeed).
    var failing: (seq: UInt64, error: String)?
    /// The number of the latest change told: props, or their failure.
    var lastSeq: UInt64? {
        switch (current?.seq, failing?.seq) {
        case (let props?, let failure?): max(props, failure)
        case (let seq, nil), (nil, let seq): seq
        }
    }
    /// The latest props changes as live messages, oldest first.
    var changes = CircularBuffer<(seq: UInt64, message: String)>()
    var clients: [Int: any LiveClient] = [:]
    var nextClient = 0

    init(rate: TokenBucket) { self.rate = rate }

    mutating func remember(_ outcome: ActionOutcome, for text: String, keeping limit: Int) {
        guard outcome.kind != .refused else { return } // (refused: nothing happened; sending it again may work)
        let id = ActionID(text)
        answered[id] = outcome
        answeredOrder.append(id)
        if answeredOrder.count > limit { answered[answeredOrder.removeFirst()] = nil }
    }

    /// Keeps a change, at most `limit` of them (the oldest let go).
    mutating func keep(_ seq: UInt64, _ message: String, at limit: Int) {
        changes.append((seq, message))
        if changes.count > limit { changes.removeFirst() }
    }

    /// What a client that saw `since` missed: every change after it when all are kept, else the snapshot.
    func missed(since: UInt64?) -> [String] {
        if let since, let last = lastSeq, since <= last, since == last || changes.first.map({ $0.seq <= since + 1 }) == true {
            return changes.filter { $0.seq > since }.map(\.message)
        }
        return [snapshotMessage]
    }

    /// The props now, as the live protocol's snapshot message — or their failure, while they fail.
    var snapshotMessage: String {
        if let failing { return "{\"seq\":\(failing.seq),\"error\":\(failing.error),\"snapshot\":true}" }
        guard let current else { return "{\"seq\":0,\"error\":\"the props are not known yet\",\"snapshot\":true}" }
        return "{\"seq\":\(current.seq),\"props\":\(current.props),\"snapshot\":true}"
    }
}

/// A live client of a hosted store, told each props change on the store's thread, under the store's lock (it
/// must not block), until it is ended.
protocol LiveClient: Sendable {
    /// Takes `message`; false when the client fell behind (it is then ended).
    func hear(_ message: String) -> Bool
    /// Ends the client, telling it why.
    func end(_ reason: LiveEnd)
}

/// Why the server ends a live client.
enum LiveEnd: Sendable {
    /// The server is shutting down: reconnect (with `?since=`), to another node if there is one.
    case goingAway
    /// The key's store closed on this node — it hibernated, or this node no longer holds the key's lease: reconnect
    /// (with `?since=`), to this node or any other.
    case storeClosed
    /// More changes came than the client read: reconnect with `?since=` to catch up.
    case fellBehind
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
                // (A log of 1 MiB, not 16: a server holds many stores open, each writing a little at a time; a small
                // log is soon written over in place, which costs the system far less than growing a file — p99
                // at 20,000 actions a second over 100 keys went from 19–27 ms to 6–10 ms.)
                return .file(try StoreDatabase(path: path, app: options.app.lastPathComponent, durability: options.durability,
                                               snapshotInterval: options.snapshotInterval, logLimitPages: 256))
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

/// A failure of the server's own (a store that cannot open, a bad request), in words for the client.
public struct ServeFailure: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// The node that holds the key, when that is why (a cluster): its clients go there.
    public var holder: ClusterDatabase.Holder?
    /// Whether asking again later may work (the server holds its most live stores, each in use): 503 with
    /// `Retry-After`, WebSocket close 1013.
    public var retryLater = false
    /// Whether the key has no store, and the client may not make one (its token grants no `dispatch` on it): 404,
    /// WebSocket close 4404.
    public var missing = false
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
