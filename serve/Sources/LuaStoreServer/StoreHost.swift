import Foundation
import LuaStorePersistence

/// The keys' stores of one server: opened on first use, hibernated when idle (saved, VM closed), resumed from
/// their files on the next request, and all closed on shutdown.
actor StoreHost {
    private enum Slot {
        case opening(Task<HostedStore, any Error>)
        case live(HostedStore)
        case closing(Task<Void, Never>)
    }

    let options: ServerOptions
    /// The app version new and resumed stores start from (a cluster's publications change it).
    let versions: AppVersions
    private let log: @Sendable (String) -> Void
    private var slots: [String: Slot] = [:]
    private var stopping = false
    /// Stores hibernating now; when the last of a sweep's is closed, the allocator gives back what they held.
    private var closing = 0

    private let metrics: ServerMetrics

    init(options: ServerOptions, versions: AppVersions, log: @escaping @Sendable (String) -> Void, metrics: ServerMetrics) {
        self.options = options
        self.versions = versions
        self.log = log
        self.metrics = metrics
    }

    /// `key`'s live store, opened (or resumed) if it is not live. Without `creating` (a client that may only read
    /// it), a key that has no store yet — no file, nothing in the cluster's database — is not given one: it is
    /// `missing`, and nothing is written.
    func store(_ key: String, creating: Bool = true) async throws -> HostedStore {
        while true {
            guard !stopping else { throw ServeFailure("the server is shutting down") }
            switch slots[key] {
            case .live(let store):
                return store
            case .opening(let task):
                return try await task.value
            case .closing(let task):
                await task.value
                closed(key, task) // (so that the next turn opens it, whether or not the closer's own turn came)
            case nil:
                if !creating, try await !Self.exists(key, options) {
                    var failure = ServeFailure("key \(key) has no store yet: its first action makes it, and this token may only read it")
                    failure.missing = true
                    throw failure
                }
                guard slots[key] == nil else { continue } // (another request opened it meanwhile)
                try makeRoom(for: key)
                var options = self.options
                options.app = versions.folder
                let (log, versions) = (self.log, self.versions)
                let task = Task { () throws -> HostedStore in
                    try await HostedStore.open(key: key, options: options, version: { scripts in
                        await versions.folder(ranBy: scripts, cluster: options.cluster)
                    }, log: log)
                }
                slots[key] = .opening(task)
                do {
                    let store = try await task.value
                    slots[key] = .live(store)
                    if store.resumed { metrics.resumed() }
                    metrics.stores(live: liveCount)
                    return store
                } catch {
                    slots[key] = nil
                    throw error
                }
            }
        }
    }

    /// Whether `key` has a store, live or hibernated: its file, or its rows in the cluster's database.
    private static func exists(_ key: String, _ options: ServerOptions) async throws -> Bool {
        guard let cluster = options.cluster else {
            return FileManager.default.fileExists(atPath: options.dataFolder.appendingPathComponent(key + ".db").path)
        }
        let known = await Blocking.run { () -> Result<Bool, ServeFailure> in
            do {
                return .success(try cluster.knows(key))
            } catch {
                return .failure(ServeFailure("whether key \(key) has a store cannot be read: \(error)"))
            }
        }
        return try known.get()
    }

    /// Room for `key`'s store among the live ones (`ServerLimits.liveStores`): when they are as many, the one used
    /// longest ago that nothing uses now is hibernated; when every one is in use, `key` is refused for now.
    private func makeRoom(for key: String) throws(ServeFailure) {
        var open = 0
        var oldest: (key: String, store: HostedStore, used: ContinuousClock.Instant)?
        for (other, slot) in slots {
            switch slot {
            case .live(let store):
                open += 1
                if let used = store.unusedSince(), oldest.map({ used < $0.used }) ?? true { oldest = (other, store, used) }
            case .opening:
                open += 1
            case .closing:
                break
            }
        }
        guard open >= options.limits.liveStores else { return }
        guard let oldest else {
            var failure = ServeFailure("the server holds its most live stores (\(options.limits.liveStores), --max-live-stores), "
                + "each in use now; key \(key) is not opened: try again later")
            failure.retryLater = true
            metrics.refusedForRoom()
            throw failure
        }
        hibernate(oldest.key, oldest.store)
    }

    var liveCount: Int {
        slots.values.reduce(0) { count, slot in
            if case .live = slot { return count + 1 }
            return count
        }
    }

    /// Hibernates every live store idle for `options.idle`.
    func sweep() async {
        for (key, slot) in slots {
            guard case .live(let store) = slot, store.isIdle(options.idle) else { continue }
            guard case .live = slots[key] else { continue } // (changed while asking)
            hibernate(key, store)
        }
    }

    private func hibernate(_ key: String, _ store: HostedStore) {
        let log = self.log
        let task = Task {
            if let failure = await store.close() { log("key \(key): closing its store: \(failure)") }
        }
        slots[key] = .closing(task)
        closing += 1
        metrics.hibernated()
        metrics.stores(live: liveCount)
        Task {
            await task.value
            self.closed(key, task)
            self.hibernated()
        }
    }

    private func closed(_ key: String, _ task: Task<Void, Never>) {
        if case .closing(let current) = slots[key], current == task { slots[key] = nil }
    }

    /// One hibernation done. When none is left, the memory the closed VMs freed goes back to the system: a
    /// hibernated key holds nothing, and a server whose live stores come and go should not keep their peak.
    private func hibernated() {
        closing -= 1
        guard closing == 0 else { return }
        Task { await Blocking.run { Allocator.giveBack() } }
    }

    /// Closes the live stores opened before `since` whose keys are not in `held` (a cluster's node that could not
    /// renew their leases: another node may take them over, and their journals no longer take writes).
    func keep(only held: Set<String>, openedBefore since: ContinuousClock.Instant) async {
        for (key, slot) in slots {
            guard case .live(let store) = slot, !held.contains(key), store.opened < since else { continue }
            log("key \(key): this node no longer holds its lease; its store is closed here")
            hibernate(key, store)
        }
    }

    /// Installs the version in `folder` into every live store; a store whose install fails keeps its version (said
    /// in the log). Stores opened from now on start from it (`versions`).
    func install(_ folder: URL) async {
        var installed = 0, kept = 0
        for (key, slot) in slots {
            guard case .live(let store) = slot else { continue }
            if let failure = await store.install(folder: folder) {
                kept += 1
                log("key \(key): install failed, it keeps the version it ran: \(failure.error) (\(failure.stage.rawValue))")
            } else {
                installed += 1
            }
        }
        log("the new version runs in \(installed) live store\(installed == 1 ? "" : "s")\(kept > 0 ? "; \(kept) kept theirs" : "")")
    }

    /// Ends every live client (the server is shutting down: they are told so and may reconnect elsewhere).
    func endLiveClients() async {
        for slot in slots.values {
            if case .live(let store) = slot { store.endClients(.goingAway) }
        }
    }

    /// Closes every store (writing what is queued); no store opens after it.
    func stop() async {
        stopping = true
        for (key, slot) in slots {
            switch slot {
            case .live(let store):
                if let failure = await store.close() { log("key \(key): closing its store: \(failure)") }
            case .opening(let task):
                if let store = try? await task.value, let failure = await store.close() {
                    log("key \(key): closing its store: \(failure)")
                }
            case .closing(let task):
                await task.value
            }
        }
        slots.removeAll()
    }
}

/// The C allocator's free memory, given back to the system (glibc's `malloc_trim`, looked up at run time: Swift's
/// Glibc module does not declare it; elsewhere nothing happens).
enum Allocator {
    private typealias Trim = @convention(c) (Int) -> Int32

    static func giveBack() {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: Trim.self)(0)
    }
}
