import Dispatch
import Foundation
import LuaKit
import LuaStoreContract
import LuaStoreCore

/// A scripted app inside its VM: the app's functions, the state runtime, and the parts that keep what the engine
/// does between calls — runs, readers, the journal (with the history), subscriptions, mounts and child stores —
/// each owning its state beside its code. The engine coordinates them: a part never reaches into another's state.
/// Lives on the app's `LuaThread`; every method runs there.
final class ScriptEngine {
    /// Where an app's scripts are: its folder, its module file (`app.lua`, or its manifest's `main`), and whether
    /// its namespace has strict globals (its manifest's `strictGlobals`).
    struct Source {
        var folder: URL
        var main: String = "app.lua"
        var strictGlobals = false
    }

    /// The app's module and the functions it exports.
    struct App {
        let source: Source
        let namespace: LuaNamespace
        let module: LuaReference
        /// With mounts, these four are the composed ones (`Mounts.swift`); `props` is the app's own.
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
        /// What the app declares of its actions, props and state (nil: nothing).
        var contract: ContractChecker? {
            didSet { checksProps = contract?.contract.props != nil }
        }
        /// The actions the store takes, as the app and its mounted plugins declare them (nil: not checked).
        var actions: ActionContract? {
            didSet { checksActions = actions != nil }
        }
        /// Whether actions, props, are checked against it (read at each dispatch: a flag, not the contract).
        private(set) var checksActions = false
        private(set) var checksProps = false

        var folder: URL { source.folder }
        var main: String { source.main }
    }

    /// A child store's module: its own `init`, `reduce` and `props`.
    struct ChildModule {
        let name: String
        let reduce: LuaReference
        let props: LuaReference
    }

    /// The state runtime in the app's VM, called through its typed face.
    let runtime: StateRuntime
    let thread: LuaThread
    let report: @Sendable (ScriptFailure) -> Void
    /// The running version of the app (another one after a reload or an install).
    var app: App
    /// The clock the app's `os` reads (`StoreClock.swift`), set in the VM once per run.
    let clock: EngineClock
    /// The plugins the app mounts, and how to load them (`Mounts.swift`).
    var mounts: Mounts
    // (The parts below are used only on the engine's thread, as all of the engine is: their accesses, several per
    // action or per value delivered, are not checked at run time for exclusivity.)
    /// The store's notification points and what runs keep between calls (`Runs.swift`, `ScriptEngine+Runs.swift`).
    @exclusivity(unchecked) var runs = Runs()
    /// The observers attached to props, selectors and child props (`Readers.swift`, `ScriptEngine+Readers.swift`).
    @exclusivity(unchecked) var readers = Readers()
    /// Who hears the journal, its sequence numbers and the history (`Journaling.swift`, `ScriptEngine+Journal.swift`).
    @exclusivity(unchecked) var journal = Journaling()
    /// The subscriptions the state declares (`SubscriptionSet.swift`).
    var subscriptions = SubscriptionSet()
    /// The child stores' modules (`ScriptEngine+Children.swift`).
    var children = ChildTable()

    /// The app's VM (the runtime's).
    var vm: LuaVM { runtime.vm }

    /// Changes who hears the journal, and tells the runtime whether runs collect each action's changes.
    func changeListeners<T>(_ body: (inout JournalListeners) -> T) -> T {
        let result = journal.changeListeners(body)
        updateCollecting()
        return result
    }

    /// Tells the runtime whether runs collect each action's changes (anyone hears the journal, or the history
    /// keeps entries), when that changed.
    func updateCollecting() {
        guard let wanted = journal.collectingChanged() else { return }
        runtime.setJournaling(wanted)
    }

    /// Loads the app in `folder`, runs `init`, and sets up the runtime. On this VM's thread.
    init(folder: URL, thread: LuaThread, limits: LuaLimits, main: String = "app.lua", strictGlobals: Bool = false, modulePath: [String] = [],
         mounts: Mounts = Mounts(),
         log: @escaping @Sendable (String) -> Void, report: @escaping @Sendable (ScriptFailure) -> Void,
         clock: EngineClock = EngineClock(source: .system, recorded: RecordedClock(started: 0), schedule: nil), startTime: Int64 = 0,
         initialState: LuaValue? = nil, resumedText: PersistedText? = nil) throws(ScriptFailure) {
        self.mounts = mounts
        self.clock = clock
        self.thread = thread
        self.report = report
        let machine: LuaVM
        do {
            var limits = limits
            limits.weakTables = .keptStrong // (a reducer's outcome must not depend on when the collector ran)
            limits.system = .recorded // (`os` reads the store's clock: recorded, given again by a replay)
            machine = try LuaVM(limits: limits, moduleRoot: folder, modulePath: modulePath, print: log)
            machine.clockStartMillis = clock.recorded.started
            machine.clockMillis = startTime
            machine.utcOffsetSeconds = Int32(clock.recorded.utcOffsetSeconds)
            machine.setEnvironment(clock.recorded.environment)
            try EffectsModule.define(in: machine)
            try machine.sealRawWrites(metatableMarker: StateRuntime.metatableMarker)
            runtime = try StateRuntime(loadingInto: machine)
        } catch {
            throw ScriptFailure(stage: .load, error: error)
        }
        let building = limits.stateBuildingTimeBudget // (loading, init and migrate build whole states)
        let saved = machine.limits.timeBudget
        if building > saved { try? machine.setBudgets(time: building, memoryBytes: machine.limits.memoryBytes) }
        defer { if building > saved { try? machine.setBudgets(time: saved, memoryBytes: machine.limits.memoryBytes) } }
        let loaded = try Self.loadApp(vm: machine, from: Source(folder: folder, main: main, strictGlobals: strictGlobals), mounted: !mounts.list.isEmpty)
        app = try self.mounts.compose(loaded, running: nil, vm: machine, renderKey: runtime.renderKey)
        do {
            // (From here on a global is set only as a module loads: `init` is skipped when the state comes back
            // from a snapshot, and every run is replayed from the journal, which holds no globals.)
            try vm.lockGlobals()
            if initialState != nil || resumedText != nil {
                if let resumedText {
                    // (Read and built in the VM; where its C reader does not take the text, decoded here, which
                    // names what is wrong. The texts are in the VM while it reads them, with what reading them takes
                    // — about three times their size at its peak —: room is made for that, so that a state that fit
                    // under the memory cap as its actions made it resumes under it too.)
                    let changes = resumedText.changes.map(\.text)
                    let textBytes = changes.reduce(resumedText.state.utf8.count) { $0 + $1.utf8.count }
                    let read = try vm.withMemoryRoom(4 * textBytes + (64 << 10)) { () throws(LuaError) -> Bool in
                        try runtime.setState(text: resumedText.state, changes: changes)
                    }
                    if !read {
                        try runtime.setState(try Self.decoded(resumedText), owned: true)
                    }
                } else if let initialState {
                    try runtime.setState(initialState, owned: true) // (no script holds it)
                }
                if !app.mounts.isEmpty, let migrate = app.migrate { // (a mount the state has no slice for gets its init)
                    try runtime.transform(with: migrate, fromSchema: nil)
                    try self.mounts.notePlacedSlices(vm: vm)
                }
            } else {
                let initial = try vm.callForReferences(app.initialize, arguments: [])
                try runtime.setState(initial.first ?? nil)
            }
        } catch {
            throw ScriptFailure(stage: .initialize, error: error)
        }
        try registerSubscriptions()
    }

    /// A resumed state decoded in Swift; what is wrong with it as the error of loading it.
    private static func decoded(_ text: PersistedText) throws(LuaError) -> LuaValue {
        do {
            return try text.decoded()
        } catch {
            throw LuaError(.runtime, error.description)
        }
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
    static func loadApp(vm: LuaVM, from source: Source, mounted: Bool = false) throws(ScriptFailure) -> App {
        let (folder, main) = (source.folder, source.main)
        let fingerprint = Self.fingerprint(of: folder)
        guard fingerprint[main] != nil else {
            throw ScriptFailure(stage: .load, error: LuaError(.runtime, "\(folder.path) has no \(main)"))
        }
        do throws(LuaError) {
            let namespace = try vm.makeNamespace(strictGlobals: source.strictGlobals)
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
            var app = App(
                source: source, namespace: namespace, module: module, initialize: try export("init"), reduce: reduce, ownReduce: ownReduce,
                props: try export("props"), subscriptions: try optionalExport("subscriptions"),
                migrate: ownMigrate, ownMigrate: ownMigrate, schemaVersion: schemaVersion, fingerprint: fingerprint,
                digest: ScriptsDigest.of(fingerprint.mapValues { [UInt8]($0) }))
            // (Annotations no entry point uses are the editor's: only a declared contract is read, and must be whole.)
            let (contract, problems) = ReadContracts.contract(of: folder.path, main: main, digest: app.digest)
            if contract.declares {
                if let problem = problems.first {
                    throw LuaError(.runtime, "the app's contract: \(problem.message)", chunkName: problem.file, line: problem.line)
                }
                let checker = ContractChecker(contract)
                app.contract = checker
                if contract.action != nil { app.actions = ActionContract(app: checker) } // (its mounts, if any, join it)
            }
            return app
        } catch {
            throw ScriptFailure(stage: .load, error: error)
        }
    }

    /// Refuses an action the app's contract does not declare, before any reducer runs: a failed journal entry of its
    /// own stage (`undeclared`), naming what is wrong. Nil when it is declared, or the app declares no actions.
    func undeclared(_ action: LuaValue, source: ActionSource) -> ScriptFailure? {
        guard app.checksActions, let actions = app.actions, let problem = actions.mismatch(ofAction: action) else { return nil }
        let failure = ScriptFailure(stage: .undeclared, error: LuaError(.runtime, problem), action: action)
        if journal.collecting {
            if case .client(let id) = source {
                journal.clientActions.append(ClientAction(id: id, sequence: journal.sequence + 1, failure: ClientAction.failureText(failure.error)))
            }
            record(.action(action), origin: JournalEntry.Origin(source), changes: [], failure: failure)
        }
        return failure
    }

    func registerSubscriptions() throws(ScriptFailure) {
        do {
            try runtime.setSubscriptions(app.subscriptions)
            try runtime.markAllDirty()
            subscriptions.markDirty()
        } catch {
            throw ScriptFailure(stage: .load, error: error)
        }
    }

    // MARK: Reducing

    /// Applies `action` as one transaction; returns the commands. On failure the state is as it was. When
    /// journaling, the outcome (its changes, or its failure) becomes a journal entry.
    /// `timed`: the caller set the clock for it (a run's first action, reduced alone).
    func reduce(_ action: LuaValue, source: ActionSource = .outside, timed: Bool = false) throws -> [ScriptEffect] {
        if journal.history.traveling {
            journal.history.hold(action, source: source)
            return []
        }
        let scheduled: Bool
        if timed {
            scheduled = false
        } else {
            let next = clock.next(upTo: 1)
            vm.clockMillis = next.time
            scheduled = next.scheduled
        }
        defer { clock.took(1, scheduled: scheduled) }
        updateCollecting() // (a send waiting since the last action wants this one's entry: `WaitingSends`)
        try refuseWithoutPersistence()
        if let failure = undeclared(action, source: source) { throw failure }
        guard journal.collecting else {
            let reduced = try reduceAction(action, source: source)
            if let flush = reduced.flush { deliverRunFlush(flush) }
            return reduced.effects
        }
        let commands: [ScriptEffect]
        let records: EncodedJournal?
        let flush: StateRuntime.RunFlush?
        let started = ContinuousClock.now
        do {
            (commands, records, flush) = try reduceAction(action, source: source)
        } catch {
            // (A client's id is kept before its entry is journaled: a snapshot the entry makes due holds it.)
            if case .client(let id) = source {
                journal.clientActions.append(ClientAction(id: id, sequence: journal.sequence + 1, failure: ClientAction.failureText(error)))
            }
            record(.action(action), origin: JournalEntry.Origin(source), changes: [],
                   failure: ScriptFailure(stage: .reduce, error: error, action: action), duration: .now - started)
            throw error
        }
        if case .client(let id) = source { journal.clientActions.append(ClientAction(id: id, sequence: journal.sequence + 1)) }
        do {
            try journalCommitted([action][...], origin: JournalEntry.Origin(source), from: 1, records: records, commands: (1, commands),
                                 duration: .now - started)
        } catch {
            // A change that cannot be converted (the state is data: this is a bug of the runtime's, reported).
            undoLastTransaction(committed: true)
            if case .client(let id) = source {
                journal.clientActions.replaceLast(ClientAction(id: id, sequence: journal.sequence + 1, failure: ClientAction.failureText(error)))
            }
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
        -> (effects: [ScriptEffect], records: EncodedJournal?, flush: StateRuntime.RunFlush?) {
        runs.crossed()
        runs.converted(1)
        let flushWhenObserved = runs.notifiesEveryAction && source != .child
        let stop: StateRuntime.RunStop
        do {
            stop = try runtime.reduce(with: app.reduce, action: action, subscribed: app.subscriptions != nil,
                                      flushWhenObserved: flushWhenObserved,
                                      records: journal.collecting, readers: { self.readers.kind(of: $0) })
        } catch {
            undoLastTransaction()
            throw explained(error)
        }
        guard !stop.refused else { throw Self.refused(action) }
        if stop.dirty { subscriptions.markDirty() }
        return (try effects(of: stop), stop.records, stop.flush)
    }

    /// `error`, worded for what it is when the memory cap stopped the journal recording what an action changed
    /// (a recording, a durable store, the devtools keep each action's changes, within the app's memory cap): a
    /// memory error with no place in the script's code, where the same action runs without a journal.
    func explained(_ error: LuaError) -> LuaError {
        guard journal.collecting, error.kind == .memory, error.chunkName == nil, error.message == "not enough memory" else { return error }
        var explained = error
        explained.message = "not enough memory to record what the action changed (a store that records or persists keeps "
            + "each action's changes as it commits, within the app's memory cap of \(vm.limits.memoryBytes) bytes: "
            + "make the action change less, or raise the cap)"
        return explained
    }

    /// The error for an action the runtime refused before any reducer ran.
    static func refused(_ action: LuaValue) -> LuaError {
        LuaError(.runtime, "an action must be a table with a string field 'type' (got \(action))")
    }

    /// The commands of the action a run stopped at, validated and numbered; commands that are invalid, or could
    /// not even be converted, undo the action (which committed in the VM).
    func effects(of stop: StateRuntime.RunStop) throws(LuaError) -> [ScriptEffect] {
        guard let failure = stop.commandsFailure else { return try effects(from: stop.commands ?? .nil) }
        undoLastTransaction(committed: true)
        throw located(failure.error, returnedBy: reducer(ofMount: failure.mount))
    }

    /// The commands a reducer returned, validated and numbered; invalid ones undo the action.
    func effects(from commands: LuaValue) throws(LuaError) -> [ScriptEffect] {
        do {
            var effects = commands == .nil ? [] : try Self.commands(from: commands)
            runs.number(&effects)
            return effects
        } catch {
            undoLastTransaction(committed: true)
            throw located(error, returnedBy: reducer(returningFirstInvalidIn: commands))
        }
    }

    /// The reducer that returned the first command of `commands` that is not valid, for its message's place: in an
    /// app that mounts plugins, the plugin's (by the key `mounts.lua` tagged its commands with) or the app's own —
    /// not the composed reducer, which is the host's code.
    private func reducer(returningFirstInvalidIn commands: LuaValue) -> LuaReference {
        guard !app.mounts.isEmpty else { return app.reduce }
        let invalid = commands.table?.array.first { (try? ScriptEffect(validating: $0, name: "")) == nil }
        return reducer(ofMount: invalid?.table?["mount"].string)
    }

    /// The reduce of the plugin mounted at `key`; without one, the app's own.
    private func reducer(ofMount key: String?) -> LuaReference {
        guard !app.mounts.isEmpty else { return app.reduce }
        if let key, let plugin = app.mounts.first(where: { $0.key == key }), let reduce = try? vm.field("reduce", of: plugin.record) {
            return reduce
        }
        return app.ownReduce ?? app.reduce
    }

    /// `error`, about what `function` returned, placed where that function is defined (`app.lua:12`: the line of
    /// its `function`), when it has no place of its own.
    func located(_ error: LuaError, returnedBy function: LuaReference) -> LuaError {
        var located = error
        guard located.chunkName == nil else { return located }
        if let definition = vm.definition(of: function) {
            located.chunkName = definition.chunk
            located.line = definition.line
        } else {
            located.chunkName = app.main
        }
        return located
    }

    /// Undoes the transaction a failed call left open; `committed`: the last one, though it committed (and the
    /// history kept it).
    func undoLastTransaction(committed: Bool = false) {
        if committed, journal.history.limit > 0 { runtime.dropNewestHistory() }
        rollBack(committed: committed)
    }

    /// Undoes the transaction a failed call left open (none, when it failed before one began: the last committed
    /// action's writes stay); `committed`: the last transaction, though it committed.
    func rollBack(committed: Bool) {
        do {
            try runtime.rollback(committed: committed)
        } catch {
            report(ScriptFailure(stage: .reduce, error: LuaError(.runtime, "rolling back failed: \(error.message)"), action: nil))
            runtime.reset()
        }
    }

    static func commands(from value: LuaValue) throws(LuaError) -> [ScriptEffect] {
        switch value {
        case .nil: return []
        case .table(let table) where table.fieldCount == 0:
            var commands: [ScriptEffect] = []
            for (index, item) in table.array.enumerated() {
                // (A plugin's are tagged with the key it is mounted at: the message says whose it is.)
                let whose = item.table?["mount"].string.map { " (from the plugin mounted at '\($0)')" } ?? ""
                commands.append(try ScriptEffect(validating: item, name: "command #\(index + 1)\(whose)"))
            }
            return commands
        default:
            throw LuaError(.runtime, "reduce's second result must be a list of commands (got \(value.typeName == "table" ? "a table with non-list keys" : "a " + value.typeName))")
        }
    }

    /// Whether the running app has a `subscriptions` function, or had one with subscriptions still running.
    var declaresSubscriptions: Bool { app.subscriptions != nil || !subscriptions.current.isEmpty }

    /// The subscriptions the state declares; re-evaluated only when their inputs changed.
    func currentSubscriptions() throws(LuaError) -> [String: ScriptEffect] {
        guard app.subscriptions != nil else {
            subscriptions.clear()
            return [:]
        }
        guard subscriptions.dirty, !journal.history.traveling else { return subscriptions.current }
        let value: LuaValue
        do {
            value = try runtime.subscriptions()
        } catch {
            runtime.reset()
            throw error
        }
        guard let table = value.table else {
            throw located(LuaError(.runtime, "subscriptions must return a table of effects by key (got a \(value.typeName))"),
                          returnedBy: subscriber(of: nil))
        }
        var effects: [String: ScriptEffect] = [:]
        var key = ""
        // (Ids are text to the host: two keys Lua tells apart — `1` and `"1"`, or "é" written as one character and
        // as "e" and an accent — would be one subscription, the other dropped in silence. Refused, naming it.)
        func add(_ item: LuaValue, named name: String) throws(LuaError) {
            guard effects[key] == nil else {
                throw LuaError(.runtime, "\(name) has the id of another key of the table (a number and its digits, or the same text written two ways, are one id): give each its own")
            }
            effects[key] = try ScriptEffect(validating: item, name: name)
        }
        do {
            for (index, item) in table.array.enumerated() {
                key = String(index + 1)
                try add(item, named: "subscription [\(index + 1)]")
            }
            for (field, item) in table.fields {
                key = field.text
                try add(item, named: "subscription \"\(key)\"")
            }
        } catch {
            throw located(error, returnedBy: subscriber(of: key))
        }
        subscriptions.replace(with: effects, after: journal.sequence)
        return effects
    }

    /// The `subscriptions` function that returned the subscription `key` (nil: the table as a whole), for its
    /// message's place: in an app that mounts plugins, the plugin's (its ids are `<mount key>/<id>`) or the app's
    /// own — not the composed function, which is the host's code.
    private func subscriber(of key: String?) -> LuaReference {
        guard let composed = app.subscriptions else { return app.module }
        guard !app.mounts.isEmpty else { return composed }
        if let key, let plugin = app.mounts.first(where: { key.hasPrefix($0.key + "/") }),
           let own = try? vm.field("subscriptions", of: plugin.record) {
            return own
        }
        return (try? vm.field("subscriptions", of: app.module)) ?? composed
    }

    // MARK: State

    /// The whole state, converted.
    func state() throws(LuaError) -> LuaValue {
        try runtime.state()
    }

    /// The current props, converted.
    func currentProps() throws(LuaError) -> LuaValue {
        let id: Int64 = -1
        try runtime.register(reader: id, app.props)
        defer { runtime.unregister(reader: id) }
        let props: LuaValue
        do {
            props = try runtime.evaluate(reader: id, root: "props")
        } catch {
            runtime.reset()
            throw error
        }
        if let failure = propsMismatch(props) { throw failure }
        return props
    }

    /// Why `props` are not what the app's contract declares (nil: they are, or it declares none): the error names
    /// the difference and the declaration's place.
    func propsMismatch(_ props: LuaValue) -> LuaError? {
        guard app.checksProps, let checker = app.contract, let problem = checker.mismatch(ofProps: props) else { return nil }
        let place = checker.contract.propsDeclaration
        return LuaError(.runtime, "the props do not match their declaration: \(problem)", chunkName: place?.file, line: place?.line)
    }

}

// Every use happens on the app's LuaThread (the store's executor); LuaVM checks the thread on each call.
extension ScriptEngine: @unchecked Sendable {}
