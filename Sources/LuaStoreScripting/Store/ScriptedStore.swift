import Dispatch
import Foundation
import LuaKit
import LuaStoreCore

/// How a scripted store runs.
public struct ScriptedStoreOptions: Sendable {
    /// Bounds of the app's VM (memory, time per call) and how it collects garbage.
    public var limits: LuaLimits
    /// What HTTP effects may reach.
    public var urlPolicy: URLPolicy
    /// When observers hear about changes.
    public var notification: NotificationPolicy
    /// Receives what scripts `print` and `luastore.log` lines.
    public var log: @Sendable (String) -> Void
    /// Receives every failure while the app runs (default: standard error).
    public var failures: @Sendable (ScriptFailure) -> Void
    /// Where `require` looks after the app's folder: Lua path templates (`/usr/share/lua/5.4/?.lua`; see
    /// `LuaModulePath`), source text only. Empty (the default): the app's folder alone.
    public var modulePath: [String] = []
    /// Where `luastore.save` and `luastore.load` keep their data (one JSON file per key); `nil` makes them fail.
    public var storageFolder: URL?
    /// Files a `save` must never replace — the inputs of a run (its actions file); a save whose file is one of them
    /// (the same file, through links too) fails in words. The app's own scripts are always protected.
    public var protectedFiles: [String] = []
    /// Whether effects are performed. `false` (for replays) drops every command and subscription unperformed.
    public var performsEffects: Bool = true
    /// Stand-ins for effects, by kind (`"http"`, `"delay"`, `"timer"`, `"log"`, `"save"`, `"load"`): a command
    /// or subscription of that kind goes to its stand-in instead of being performed, and the actions it returns
    /// are dispatched back as the effect's results (`ScriptEffect.httpResult(_:)` makes the action a real
    /// request would). For tests (`ScriptedTestStore` uses them). A stand-in that throws is an effect failure.
    public var effectDoubles: [String: @Sendable (ScriptEffect) async throws -> [LuaValue]] = [:]
    /// How many of the latest actions sent with an id (`send(_:id:)`) the store keeps, for `recentClientActions()`
    /// and in a durable store's snapshots (10,000 by default).
    public var rememberedClientActions = 10_000
    /// How many committed journal entries the history keeps for time travel (`ScriptedStore.jump(to:)`); 0 (the
    /// default) keeps none. Keeping a history journals every action (as `journal` does).
    public var historyEntries: Int = 0
    /// At most about this many bytes of history are kept (estimated: 64 bytes per entry and per change); the
    /// oldest entries go first, the newest always stays.
    public var historyBytes: Int = 64 << 20
    /// Hears, on the store's thread, which subscriptions each new set launches and cancels, and after which
    /// journal entry (the devtools show them with the entry).
    public var subscriptionsChanged: (@Sendable (SubscriptionChange) -> Void)?
    /// The state to start from instead of running the app's `init` (a replay from a recorded point).
    public var initialState: LuaValue?
    /// The state of `math.random`'s generator to start from with `initialState` (a recording's header's `random`;
    /// nil: as every VM starts it), so that a replay from a recorded point draws what the recorded store drew.
    public var initialRandom: LuaRandomState?
    /// Hears the session journal: every action reduced (with what it changed) or refused (with why), and every
    /// reload, in order, on the store's thread (keep it quick: hand the entry to another thread to write it).
    /// Costs what each action changed, never the state's size; actions are then reduced one at a time.
    public var journal: (@Sendable (JournalEntry) -> Void)?
    /// Records the session journal (`luastore run --record`): hears what `journal` hears, but the entries of a run
    /// of actions are handed over as the barrier wrote them and made on the recorder's writer thread, so the
    /// store's thread makes none. (Set it rather than calling `SessionRecorder.append` from `journal`.)
    public var recorder: SessionRecorder?
    /// Keeps the state across launches (`LuaStorePersistence`'s `StoreDatabase`): what each action changed is
    /// written as it commits, and the store starts from what was kept (without running `init`; `migrate` runs
    /// when the app's `schemaVersion` grew since). See docs/persistence.md.
    public var persistence: (any StatePersistence)?
    /// Opens a plugin the app mounts that is a bundle (a file) rather than a folder: verifies it and returns the
    /// folder it was unpacked into (`LuaStoreBundles`: `AppBundle.Opener`). Without it, mounting a bundle is refused.
    public var openBundle: (@Sendable (URL) throws -> URL)?
    /// The clock and environment the app's `os` reads (`os.time`, `os.date`, `os.clock`, `os.getenv`): read once
    /// per run of actions and recorded with each journal entry (see `StoreClock`). Default: the system's wall
    /// clock, UTC, no environment.
    public var clock: StoreClock = .system
    /// A replay's clock: when the recorded store started, its offset from UTC and its environment (its recording's
    /// header), in place of `clock`'s; loading and `init` read `initialTime`. (`Replayer` and `luastore replay`
    /// set them; the actions get their recorded times as they are dispatched.)
    public var recordedClock: RecordedClock?
    /// The time loading the app and its `init` read, in milliseconds since 1970-01-01 UTC (default: `clock`'s now).
    public var initialTime: Int64?
    /// Threads the store shares with other stores: its VM lives on one of them (`LuaThreadPool.thread()`), so many
    /// stores need not start as many OS threads; their actions take turns on the threads they share. `nil` (the
    /// default): the store starts a thread of its own.
    public var threads: LuaThreadPool?

    /// Options; every part has a default.
    public init(
        limits: LuaLimits = LuaLimits(),
        urlPolicy: URLPolicy = URLPolicy(),
        notification: NotificationPolicy = .batched,
        log: @escaping @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data((line + "\n").utf8)) },
        failures: @escaping @Sendable (ScriptFailure) -> Void = { failure in
            FileHandle.standardError.write(Data("luastore: \(failure)\n".utf8))
        }
    ) {
        self.limits = limits
        self.urlPolicy = urlPolicy
        self.notification = notification
        self.log = log
        self.failures = failures
    }
}

/// A store whose reducer, props and subscriptions are a Lua app (a folder with `app.lua`), running on the
/// Swift store with effects performed in Swift.
///
/// ```swift
/// let store = try await ScriptedStore(app: URL(fileURLWithPath: "samples/counter"))
/// store.observeProps { props in print(props); return .active }
/// store.dispatch(["type": "increment"])
/// ```
public final class ScriptedStore: Sendable {
    /// The thread the app's VM lives on (also the store's serial context).
    public let thread: LuaThread
    let engine: ScriptEngine
    let root: RootStore<ScriptReducer>
    /// The sends not yet answered (`submit`), which the engine's journal looks at.
    let sends: WaitingSends
    let options: ScriptedStoreOptions
    let watcher = Protected<Watching?>(nil)

    /// The clock the store's `os` reads as a recording's header holds it: when the store started, its offset from
    /// UTC and its environment.
    public var recordedClock: RecordedClock { engine.clock.recorded }

    /// The database the store keeps its state in (`ScriptedStoreOptions.persistence`), if any.
    public var persistence: (any StatePersistence)? { options.persistence }

    /// The app's manifest (`luastore.json`), if it has one: its effects are limited to the capabilities it
    /// declares, its budgets lower the host's limits. See docs/plugins.md. (The installed version's, after
    /// `install(folder:allowDowngrade:)`.)
    public var manifest: AppManifest? { installed.withLock { $0.app } }
    /// The manifests of the plugins the app mounts, by key (docs/plugins.md, "Mounts").
    public var mountedManifests: [String: AppManifest] { installed.withLock { $0.mounts } }
    let installed: Protected<InstalledManifests>

    /// The manifests in force: the app's, and each mounted plugin's (an effect a plugin asked for carries its key).
    struct InstalledManifests {
        var app: AppManifest?
        var mounts: [String: AppManifest] = [:]
        /// The temporary folder the running version was unpacked into, which the store removes once it runs
        /// another version or shuts down (`ownUnpackedFolder`, `install(folder:allowDowngrade:owning:)`).
        var owned: URL?

        func governing(_ effect: ScriptEffect) -> AppManifest? {
            effect.payload["mount"].string.flatMap { mounts[$0] } ?? app
        }
    }

    /// Loads the app in `folder` (refused when its manifest is not valid or needs another scripting API), runs
    /// its `init`, and starts the store.
    public init(app folder: URL, options: ScriptedStoreOptions = ScriptedStoreOptions()) async throws(ScriptFailure) {
        let manifest = try Self.manifest(of: folder)
        let installed = Protected(InstalledManifests(app: manifest))
        self.installed = installed
        let thread = options.threads?.thread() ?? LuaThread(name: "luastore:" + folder.lastPathComponent)
        self.thread = thread
        self.options = options
        let report = options.failures
        let limits = manifest?.capped(options.limits) ?? options.limits
        let clock = try Self.clock(options)
        let sends = WaitingSends()
        self.sends = sends
        let engine = try await thread.perform { () throws(ScriptFailure) -> ScriptEngine in
            let mounts = Mounts(list: manifest?.mounts ?? [], openBundle: options.openBundle,
                                hostName: manifest?.name ?? folder.lastPathComponent)
            let engine = try ScriptEngine(folder: folder, thread: thread, limits: limits, main: manifest?.main ?? "app.lua",
                                          strictGlobals: manifest?.strictGlobals ?? false,
                                          modulePath: options.modulePath, mounts: mounts, log: options.log, report: report,
                                          clock: clock.engine, startTime: clock.start,
                                          initialState: options.persistence?.resumed.map { $0.text == nil ? $0.state : nil } ?? options.initialState,
                                          resumedText: options.persistence?.resumed?.text)
            engine.changeListeners { listeners in
                listeners.journal = options.journal
                listeners.recorder = options.recorder
                listeners.sends = sends
            }
            engine.journal.clientActions.capacity = options.rememberedClientActions
            if options.persistence == nil, options.initialState != nil, let random = options.initialRandom {
                engine.vm.randomState = random
                engine.journal.random = random
                engine.journal.randomStart = random
            }
            if let persistence = options.persistence { try engine.startPersisting(persistence) }
            engine.subscriptions.changed = options.subscriptionsChanged
            engine.runs.notificationInterval = options.notification.maximumActions
            engine.setHistory(entries: options.historyEntries, bytes: options.historyBytes)
            return engine
        }
        self.engine = engine
        let mounted = await thread.perform { engine.pluginManifests() }
        installed.withLock { $0.mounts = mounted }
        var configuration = StoreConfiguration<Void, LuaValue>(
            executor: LuaThreadExecutor(thread: thread),
            notification: options.notification,
            errorReporter: ErrorReporter { failure in
                report(Self.scriptFailure(failure))
            })
        // A burst of actions made anew is destroyed off the store's thread (`Reclaimer`).
        configuration.reclaimer = .shared
        let effects = options.performsEffects
            ? ScriptEffectHandlers.interpreter(
                runner: URLEffectRunner(policy: options.urlPolicy), storage: options.storageFolder,
                protecting: Self.protectedFiles(app: folder, options.protectedFiles),
                redirect: { effect, url in installed.withLock { $0.governing(effect) }?.refusal(ofHTTPTo: URLComponents(url: url, resolvingAgainstBaseURL: false)) },
                log: options.log)
            : ScriptEffectHandlers.inert
        let doubled = options.effectDoubles.reduce(effects) { interpreter, double in
            interpreter.handling(EffectKind(double.key)) { effect, context in
                for action in try await double.value(effect) { context.dispatch(action) }
            }
        }
        // With a manifest, an effect it does not declare fails (an `http` one with its failure action, as a host
        // the policy refuses does), whether performed or stood in for.
        let gated = doubled.checking { effect, context in
            guard let refusal = installed.withLock({ $0.governing(effect) })?.refusal(of: effect) else { return true }
            guard effect.kind == "http" else { throw LuaError(.runtime, refusal) }
            context.dispatch(ScriptEffectHandlers.resultAction(for: effect.payload, .failure(URLFailure(reason: .refusedHost, message: refusal))))
            return false
        }
        root = RootStore(
            initialState: (), runReducer: ScriptReducer(engine: engine), effects: gated,
            configuration: configuration)
        root.subscribe(Observer { [engine] _ in
            engine.flush()
            return .active
        })
    }

    deinit {
        watcher.withLock { $0?.end() }
        root.shutdown()
    }

    /// The engine's clock the options give, and the time loading and `init` read.
    private static func clock(_ options: ScriptedStoreOptions) throws(ScriptFailure) -> (engine: EngineClock, start: Int64) {
        let source = options.clock
        guard abs(source.utcOffsetSeconds) <= StoreClock.utcOffsetLimit, options.recordedClock.map({ abs($0.utcOffsetSeconds) <= StoreClock.utcOffsetLimit }) ?? true else {
            throw ScriptFailure(stage: .load, error: LuaError(.runtime, "the clock's utcOffsetSeconds must be within ±\(StoreClock.utcOffsetLimit) (18 hours)"))
        }
        let now = options.initialTime ?? source.nowMillis()
        // (A durable store goes on with the clock it started with; what it records of the environment is the host's now.)
        let resumedStart = options.persistence?.resumed?.clock.started
        let recorded = options.recordedClock
            ?? RecordedClock(started: resumedStart.flatMap { $0 != 0 ? $0 : nil } ?? now, utcOffsetSeconds: source.utcOffsetSeconds,
                             environment: source.environment)
        return (EngineClock(source: source, recorded: recorded, schedule: TimeSchedule()), now)
    }

    /// The files saves must not replace, by identity, with the names to say.
    private static func protectedFiles(app folder: URL, _ paths: [String]) -> [FileIdentity: String] {
        var files: [FileIdentity: String] = [:]
        for (path, identity) in FileIdentity.scripts(in: folder) { files[identity] = path }
        for path in paths { if let identity = FileIdentity(path: path) { files[identity] = path } }
        return files
    }

    /// The manifest in `folder`, checked against this host's scripting API; nil when it has none.
    public static func manifest(of folder: URL) throws(ScriptFailure) -> AppManifest? {
        do {
            let manifest = try AppManifest.load(folder: folder)
            try manifest?.checkHost()
            return manifest
        } catch {
            throw ScriptFailure(stage: .load, error: LuaError(.runtime, error.description))
        }
    }

    private static func scriptFailure(_ failure: StoreFailure<Void, LuaValue>) -> ScriptFailure {
        if let refused = failure.error as? ScriptFailure { // (a stage of its own: an action the contract does not declare)
            return ScriptFailure(stage: refused.stage, error: refused.error, action: failure.action, dispatchIndex: failure.dispatchIndex)
        }
        let stage: ScriptFailure.Stage = switch failure.stage {
        case .reducer: .reduce
        case .subscriptions: .subscriptions
        case .observer, .presenter: .props
        case .effect: .effect
        }
        let error = failure.error as? LuaError ?? LuaError(.runtime, String(describing: failure.error))
        return ScriptFailure(stage: stage, error: error, action: failure.action, dispatchIndex: failure.dispatchIndex)
    }

    // MARK: Actions and observers

    /// Dispatches `action`, a table with a string `type`. Safe from any thread.
    public func dispatch(_ action: LuaValue) { root.dispatch(action) }

    /// Dispatches `action` to run at `time` (milliseconds since 1970-01-01 UTC) rather than at the clock's now: a
    /// replay's recorded time. Times are matched to actions in the order they are dispatched: dispatch timed
    /// actions from one thread, and no untimed ones meanwhile.
    package func dispatch(_ action: LuaValue, at time: Int64) {
        engine.clock.schedule?.add(CollectionOfOne(time))
        root.dispatch(action)
    }

    /// `dispatch(_:at:)` for a window of actions, their times handed over at once.
    package func dispatch(timed actions: [(action: LuaValue, time: Int64)]) {
        engine.clock.schedule?.add(actions.lazy.map(\.time))
        for (action, _) in actions { root.dispatch(action) }
    }

    /// Dispatches `action` and waits for what became of it: `.applied` with its journal entry (what it changed,
    /// the commands it returned, its sequence number and how long it took), `.failed` with the failure (the state
    /// is as it was; `dispatchIndex` numbers it among the dispatches), `.held` when the store stood at a past
    /// entry (it is reduced on `resume()`), `.dropped` when the store stopped first. Returns once the props of
    /// the state after it were handed to the observers (delivered, for observers on the store's thread). In
    /// order with every other dispatch. While a send waits, actions are journaled (as with `journal`). Cancelling
    /// the waiting task does not take the action back.
    public func send(_ action: LuaValue) async -> SendResult { await send(action, at: nil) }

    /// `send`, with the sender's id for the action: its journal entry keeps it (origin `{"client": id}` in a
    /// recording and a durable store), so that whoever resends an action it did not hear the answer to can be
    /// told, from the journal, that it was reduced (`recentClientActions`). The id is the sender's business: the
    /// store does not look at it, nor refuse one seen before.
    public func send(_ action: LuaValue, id: String) async -> SendResult { await send(action, at: nil, id: id) }

    /// `send`, the action to run at `time` when given (`dispatch(_:at:)`).
    package func send(_ action: LuaValue, at time: Int64?, id: String? = nil) async -> SendResult {
        await withCheckedContinuation { continuation in
            submit(action, at: time, id: id) { continuation.resume(returning: $0) }
        }
    }

    /// `send` without waiting: once this returns, `action` is in line — after every action dispatched or submitted
    /// before, before every one after — and `completion` is told what became of it when `send` would return (on
    /// the store's thread: it must not block). A server keeps several of one client's actions in flight this way
    /// and answers each in turn, in the order they came. `id` as for `send(_:id:)`.
    public func submit(_ action: LuaValue, id: String? = nil, completion: @escaping @Sendable (SendResult) -> Void) {
        submit(action, at: nil, id: id, completion: completion)
    }

    package func submit(_ action: LuaValue, at time: Int64?, id: String?, completion: @escaping @Sendable (SendResult) -> Void) {
        // (No turn of the store's thread before the action is in line: it goes into the inbox from here, as a
        // dispatch does, so it keeps its place among them; the count of sends waiting is seen by the store's thread
        // before it reduces the action.)
        if let time { engine.clock.schedule?.add(CollectionOfOne(time)) }
        let engine = self.engine, sends = self.sends
        sends.begin()
        let result = Protected<SendResult?>(nil)
        let ticket = ActionTicket<ScriptEffect>(source: id.map { .client(id: $0) }, onReduced: { outcome in
            // (On the store's thread, right after the reducer: the entry just made is this action's.)
            switch outcome {
            case .applied where engine.journal.history.traveling:
                result.withLock { $0 = .held }
            case .applied:
                result.withLock { $0 = engine.journal.listeners.lastEntry.map(SendResult.applied) }
            case .failed where engine.journal.persistenceFailure != nil:
                // (Refused, never reduced — or not kept: its store's database can no longer be written, another
                // node took its key over, say. Not the reducer's failure: the sender sends it again, elsewhere.)
                result.withLock { $0 = .dropped }
            case .failed(let error, let index):
                let failure = (error as? ScriptFailure) ?? ScriptFailure(
                    stage: .reduce, error: (error as? LuaError) ?? LuaError(.runtime, "\(error)"), action: action)
                result.withLock { $0 = .failed(ScriptFailure(stage: failure.stage, error: failure.error, action: action,
                                                             dispatchIndex: index)) }
            case .dropped:
                break
            }
        }, onResolved: { _ in
            sends.end()
            completion(result.withLock { $0 } ?? .dropped)
        })
        root.dispatch(action, ticket: ticket)
    }

    /// The latest actions sent with an id (`send(_:id:)`), oldest first, at most `rememberedClientActions`: what
    /// the journal says of each (its entry, and why it failed if it did) — for a durable store, across restarts.
    public func recentClientActions() async -> [ClientAction] {
        await thread.perform { [engine] in engine.journal.clientActions.all }
    }

    /// The app as LuaStoreCore's `Store`: its state is the app's props — what a view shows — and its actions go to
    /// `dispatch`. Code written against `Store` works on a scripted app unchanged: an `Observer` (with its queue
    /// and its own `Equating`), a `scope`, a `Presenter` are told as every observer is (LuaStoreCore's
    /// `ObserverDelivery`), by the props' reader, which runs again only when the state it read changed.
    ///
    /// ```swift
    /// let titles = store.store.scope { $0["title"]?.string ?? "" }
    /// titles.subscribe(Observer(on: .main, removeDuplicates: .asEquatable) { title in label.text = title; return .active })
    /// ```
    ///
    /// Like every `Store` handle it keeps neither the store nor its VM alive.
    public var store: Store<LuaValue, LuaValue> {
        let core = root.store, thread = self.thread // (a handle: it keeps neither the store nor its VM alive)
        return Store(dispatch: core.dispatch, subscribe: { [weak engine] observer in
            thread.async { [weak engine] in engine?.addReader(.props, observer) }
        })
    }

    /// Observes the app's props: delivered now, then whenever they differ from the last delivered (props run again
    /// only when the state they read changed).
    public func observeProps(on queue: DispatchQueue? = nil, _ body: @escaping @Sendable (LuaValue) -> ObserverStatus) {
        store.subscribe(Observer(on: queue, removeDuplicates: .asEquatable, body))
    }

    /// Observes the props decoded as `T`; props that do not decode are reported as failures.
    public func observeProps<T: Decodable & Sendable>(as type: T.Type, on queue: DispatchQueue? = nil,
                                                      _ body: @escaping @Sendable (T) -> ObserverStatus) {
        let report = options.failures
        observeProps(on: queue) { value in
            do throws(LuaError) {
                return body(try LuaDecoder().decode(T.self, from: value, root: "props"))
            } catch {
                report(ScriptFailure(stage: .props, error: error))
                return .active
            }
        }
    }

    /// The props decoded as `T` (`LuaValue.self` for them as they are), as an `AsyncSequence`: the current props
    /// first, then each that differs from the one before. `buffering` says what waits while the loop is busy
    /// (default: only the newest — props are a view of the present). Props that do not decode are reported as
    /// failures and left out. Ending the loop ends the observation (at the next props).
    ///
    /// ```swift
    /// for await props in store.props(as: CounterProps.self) { label.text = props.label }
    /// ```
    public func props<T: Decodable & Sendable>(
        as type: T.Type, buffering: AsyncStream<T>.Continuation.BufferingPolicy = .bufferingNewest(1)
    ) -> AsyncStream<T> {
        AsyncStream(bufferingPolicy: buffering) { continuation in
            let ended = Protected(false)
            continuation.onTermination = { _ in ended.withLock { $0 = true } }
            observeProps(as: type) { props in
                if ended.withLock({ $0 }) { return .dead }
                continuation.yield(props)
                return .active
            }
        }
    }

    /// Observes the value at `path` in the state (`["todos", 3, "title"]`): delivered now, then only when a
    /// write touched it.
    public func observe(_ path: [LuaKey], on queue: DispatchQueue? = nil, _ body: @escaping @Sendable (LuaValue) -> ObserverStatus) {
        let observer = Observer(on: queue, removeDuplicates: .asEquatable, body)
        thread.async { [engine] in engine.addReader(.path(path), observer) }
    }

    /// A child store with its own local state, reduced by the app module `module` (see docs/scripted-apps.md, "Child
    /// stores"). It lives as long as you keep it.
    public func child(module: String) async throws(ScriptFailure) -> ScriptedChildStore {
        let engine = self.engine
        let result: Result<Int64, ScriptFailure> = await withCheckedContinuation { continuation in
            thread.async { continuation.resume(returning: Result { () throws(ScriptFailure) -> Int64 in try engine.addChild(module: module) }) }
        }
        let id = try result.get()
        let core = root.child(initialState: (), reducer: ChildScriptReducer(engine: engine, id: id))
        return ScriptedChildStore(id: id, engine: engine, core: core)
    }

    /// Observes the value at `path` decoded as `T`: converted and decoded only when a write touched it.
    /// Values that do not decode are reported as failures.
    public func observe<T: Decodable & Sendable>(_ path: [LuaKey], as type: T.Type, on queue: DispatchQueue? = nil,
                                                 _ body: @escaping @Sendable (T) -> ObserverStatus) {
        let report = options.failures
        let root = LuaPath.render(root: "state", keys: path)
        observe(path, on: queue) { value in
            do throws(LuaError) {
                return body(try LuaDecoder().decode(T.self, from: value, root: root))
            } catch {
                report(ScriptFailure(stage: .selector, error: error))
                return .active
            }
        }
    }

    // MARK: The journal

    /// The session journal from now on: an entry per action reduced or refused and per reload (see
    /// `JournalEntry`). Journaling starts with the first stream (or `ScriptedStoreOptions.journal`); while any
    /// is open, actions are reduced one at a time. Keeps the newest `bufferingNewest` entries a slow reader has
    /// not taken yet.
    /// (Called from synchronous code, it waits for the store's thread, which may be in the middle of a run;
    /// from async code, the `async` overload waits without holding the caller's thread.)
    public func journalEntries(bufferingNewest limit: Int = 100_000) -> AsyncStream<JournalEntry> {
        let (stream, continuation) = AsyncStream.makeStream(of: JournalEntry.self, bufferingPolicy: .bufferingNewest(limit))
        thread.sync { [engine] in Self.listen(engine, continuation) }
        return stream
    }

    /// The session journal from now on, as `journalEntries(bufferingNewest:)` gives it, for async code: the caller's
    /// thread is given back while the store's thread finishes what it is running.
    public func journalEntries(bufferingNewest limit: Int = 100_000) async -> AsyncStream<JournalEntry> {
        let (stream, continuation) = AsyncStream.makeStream(of: JournalEntry.self, bufferingPolicy: .bufferingNewest(limit))
        await thread.perform { [engine] in Self.listen(engine, continuation) }
        return stream
    }

    /// Adds `continuation` to the engine's streams, removed when its stream ends. On the engine's thread.
    private static func listen(_ engine: ScriptEngine, _ continuation: AsyncStream<JournalEntry>.Continuation) {
        let id = engine.changeListeners { $0.addStream(continuation) }
        continuation.onTermination = { [weak engine] _ in
            guard let engine else { return }
            engine.thread.async { engine.changeListeners { $0.removeStream(id) } }
        }
    }

    /// Where the journal is — the scripts' digest and schema version now, and the last entry's sequence — without
    /// converting the state.
    public func journalPosition() async -> (scripts: String, schemaVersion: Int64, sequence: UInt64) {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: (engine.app.digest, engine.app.schemaVersion, engine.journal.sequence)) }
        }
    }

    /// The initial state as the journal starts from it, and the scripts' digest: what a recording's header holds.
    public func journalStart() async throws(LuaError) -> JournalStart {
        try await onThread { engine throws(LuaError) in engine.journalStart(state: try engine.state()) }
    }

    /// The state of `math.random`'s generator just after journal entry `sequence`, as the reducers left it (nil: as
    /// every VM starts it) — where a recording of the history from there starts (`JournalStart.random`). Known for
    /// the entries the history keeps (`historyEntries`) and those before them.
    public func randomState(after sequence: UInt64) async -> LuaRandomState? {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: engine.journal.random(after: sequence)) }
        }
    }

    // MARK: Reading

    /// The props now (after the actions dispatched before this call).
    public func props() async throws(LuaError) -> LuaValue {
        try await onThread { engine throws(LuaError) in try engine.currentProps() }
    }

    /// The whole state now, converted.
    public func state() async throws(LuaError) -> LuaValue {
        try await onThread { engine throws(LuaError) in try engine.state() }
    }

    /// Whether the state now is exactly the value a recording's JSON `text` holds (a header's `stateText`), read
    /// off the text with nothing converted; false also where that reader is unsure — then compare `state()` with
    /// the decoded value, which says where the two differ.
    package func stateMatches(json text: String) async throws(LuaError) -> Bool {
        try await onThread { engine throws(LuaError) in try engine.runtime.stateMatches(json: text) }
    }

    /// The app VM's memory: in use now (after a full collection), at most so far, and the cap.
    public func memory() async -> LuaVM.MemoryUsage {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in
                engine.vm.collectGarbage()
                continuation.resume(returning: engine.vm.memory)
            }
        }
    }

    /// Returns once every action dispatched before the call has been reduced and its observers notified.
    public func barrier() async {
        await withCheckedContinuation { continuation in
            thread.async { continuation.resume() }
        }
    }

    /// Waits until no action is queued, none is held, no command is in flight and no request or delay declared
    /// as a subscription is still running (timers never finish, so they do not count), or `timeout` (or the calling
    /// task is cancelled); returns whether idle. Actions that arrived while time travel stood at a past entry
    /// (`jump(to:)`) are held, not reduced: the store is not idle until `resume()` (or `rewind(to:)`) reduced them —
    /// while the store travels with held actions, this waits out `timeout` and answers false.
    public func waitUntilIdle(timeout: Duration) async -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            // (Held actions first: a resume puts them in the queue, which the wait after this one then waits for;
            // held again after it — a jump and a dispatch meanwhile — the loop goes on.)
            if await travelStatus().held == 0,
               await root.waitUntilIdle(timeout: max(.zero, deadline - clock.now), finishing: ["http", "delay", "load", "save"]),
               await travelStatus().held == 0 {
                return true
            }
            guard clock.now < deadline else { return false }
            do { try await Task.sleep(for: .milliseconds(2)) } catch { return false }
        }
    }

    /// Stops the store: no more actions; subscriptions and commands are cancelled.
    public func shutdown() {
        stopWatching()
        root.shutdown()
        if let owned = installed.withLock({ state in defer { state.owned = nil }; return state.owned }) {
            try? FileManager.default.removeItem(at: owned)
        }
    }

    /// Gives the store `folder`, a temporary folder the running version's bundle was unpacked into: the store
    /// removes it once it runs another version (`install`), or shuts down.
    public func ownUnpackedFolder(_ folder: URL) {
        installed.withLock { $0.owned = folder }
    }

    private func onThread<T: Sendable>(_ body: @escaping @Sendable (ScriptEngine) throws(LuaError) -> T) async throws(LuaError) -> T {
        let result: Result<T, LuaError> = await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: Result { () throws(LuaError) -> T in try body(engine) }) }
        }
        return try result.get()
    }

}

/// A watch of the app's folder: what tells of saves, and the task reloading after them.
struct Watching: Sendable {
    let reloads: Task<Void, Never>
    let saves: AsyncStream<Void>.Continuation
    let files: FolderWatcher

    func end() {
        files.stop()
        saves.finish()
        reloads.cancel()
    }
}
