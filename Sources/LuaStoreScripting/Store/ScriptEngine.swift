import Dispatch
import Foundation
import LuaKit
import LuaStoreCore

/// A scripted app inside its VM: the app's functions, the state runtime, and the readers (props and
/// selectors) observers are attached to. Lives on the app's `LuaThread`; every method runs there.
final class ScriptEngine {
    /// The app's module and the functions it exports.
    struct App {
        let namespace: LuaNamespace
        let module: LuaReference
        /// With mounts, these four are the composed ones (`ScriptEngine+Mounts.swift`); `props` is the app's own.
        var initialize: LuaReference
        var reduce: LuaReference
        /// The module's own `reduce` (nil when an app that mounts plugins leaves every action to them).
        let ownReduce: LuaReference?
        let props: LuaReference
        var subscriptions: LuaReference?
        var migrate: LuaReference?
        /// The module's own `migrate`.
        let ownMigrate: LuaReference?
        let schemaVersion: Int64
        var fingerprint: [String: Data]
        /// The digest of the scripts (`JournalEntry.scripts`).
        let digest: String
        /// The plugins mounted under keys of the state, in the order actions reach them.
        var mounts: [MountedPlugin] = []
    }

    /// A child store's module: its own `init`, `reduce` and `props`.
    struct ChildModule {
        let name: String
        let reduce: LuaReference
        let props: LuaReference
    }

    let vm: LuaVM
    let thread: LuaThread
    /// The app's folder (another one after `install`).
    var folder: URL
    var app: App
    /// The app's module file (`app.lua`, or its manifest's `main`).
    var main: String
    /// Whether the app's namespace has strict globals (its manifest's `strictGlobals`).
    var strictGlobals: Bool
    /// The plugins the app mounts, and how to load them (`ScriptEngine+Mounts.swift`).
    var mountOptions: MountOptions
    let runtime: StateRuntime.Functions
    let report: @Sendable (ScriptFailure) -> Void
    /// The observers attached to props, selectors and child props (`ScriptEngine+Readers.swift`). (Used only on
    /// the engine's thread, as all of the engine is: its accesses, several per value delivered, are not checked
    /// at run time for exclusivity.)
    @exclusivity(unchecked) var readers = ReaderTable()
    private var cachedSubscriptions: [String: ScriptEffect] = [:]
    /// Hears which subscriptions each new set launches and cancels (`ScriptedStoreOptions.subscriptionsChanged`).
    var subscriptionsChanged: (@Sendable (SubscriptionChange) -> Void)?
    /// The child stores' modules (`ScriptEngine+Children.swift`).
    var children = ChildTable()
    /// Who hears the journal; runs collect each action's changes while anyone does.
    var listeners = JournalListeners() { didSet { updateJournaling() } }
    /// Why the persistence could not write: every later action is refused.
    var persistenceFailure: PersistenceFailure?
    /// The sequence number the last snapshot was taken at.
    var snapshotSequence: UInt64 = 0
    var journalSequence: UInt64 = 0
    /// Whether the last successful reload ran a migration (its transaction is the last one).
    var migrated = false
    /// Whether anyone hears the journal.
    private(set) var journaling = false

    /// Time travel's state (`ScriptEngine+History.swift`).
    var history = HistoryState()

    /// Tells the runtime whether runs collect each action's changes.
    func updateJournaling() {
        let wanted = listeners.listening || history.limit > 0
        guard wanted != journaling else { return }
        journaling = wanted
        _ = try? vm.call(runtime[.setJournaling], arguments: [.value(.boolean(wanted))])
    }
    private var commandSequence: UInt64 = 0
    /// Whether `subscriptions` must run again before its cached result is used.
    var subscriptionsDirty = true
    /// How many times a reducer call crossed into the VM (a run of actions is one), for tests of batching.
    var reduceCrossings = 0
    /// How many actions were converted into the VM to be reduced (a run's whole span, whether it ran all of it
    /// or not), for tests of batching.
    var convertedActions = 0
    /// The store's notification points, in actions: 1 when it notifies after every action, n under
    /// `.batched(maximumActions: n)`; the readers run within runs at those points (`reduce(run:sinceNotification:)`).
    /// 0 (an engine without a store): they run when `flush` is called.
    var notificationInterval = 0
    /// The store notifies after every action (`.everyAction`): the readers run within each reduction.
    var notifiesEveryAction: Bool { notificationInterval == 1 }
    /// The VM's call count (`LuaVM.calls`) right after a run that ran the readers within it and left nothing for
    /// a flush: while nothing else has called into the VM since, the store's flush has nothing to do.
    var settledCalls: UInt64?
    /// How many of a run's actions go into the VM at once (`ScriptEngine+Runs.swift`).
    var runSpan = RunSpan()

    /// Loads the app in `folder`, runs `init`, and sets up the runtime. On this VM's thread.
    init(folder: URL, thread: LuaThread, limits: LuaLimits, main: String = "app.lua", strictGlobals: Bool = false, modulePath: [String] = [],
         mounts: MountOptions = MountOptions(),
         log: @escaping @Sendable (String) -> Void, report: @escaping @Sendable (ScriptFailure) -> Void,
         initialState: LuaValue? = nil) throws(ScriptFailure) {
        self.folder = folder
        self.main = main
        self.strictGlobals = strictGlobals
        self.mountOptions = mounts
        self.thread = thread
        self.report = report
        let machine: LuaVM
        do {
            var limits = limits
            limits.weakTables = .keptStrong // (a reducer's outcome must not depend on when the collector ran)
            machine = try LuaVM(limits: limits, moduleRoot: folder, modulePath: modulePath, print: log)
            try EffectsModule.define(in: machine)
            try machine.sealRawWrites(metatableMarker: StateRuntime.metatableMarker)
            runtime = try StateRuntime.load(into: machine)
        } catch {
            throw ScriptFailure(stage: .load, error: error)
        }
        vm = machine
        let building = limits.stateBuildingTimeBudget // (loading, init and migrate build whole states)
        let saved = machine.limits.timeBudget
        if building > saved { try? machine.setBudgets(time: building, memoryBytes: machine.limits.memoryBytes) }
        defer { if building > saved { try? machine.setBudgets(time: saved, memoryBytes: machine.limits.memoryBytes) } }
        app = try Self.loadApp(vm: vm, folder: folder, main: main, strictGlobals: strictGlobals, mounted: !mounts.list.isEmpty)
        app = try composeMounts(app, running: nil)
        do {
            // (From here on a global is set only as a module loads: `init` is skipped when the state comes back
            // from a snapshot, and every run is replayed from the journal, which holds no globals.)
            try vm.lockGlobals()
            if let initialState {
                try vm.call(runtime[.setState], arguments: [.value(initialState), .value(true)]) // (owned: no script holds it)
                if !app.mounts.isEmpty, let migrate = app.migrate { // (a mount the state has no slice for gets its init)
                    try vm.call(runtime[.transform], arguments: [.reference(migrate), .value(.nil), .value(.nil)])
                    mountOptions.placedSlices = try placedSlices()
                }
            } else {
                let initial = try vm.callForReferences(app.initialize, arguments: [])
                try vm.call(runtime[.setState], arguments: [initial.first.flatMap { $0 }.map(LuaArgument.reference) ?? .value(.nil)])
            }
        } catch {
            throw ScriptFailure(stage: .initialize, error: error)
        }
        try registerSubscriptions()
    }

    // MARK: Loading

    /// The app's files (`*.lua`, specs excluded) and their contents, to tell whether a reload changes anything.
    static func fingerprint(of folder: URL) -> [String: Data] {
        var files: [String: Data] = [:]
        let root = folder.standardizedFileURL.resolvingSymlinksInPath().path
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return files }
        while let relative = enumerator.nextObject() as? String {
            guard relative.hasSuffix(".lua"), !relative.hasSuffix("_spec.lua"), !relative.hasPrefix("spec/") else { continue }
            if let data = FileManager.default.contents(atPath: root + "/" + relative) { files[relative] = data }
        }
        return files
    }

    /// Requires the app's module (`main`, `app.lua` unless its manifest says otherwise) in a fresh namespace and
    /// checks its exports.
    static func loadApp(vm: LuaVM, folder: URL, main: String, strictGlobals: Bool = false, mounted: Bool = false) throws(ScriptFailure) -> App {
        let fingerprint = Self.fingerprint(of: folder)
        guard fingerprint[main] != nil else {
            throw ScriptFailure(stage: .load, error: LuaError(.runtime, "\(folder.path) has no \(main)"))
        }
        do throws(LuaError) {
            let namespace = try vm.makeNamespace(strictGlobals: strictGlobals)
            let module = try vm.require(String(main.dropLast(4)).replacingOccurrences(of: "/", with: "."), in: namespace)
            guard vm.typeName(of: module) == "table" else {
                throw LuaError(.runtime, "\(main) must return a table of functions (init, reduce, props), not a \(vm.typeName(of: module))",
                               chunkName: main)
            }
            func optionalExport(_ name: String) throws(LuaError) -> LuaReference? {
                guard let value = try vm.field(.string(name), of: module) else { return nil }
                guard vm.typeName(of: value) == "function" else {
                    throw LuaError(.runtime, "\(main)'s '\(name)' must be a function, not a \(vm.typeName(of: value))", chunkName: main)
                }
                return value
            }
            func export(_ name: String) throws(LuaError) -> LuaReference {
                guard let value = try optionalExport(name) else {
                    throw LuaError(.runtime, "\(main) must export a function '\(name)'", chunkName: main)
                }
                return value
            }
            var schemaVersion: Int64 = 0
            if let version = try vm.field("schemaVersion", of: module) {
                guard case .integer(let number) = try vm.value(of: version, root: "schemaVersion"), number >= 0 else {
                    throw LuaError(.runtime, "\(main)'s 'schemaVersion' must be a non-negative integer", chunkName: main)
                }
                schemaVersion = number
            }
            // (An app that mounts plugins may leave every action to them: its reduce is then one that does nothing.)
            let ownReduce = mounted ? try optionalExport("reduce") : try export("reduce")
            let reduce: LuaReference
            if let ownReduce { reduce = ownReduce } else { reduce = try vm.loadTrusted("", chunkName: "host:reduceNothing") }
            let ownMigrate = try optionalExport("migrate")
            return App(
                namespace: namespace, module: module, initialize: try export("init"), reduce: reduce, ownReduce: ownReduce,
                props: try export("props"), subscriptions: try optionalExport("subscriptions"),
                migrate: ownMigrate, ownMigrate: ownMigrate, schemaVersion: schemaVersion, fingerprint: fingerprint,
                digest: ScriptsDigest.of(fingerprint.mapValues { [UInt8]($0) }))
        } catch {
            throw ScriptFailure(stage: .load, error: error)
        }
    }

    func registerSubscriptions() throws(ScriptFailure) {
        do {
            if let subscriptions = app.subscriptions {
                try vm.call(runtime[.register], arguments: [.value("subscriptions"), .reference(subscriptions)])
            } else {
                try vm.call(runtime[.unregister], arguments: [.value("subscriptions")])
            }
            try vm.call(runtime[.markAllDirty], arguments: [])
            subscriptionsDirty = true
        } catch {
            throw ScriptFailure(stage: .load, error: error)
        }
    }

    // MARK: Reducing

    /// Applies `action` as one transaction; returns the commands. On failure the state is as it was. When
    /// journaling, the outcome (its changes, or its failure) becomes a journal entry.
    func reduce(_ action: LuaValue, source: ActionSource = .outside) throws(LuaError) -> [ScriptEffect] {
        if history.traveling {
            history.held.append((action, source))
            return []
        }
        try refuseWithoutPersistence()
        guard journaling else {
            let reduced = try reduceAction(action, source: source)
            if let flush = reduced.flush { deliverRunFlush(flush) }
            return reduced.effects
        }
        let commands: [ScriptEffect]
        let records: EncodedJournal?
        let flush: RunFlush?
        let started = ContinuousClock.now
        do {
            (commands, records, flush) = try reduceAction(action, source: source)
        } catch {
            record(.action(action), origin: JournalEntry.Origin(source), changes: [],
                   failure: ScriptFailure(stage: .reduce, error: error, action: action), duration: .now - started)
            throw error
        }
        do {
            try journalCommitted([action][...], origin: JournalEntry.Origin(source), from: 1, records: records, commands: (1, commands),
                                 duration: .now - started)
        } catch {
            // A change that cannot be converted (the state is data: this is a bug of the runtime's, reported).
            undoLastTransaction(committed: true)
            record(.action(action), origin: JournalEntry.Origin(source), changes: [],
                   failure: ScriptFailure(stage: .reduce, error: error, action: action))
            throw error
        }
        // Observers hear of the action only now: once it is in the journal (and, for a durable store that waits
        // for each action, on disk).
        if let flush { deliverRunFlush(flush) }
        return commands
    }

    /// Reduces one action; returns its commands and, when journaling, the records of what it changed. When the
    /// store notifies after every action, the readers run within the call after it, if it changed what they
    /// read, and what they gave is returned (`flush`, for the caller to deliver) — except for an action routed
    /// from a child store, whose own reducer runs after this one (the readers must see both).
    private func reduceAction(_ action: LuaValue, source: ActionSource) throws(LuaError)
        -> (effects: [ScriptEffect], records: EncodedJournal?, flush: RunFlush?) {
        let reduced: (commands: LuaValue, records: EncodedJournal?)?
        reduceCrossings += 1
        convertedActions += 1
        let flushWhenObserved = notifiesEveryAction && source != .child
        var runFlush: RunFlush?
        do {
            reduced = try vm.call(runtime[.reduce], arguments: [
                .reference(app.reduce), .value(action), .value(.boolean(flushWhenObserved)),
            ]) { results throws(LuaError) in
                typealias Result = StateRuntime.RunResult
                if results.boolean(Result.refused) == true { return nil } // refused before anything ran
                if results.boolean(Result.dirty) == true { subscriptionsDirty = true }
                if flushWhenObserved { runFlush = try readRunFlush(results) }
                let commands = results.isNil(Result.commands) ? .nil : try results.value(Result.commands, root: "commands")
                return (commands, journaling ? Self.records(in: results) : nil)
            }
        } catch {
            undoLastTransaction()
            throw error
        }
        guard let reduced else {
            throw Self.refused(action)
        }
        return (try effects(from: reduced.commands), reduced.records, runFlush)
    }

    /// The journal records a run returned (`StateRuntime.RunResult.records`).
    static func records(in results: LuaResults) -> EncodedJournal {
        typealias Result = StateRuntime.RunResult
        return EncodedJournal(results.bytes(Result.records, count: Int(results.integer(Result.recordsLength) ?? 0)) ?? [])
    }

    /// The error for an action the runtime refused before any reducer ran.
    static func refused(_ action: LuaValue) -> LuaError {
        LuaError(.runtime, "an action must be a table with a string field 'type' (got \(action))")
    }

    /// The commands a reducer returned, validated and numbered; invalid ones undo the action.
    func effects(from commands: LuaValue) throws(LuaError) -> [ScriptEffect] {
        do {
            var effects = commands == .nil ? [] : try Self.commands(from: commands)
            for index in effects.indices {
                commandSequence += 1
                effects[index].sequence = commandSequence
            }
            return effects
        } catch {
            undoLastTransaction(committed: true)
            var located = error
            if located.chunkName == nil { located.chunkName = main }
            throw located
        }
    }

    /// Undoes the open or last transaction; `committed`: it had committed (and the history kept it).
    func undoLastTransaction(committed: Bool = false) {
        if committed, history.limit > 0 { _ = try? vm.call(runtime[.dropNewestHistory], arguments: []) }
        do {
            try vm.call(runtime[.rollback], arguments: [])
        } catch {
            report(ScriptFailure(stage: .reduce, error: LuaError(.runtime, "rolling back failed: \(error.message)"), action: nil))
            _ = try? vm.call(runtime[.reset], arguments: [])
        }
    }

    static func commands(from value: LuaValue) throws(LuaError) -> [ScriptEffect] {
        switch value {
        case .nil: return []
        case .table(let table) where table.fieldCount == 0:
            var commands: [ScriptEffect] = []
            for (index, item) in table.array.enumerated() {
                commands.append(try ScriptEffect(validating: item, name: "command #\(index + 1)"))
            }
            return commands
        default:
            throw LuaError(.runtime, "reduce's second result must be a list of commands (got \(value.typeName == "table" ? "a table with non-list keys" : "a " + value.typeName))")
        }
    }

    /// Whether the running app has a `subscriptions` function, or had one with subscriptions still running.
    var declaresSubscriptions: Bool { app.subscriptions != nil || !cachedSubscriptions.isEmpty }

    /// The subscriptions the state declares; re-evaluated only when their inputs changed.
    func subscriptions() throws(LuaError) -> [String: ScriptEffect] {
        guard app.subscriptions != nil else {
            cachedSubscriptions = [:]
            return [:]
        }
        guard subscriptionsDirty, !history.traveling else { return cachedSubscriptions }
        let value: LuaValue
        do {
            value = try vm.call(runtime[.subscriptions], arguments: [.value(true)]).first ?? .nil
        } catch {
            _ = try? vm.call(runtime[.reset], arguments: [])
            throw error
        }
        guard let table = value.table else {
            throw LuaError(.runtime, "subscriptions must return a table of effects by key (got a \(value.typeName))", chunkName: main)
        }
        var effects: [String: ScriptEffect] = [:]
        for (index, item) in table.array.enumerated() {
            effects[String(index + 1)] = try ScriptEffect(validating: item, name: "subscription [\(index + 1)]")
        }
        for (key, item) in table.fields {
            effects[key.text] = try ScriptEffect(validating: item, name: "subscription \"\(key.text)\"")
        }
        if let subscriptionsChanged {
            var change = SubscriptionChange(after: journalSequence, launched: [:], cancelled: [])
            for (key, effect) in effects where cachedSubscriptions[key] != effect { change.launched[key] = effect }
            for (key, effect) in cachedSubscriptions where effects[key] != effect { change.cancelled.append(key) }
            change.cancelled.sort()
            if !change.launched.isEmpty || !change.cancelled.isEmpty { subscriptionsChanged(change) }
        }
        cachedSubscriptions = effects
        subscriptionsDirty = false
        return effects
    }

    // MARK: State

    /// The whole state, converted.
    func state() throws(LuaError) -> LuaValue {
        try vm.call(runtime[.state], arguments: []).first ?? .nil
    }

    /// The current props, converted.
    func currentProps() throws(LuaError) -> LuaValue {
        let id: Int64 = -1
        try vm.call(runtime[.register], arguments: [.value(.integer(id)), .reference(app.props)])
        defer { _ = try? vm.call(runtime[.unregister], arguments: [.value(.integer(id))]) }
        do {
            return try vm.call(runtime[.evaluate], arguments: [.value(.integer(id))]) { results throws(LuaError) in
                try results.value(1, root: "props")
            }
        } catch {
            _ = try? vm.call(runtime[.reset], arguments: [])
            throw error
        }
    }

}

// Every use happens on the app's LuaThread (the store's executor); LuaVM checks the thread on each call.
extension ScriptEngine: @unchecked Sendable {}
