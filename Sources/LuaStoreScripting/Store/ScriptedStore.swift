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
    private let options: ScriptedStoreOptions
    private let watcher = Protected<Watching?>(nil)

    /// The database the store keeps its state in (`ScriptedStoreOptions.persistence`), if any.
    public var persistence: (any StatePersistence)? { options.persistence }

    /// The app's manifest (`luastore.json`), if it has one: its effects are limited to the capabilities it
    /// declares, its budgets lower the host's limits. See docs/plugins.md. (The installed version's, after
    /// `install(folder:allowDowngrade:)`.)
    public var manifest: AppManifest? { installed.withLock { $0.app } }
    /// The manifests of the plugins the app mounts, by key (docs/plugins.md, "Mounts").
    public var mountedManifests: [String: AppManifest] { installed.withLock { $0.mounts } }
    private let installed: Protected<InstalledManifests>

    /// The manifests in force: the app's, and each mounted plugin's (an effect a plugin asked for carries its key).
    private struct InstalledManifests {
        var app: AppManifest?
        var mounts: [String: AppManifest] = [:]

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
        let thread = LuaThread(name: "luastore:" + folder.lastPathComponent)
        self.thread = thread
        self.options = options
        let report = options.failures
        let limits = manifest?.capped(options.limits) ?? options.limits
        let engine = try thread.sync { () throws(ScriptFailure) -> ScriptEngine in
            let mounts = MountOptions(list: manifest?.mounts ?? [], openBundle: options.openBundle,
                                      hostName: manifest?.name ?? folder.lastPathComponent)
            let engine = try ScriptEngine(folder: folder, thread: thread, limits: limits, main: manifest?.main ?? "app.lua",
                                          modulePath: options.modulePath, mounts: mounts, log: options.log, report: report,
                                          initialState: options.persistence?.resumed?.state ?? options.initialState)
            engine.journal = options.journal
            engine.recorder = options.recorder
            if let persistence = options.persistence { try engine.startPersisting(persistence) }
            engine.subscriptionsChanged = options.subscriptionsChanged
            engine.notifiesEveryAction = options.notification == .everyAction
            engine.setHistory(entries: options.historyEntries, bytes: options.historyBytes)
            return engine
        }
        self.engine = engine
        let mounted = thread.sync { engine.pluginManifests() }
        installed.withLock { $0.mounts = mounted }
        let configuration = StoreConfiguration<ScriptState, LuaValue>(
            executor: LuaThreadExecutor(thread: thread),
            notification: options.notification,
            errorReporter: ErrorReporter { failure in
                report(Self.scriptFailure(failure))
            })
        let effects = options.performsEffects
            ? ScriptEffectHandlers.interpreter(
                runner: URLEffectRunner(policy: options.urlPolicy), storage: options.storageFolder,
                protecting: Self.protectedFiles(app: folder, options.protectedFiles), log: options.log)
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
            initialState: ScriptState(), reducer: ScriptReducer(engine: engine), effects: gated,
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

    private static func scriptFailure(_ failure: StoreFailure<ScriptState, LuaValue>) -> ScriptFailure {
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

    /// Dispatches `action` and waits for what became of it: `.applied` with its journal entry (what it changed,
    /// the commands it returned, its sequence number and how long it took), `.failed` with the failure (the state
    /// is as it was; `dispatchIndex` numbers it among the dispatches), `.held` when the store stood at a past
    /// entry (it is reduced on `resume()`), `.dropped` when the store stopped first. Returns once the props of
    /// the state after it were handed to the observers (delivered, for observers on the store's thread). In
    /// order with every other dispatch. While a send waits, actions are journaled (as with `journal`). Cancelling
    /// the waiting task does not take the action back.
    public func send(_ action: LuaValue) async -> SendResult {
        await withCheckedContinuation { continuation in
            thread.async { [engine, root, thread] in
                engine.sendsWaiting += 1
                let result = Protected<SendResult?>(nil)
                let ticket = ActionTicket<ScriptEffect>(onReduced: { outcome in
                    // (On the store's thread, right after the reducer: the entry just made is this action's.)
                    switch outcome {
                    case .applied where engine.traveling:
                        result.withLock { $0 = .held }
                    case .applied:
                        result.withLock { $0 = engine.lastEntry.map(SendResult.applied) }
                    case .failed(let error, let index):
                        let failure = (error as? ScriptFailure) ?? ScriptFailure(
                            stage: .reduce, error: (error as? LuaError) ?? LuaError(.runtime, "\(error)"), action: action)
                        result.withLock { $0 = .failed(ScriptFailure(stage: failure.stage, error: failure.error, action: action,
                                                                     dispatchIndex: index)) }
                    case .dropped:
                        break
                    }
                }, onResolved: { _ in
                    thread.async { engine.sendsWaiting -= 1 }
                    continuation.resume(returning: result.withLock { $0 } ?? .dropped)
                })
                root.dispatch(action, ticket: ticket)
            }
        }
    }

    /// A handle to the underlying store (for scoping or for code written against `Store`).
    public var store: Store<ScriptState, LuaValue> { root.store }

    /// Observes the app's props: delivered now, then whenever they change (props run again only when the
    /// state they read changed).
    public func observeProps(on queue: DispatchQueue? = nil, _ body: @escaping @Sendable (LuaValue) -> ObserverStatus) {
        thread.async { [engine] in engine.addReader(.props, queue: queue, deliver: body) }
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
        thread.async { [engine] in engine.addReader(.path(path), queue: queue, deliver: body) }
    }

    /// A child store with its own local state, reduced by the app module `module` (see docs/scripted-apps.md, "Child
    /// stores"). It lives as long as you keep it.
    public func child(module: String) async throws(ScriptFailure) -> ScriptedChildStore {
        let engine = self.engine
        let result: Result<Int64, ScriptFailure> = await withCheckedContinuation { continuation in
            thread.async { continuation.resume(returning: Result { () throws(ScriptFailure) -> Int64 in try engine.addChild(module: module) }) }
        }
        let id = try result.get()
        let core = root.child(initialState: ScriptState(), reducer: ChildScriptReducer(engine: engine, id: id))
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
    public func journalEntries(bufferingNewest limit: Int = 100_000) -> AsyncStream<JournalEntry> {
        let (stream, continuation) = AsyncStream.makeStream(of: JournalEntry.self, bufferingPolicy: .bufferingNewest(limit))
        thread.sync { [engine] in
            let id = engine.nextJournalStream
            engine.nextJournalStream += 1
            engine.journalStreams[id] = continuation
            continuation.onTermination = { [weak engine] _ in
                guard let engine else { return }
                engine.thread.async { engine.journalStreams[id] = nil }
            }
        }
        return stream
    }

    /// Where the journal is — the scripts' digest and schema version now, and the last entry's sequence — without
    /// converting the state.
    public func journalPosition() async -> (scripts: String, schemaVersion: Int64, sequence: UInt64) {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: (engine.app.digest, engine.app.schemaVersion, engine.journalSequence)) }
        }
    }

    /// The initial state as the journal starts from it, and the scripts' digest: what a recording's header holds.
    public func journalStart() async throws(LuaError) -> (state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64) {
        try await onThread { engine throws(LuaError) in
            (try engine.state(), engine.app.digest, engine.app.schemaVersion, engine.journalSequence)
        }
    }

    // MARK: Time travel

    /// The sequence numbers of the journal entries the history keeps (committed actions and migrations),
    /// oldest first, and the one the state is at.
    public func history() async -> (kept: [UInt64], at: UInt64?) {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: (engine.historySequences, engine.historyPosition)) }
        }
    }

    /// Puts the state as it was just after journal entry `sequence` (a kept one, or any later one), without
    /// running a reducer or an effect: observers get that point's props; actions that arrive meanwhile (from
    /// outside or from effects) are held, in order, until `resume()` or `rewind(to:)`. Costs what the entries in
    /// between changed, never the state's size.
    public func jump(to sequence: UInt64) async throws(ScriptFailure) {
        try await onThread { engine throws(ScriptFailure) in try engine.jump(to: sequence) }
    }

    /// Back to the present: the newest state, then the held actions, in order, before anything dispatched
    /// after them (each keeps the number of its dispatch: `ScriptFailure.dispatchIndex`).
    public func resume() async {
        await withCheckedContinuation { continuation in
            thread.async { [engine, root] in
                root.reinstate(engine.resume())
                continuation.resume()
            }
        }
    }

    /// Goes on from the state after entry `sequence`: the entries after it are dropped, the subscriptions are
    /// diffed again from that state (launching and cancelling), then the held actions are reduced, as `resume()`
    /// reduces them.
    public func rewind(to sequence: UInt64) async throws(ScriptFailure) {
        let result: Result<Void, ScriptFailure> = await withCheckedContinuation { continuation in
            thread.async { [engine, root] in
                do throws(ScriptFailure) {
                    root.reinstate(try engine.rewind(to: sequence), diffingSubscriptions: true)
                    continuation.resume(returning: .success(()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        try result.get()
    }

    /// The state just after journal entry `sequence` (a kept one, or any later one), converted; the store stays
    /// where it is.
    public func state(at sequence: UInt64) async throws(ScriptFailure) -> LuaValue {
        try await onThread { engine throws(ScriptFailure) in try engine.state(at: sequence) }
    }

    // MARK: Inspecting (at any point the history keeps)

    /// A page of the table at `path` in the state (see `StateSlice`): now (`at` nil), just after entry `at`, or
    /// just before it (`before`: the state its reducer saw). `nil` when no table is there. Costs that table's
    /// keys and the entries between here and there, never the whole state; nothing runs again.
    public func inspect(_ path: [LuaKey] = [], at sequence: UInt64? = nil, before: Bool = false,
                        offset: Int = 0, limit: Int = 200) async throws(ScriptFailure) -> StateSlice? {
        try await onThread { engine throws(ScriptFailure) in
            try engine.withState(at: sequence, before: before) { () throws(LuaError) in try engine.slice(path, offset: offset, limit: limit) }
        }
    }

    /// The values at `paths` (nil where absent), converted, at the same points as `inspect`.
    public func values(at paths: [[LuaKey]], at sequence: UInt64? = nil, before: Bool = false) async throws(ScriptFailure) -> [LuaValue] {
        try await onThread { engine throws(ScriptFailure) in
            try engine.withState(at: sequence, before: before) { () throws(LuaError) in
                var values: [LuaValue] = []
                for path in paths { values.append(try engine.value(at: path)) }
                return values
            }
        }
    }

    /// Where `text` occurs (case-insensitive) in a key or a value of the state, at most `limit` places, at the
    /// same points as `inspect`. Walks the whole state: for a person asking, not for every action.
    public func search(_ text: String, at sequence: UInt64? = nil, limit: Int = 200) async throws(ScriptFailure) -> [StateMatch] {
        try await onThread { engine throws(ScriptFailure) in
            try engine.withState(at: sequence) { () throws(LuaError) in try engine.search(text, limit: limit) }
        }
    }

    /// For entry `sequence` (a kept one), in one trip through the history: the values at `paths` just before it
    /// (what its changes replaced) and the props just after it.
    public func details(of sequence: UInt64, paths: [[LuaKey]]) async throws(ScriptFailure) -> (before: [LuaValue], props: Result<LuaValue, LuaError>) {
        try await onThread { engine throws(ScriptFailure) in try engine.details(of: sequence, paths: paths) }
    }

    /// The props the scripts give for the state just after entry `sequence` (delivered to no one).
    public func props(at sequence: UInt64) async throws(ScriptFailure) -> LuaValue {
        try await onThread { engine throws(ScriptFailure) in
            try engine.withState(at: sequence) { () throws(LuaError) in try engine.currentProps() }
        }
    }

    /// The props just after each of `sequences` (kept entries, ascending), computed by moving the state forward
    /// through the history once; an entry whose props fail gives the error.
    public func props(along sequences: [UInt64]) async throws(ScriptFailure) -> [Result<LuaValue, LuaError>] {
        try await onThread { engine throws(ScriptFailure) in try engine.props(along: sequences) }
    }

    /// The first kept entry after which the Lua `expression` holds (see `ConditionResult`): `state.count > 3`,
    /// `#state.todos == 0`. Reads the state as props do; checks every kept point from the oldest, each costing
    /// what one entry changed and one evaluation, and puts the state back.
    public func firstEntry(where expression: String) async throws(ScriptFailure) -> ConditionResult {
        try await onThread { engine throws(ScriptFailure) in try engine.firstEntry(where: expression) }
    }

    /// The app's folder.
    public var folder: URL { engine.folder }

    /// Whether the store is showing a past point (after `jump(to:)`, until `resume()` or `rewind(to:)`), and
    /// how many actions are held meanwhile.
    public func travelStatus() async -> (traveling: Bool, held: Int) {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: (engine.traveling, engine.held.count)) }
        }
    }

    private func onThread<T: Sendable>(_ body: @escaping @Sendable (ScriptEngine) throws(ScriptFailure) -> T) async throws(ScriptFailure) -> T {
        let result: Result<T, ScriptFailure> = await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: Result { () throws(ScriptFailure) -> T in try body(engine) }) }
        }
        return try result.get()
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

    /// Waits until no action is queued, no command is in flight and no request or delay declared as a
    /// subscription is still running (timers never finish, so they do not count), or `timeout` (or the calling
    /// task is cancelled); returns whether idle.
    public func waitUntilIdle(timeout: Duration) async -> Bool {
        await root.waitUntilIdle(timeout: timeout, finishing: ["http", "delay", "load", "save"])
    }

    /// Stops the store: no more actions; subscriptions and commands are cancelled.
    public func shutdown() {
        stopWatching()
        root.shutdown()
    }

    private func onThread<T: Sendable>(_ body: @escaping @Sendable (ScriptEngine) throws(LuaError) -> T) async throws(LuaError) -> T {
        let result: Result<T, LuaError> = await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: Result { () throws(LuaError) -> T in try body(engine) }) }
        }
        return try result.get()
    }

    // MARK: Reload

    /// Loads the app's scripts again, at an action boundary, keeping the state (see docs/scripted-apps.md, "Hot reload").
    @discardableResult
    public func reload() async throws(ScriptFailure) -> ReloadOutcome {
        try await reloading { engine throws(ScriptFailure) in try engine.reload() }
    }

    /// Installs a new version of the app from `folder` (its manifest required) in place of the running one,
    /// keeping the state: refused unless the manifest is valid, names the same app, needs a scripting API this
    /// host has and a greater version than the running one (`allowDowngrade`: any other); then as a reload —
    /// loaded beside the running version, `migrate(state, fromSchema, fromVersion)` run if its `schemaVersion`
    /// grew (`fromVersion`: the running version's, as text), props computed once, swapped
    /// in whole, its capabilities in force from the next effect. On any failure the running version stays, and
    /// the failure is a journal entry (`failedReload`) as well as thrown. Actions dispatched meanwhile wait and
    /// are reduced by the version in force when their turn comes: none is lost or applied twice. The folder must
    /// stay while the store runs (modules load from it). Its budgets are in force once it is swapped in (a version
    /// whose memory budget is below what the store holds is refused).
    public func install(folder: URL, allowDowngrade: Bool = false) async throws(ScriptFailure) -> ReloadOutcome {
        let running = manifest
        let candidate: AppManifest
        do throws(ManifestFailure) {
            guard let found = try AppManifest.load(folder: folder) else {
                throw ManifestFailure("is missing from \(folder.path): an installed version needs a manifest")
            }
            try found.checkHost()
            if let running {
                guard found.name == running.name else {
                    throw ManifestFailure("names '\(found.name)', not the running '\(running.name)': install a version of the same app")
                }
                guard allowDowngrade || found.version > running.version else {
                    throw ManifestFailure("says '\(found.name)' \(found.version), which is not newer than the running \(running.version) (a downgrade must be asked for)")
                }
            }
            candidate = found
        } catch {
            let failure = ScriptFailure(stage: .reload, error: LuaError(.runtime, error.description))
            _ = try? await onThread { engine throws(ScriptFailure) -> Bool in
                if engine.journaling { engine.record(.failedReload, origin: .reload, changes: [], failure: failure) }
                return true
            }
            throw failure
        }
        let replacing = running?.version.description
        let limits = candidate.capped(options.limits)
        let (outcome, mounted) = try await reloading { engine throws(ScriptFailure) in
            let outcome = try engine.install(folder: folder, main: candidate.main, mounts: candidate.mounts, limits: limits, replacing: replacing)
            return (outcome, engine.pluginManifests())
        }
        installed.withLock { $0 = InstalledManifests(app: candidate, mounts: mounted) }
        return outcome
    }

    /// Installs a new version of the plugin mounted at `key` from `folder` (its manifest required), on its own:
    /// refused unless the manifest is valid, names the same plugin, needs a scripting API this host has and a
    /// greater version than the running one (`allowDowngrade`: any other); then as `install(folder:)` — the app
    /// and its plugins loaded beside the running ones, the plugin's `migrate(slice, fromSchema, fromVersion)` run if
    /// its `schemaVersion` grew, props computed once, swapped in whole with the state kept, its capabilities in
    /// force from the next effect. On any failure the running version stays (a `failedReload` journal entry, and
    /// thrown). The folder must stay while the store runs that version.
    @discardableResult
    public func install(mount key: String, folder: URL, allowDowngrade: Bool = false) async throws(ScriptFailure) -> ReloadOutcome {
        let (outcome, mounted) = try await reloading { engine throws(ScriptFailure) in
            let (outcome, _, _) = try engine.install(mount: key, folder: folder, allowDowngrade: allowDowngrade)
            return (outcome, engine.pluginManifests())
        }
        installed.withLock { $0.mounts = mounted }
        return outcome
    }

    /// What each mounted plugin has cost so far (calls, time, allocations, failures), in the order actions reach
    /// them; empty for an app without mounts.
    public func pluginCosts() async -> [PluginCost] {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: engine.pluginCosts()) }
        }
    }

    /// Runs `engine.reload()` or `install` on the store's thread, journaling what became of it.
    private func reloading(_ body: @escaping @Sendable (ScriptEngine) throws(ScriptFailure) -> ReloadOutcome) async throws(ScriptFailure)
        -> ReloadOutcome {
        try await reloading { engine throws(ScriptFailure) in (try body(engine), ()) }.0
    }

    /// Runs `body` (a reload or an install, with something it read after) on the store's thread, journaling what
    /// became of it.
    private func reloading<Extra: Sendable>(_ body: @escaping @Sendable (ScriptEngine) throws(ScriptFailure) -> (ReloadOutcome, Extra))
        async throws(ScriptFailure) -> (ReloadOutcome, Extra) {
        let result: Result<(ReloadOutcome, Extra), ScriptFailure> = await withCheckedContinuation { continuation in
            thread.async { [engine, root] in
                let outcome = Result { () throws(ScriptFailure) -> (ReloadOutcome, Extra) in try body(engine) }
                if engine.journaling {
                    switch outcome.map(\.0) {
                    case .success(.reloaded(let from, let to)):
                        let changes = engine.migrated ? ((try? engine.lastChanges()) ?? []) : []
                        engine.record(.reload(fromSchema: from, toSchema: to), origin: .reload, changes: changes, failure: nil,
                                      kept: engine.migrated)
                    case .failure(let failure):
                        engine.record(.failedReload, origin: .reload, changes: [], failure: failure)
                    case .success(.unchanged):
                        break
                    }
                }
                if case .success((.reloaded(let from, let to), _)) = outcome {
                    root.dispatch(["type": "luastore/reloaded", "from": .integer(from), "to": .integer(to)])
                }
                continuation.resume(returning: outcome)
            }
        }
        return try result.get()
    }

    /// Watches the app's folder and reloads after a save: from the kernel's file notifications (inotify), so
    /// an idle watch costs nothing, or where there are none by looking every `interval`. A save counts once it is
    /// complete (written and closed, renamed into place, deleted); saves within `debounce` of each other are one
    /// reload. Each reload that loaded new scripts, or failed to, is reported to `onReload` (a save that leaves
    /// the scripts as they are is not). `polls`: look every `interval` even where there are notifications (a
    /// network file system, a folder shared into a container: the kernel does not hear of changes made on
    /// another machine).
    public func startWatching(
        interval: Duration = .milliseconds(10), debounce: Duration = .milliseconds(5), polls: Bool = false,
        onReload: @escaping @Sendable (Result<ReloadOutcome, ScriptFailure>) -> Void = { _ in }
    ) {
        let (saves, saved) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let reloads = Task { [weak self] in
            for await _ in saves {
                guard let self else { return }
                do throws(ScriptFailure) {
                    let outcome = try await self.reload()
                    if case .unchanged = outcome { continue }
                    onReload(.success(outcome))
                } catch {
                    onReload(.failure(error))
                }
            }
        }
        let files = FolderWatcher(folder: engine.folder, debounce: debounce, polls: polls, interval: interval) { saved.yield() }
        let watching = Watching(reloads: reloads, saves: saved, files: files)
        watcher.withLock { previous in
            previous?.end()
            previous = watching
        }
    }

    /// Stops watching the app's folder.
    public func stopWatching() {
        watcher.withLock { watching in
            watching?.end()
            watching = nil
        }
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
