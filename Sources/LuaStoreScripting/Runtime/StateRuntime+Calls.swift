import CLuaState
import LuaKit

// The typed face of the state runtime: every call the engine makes into it, with its arguments and results named.
// Only this file knows where a result lies on the stack — as `clua_state_layouts.h` declares, the one declaration
// the barrier's C lays them out by.

/// Where `reduce` and `reduceRun` put their results (one layout for both): the position of the action the run
/// stopped after, its commands (or nil), whether `subscriptions` must run again, whether the action was refused
/// (no string `type`); while journaling, the run's journal records (`changes_record`, `CLuaState/changes.c`) and
/// their length; when the readers ran within the run, whether nothing is left for a flush, what they gave (at
/// `flushed`, a `FlushResult` layout), the message of a flush that failed, and whether it ran out of time.
private enum RunResult {
    static let position = Int32(CLUA_RUN_POSITION)
    static let commands = Int32(CLUA_RUN_COMMANDS)
    static let dirty = Int32(CLUA_RUN_DIRTY)
    static let refused = Int32(CLUA_RUN_REFUSED)
    static let records = Int32(CLUA_RUN_RECORDS)
    static let recordsLength = Int32(CLUA_RUN_RECORDS_LENGTH)
    static let settled = Int32(CLUA_RUN_SETTLED)
    static let flushed = Int32(CLUA_RUN_FLUSHED)
    static let flushFailure = Int32(CLUA_RUN_FLUSH_FAILURE)
    static let flushTimedOut = Int32(CLUA_RUN_FLUSH_TIMED_OUT)
}

/// Where `flush` puts its results (and `reduceRun`, `runPosition`, from a position on): how many readers ran,
/// their ids, their values (or error messages), and which of them failed (lists of that length).
private enum FlushResult {
    static let count = Int32(CLUA_FLUSH_COUNT)
    static let readers = Int32(CLUA_FLUSH_READERS)
    static let values = Int32(CLUA_FLUSH_VALUES)
    static let failed = Int32(CLUA_FLUSH_FAILED)
    static let uniform = Int32(CLUA_FLUSH_UNIFORM)
}

/// Where `runPosition` puts its results: the action being reduced, and what the readers gave before it.
private enum RunPositionResult {
    static let position = Int32(CLUA_RUN_POSITION_POSITION)
    static let flushed = Int32(CLUA_RUN_POSITION_FLUSHED)
}

extension StateRuntime {
    /// What a run is told beside reducing (`CLUA_RUN_FLAGS`): stop after an action that made the subscriptions
    /// stale (when any are declared), and say whether they are stale at every end (a run of one).
    struct RunFlags: OptionSet {
        let rawValue: Int64
        static let stopWhenDirty = RunFlags(rawValue: Int64(CLUA_RUN_STOP_WHEN_DIRTY))
        static let alwaysDirty = RunFlags(rawValue: Int64(CLUA_RUN_ALWAYS_DIRTY))
    }

    /// What readers gave, in the order they ran: each one's value, or its failure. (An enum of this module's own,
    /// not a tuple holding a `Result`: copying and destroying those went through the generic types' witnesses,
    /// per value delivered.)
    struct Flushed {
        enum Outcome {
            case value(id: Int64, LuaValue)
            case failure(id: Int64, LuaError)
        }

        var outcomes: [Outcome] = []
    }

    /// What the readers gave within a run, whether the run left nothing for a flush, and the flush's failure.
    struct RunFlush {
        let flushed: Flushed
        let settled: Bool
        let failure: LuaError?
    }

    /// Where a run stopped and why: the action's position; its commands (nil: none); whether it was refused (no
    /// string `type`); whether the subscriptions must run again; the journal records, when asked for; and, when
    /// the readers ran within it, what they gave.
    struct RunStop {
        var position: Int64
        var commands: LuaValue?
        /// Why the commands could not be converted at all (a function, bytes that are not UTF-8, a cycle, …): the
        /// action committed in the VM, and the host undoes it as it undoes invalid commands.
        var commandsFailure: CommandsFailure?
        var refused = false
        var dirty = false
        var records: EncodedJournal?
        var flush: RunFlush?
    }

    /// Commands that could not be converted: why, and the key of the plugin whose command it was (commands of a
    /// mounted plugin are tagged with it), when the first bad one is tagged.
    struct CommandsFailure {
        var error: LuaError
        var mount: String?
    }

    /// The kind of the reader with an ID (nil: no longer there, its value is dropped), for naming its values.
    typealias ReaderKinds = (Int64) -> ReaderKind?

    // MARK: Reducing

    /// Reduces one action with `reduce` as a transaction (a run of one). Refused before anything ran: `refused`,
    /// nothing else read. `subscribed`: the app declares subscriptions (whether they went stale is read).
    /// `flushWhenObserved`: the readers run after it, if it changed what they read. `records`: the journal records
    /// are read.
    func reduce(with reduce: LuaReference, action: LuaValue, subscribed: Bool, flushWhenObserved: Bool, records: Bool,
                readers: ReaderKinds) throws(LuaError) -> RunStop {
        let flags: RunFlags = subscribed ? [.stopWhenDirty, .alwaysDirty] : .alwaysDirty
        return try vm.call(self[.reduce], arguments: [
            .reference(reduce), .value(action), .value(.integer(flags.rawValue)), .value(.boolean(flushWhenObserved)),
        ]) {
            results throws(LuaError) -> RunStop in
            if results.boolean(RunResult.refused) == true { return RunStop(position: 1, refused: true) } // refused before anything ran
            var stop = RunStop(position: 1, dirty: results.boolean(RunResult.dirty) == true)
            if flushWhenObserved { stop.flush = try Self.runFlush(results, readers: readers) }
            (stop.commands, stop.commandsFailure) = Self.commands(in: results)
            if records { stop.records = Self.records(in: results) }
            return stop
        }
    }

    /// Reduces `list[first...last]` (a reference to a list of actions) with `reduce`, each action its own
    /// transaction; stops where the host must look (`RunStop`) — after an action that made the subscriptions stale
    /// too, when `subscribed` (the app declares some). `every` (0: no readers run within the run) and
    /// `untilFlush`: the store's notification points, from the run's first action.
    func reduceRun(with reduce: LuaReference, list: LuaReference, first: Int64, last: Int64, subscribed: Bool, every: Int64,
                   untilFlush: Int64, records: Bool, readers: ReaderKinds) throws(LuaError) -> RunStop {
        let flags: RunFlags = subscribed ? .stopWhenDirty : []
        return try vm.call(self[.reduceRun], arguments: [
            .reference(reduce), .reference(list), .value(.integer(first)), .value(.integer(last)), .value(.integer(flags.rawValue)),
            .value(.integer(every)), .value(.integer(untilFlush)),
        ]) { results throws(LuaError) -> RunStop in
            var stop = RunStop(position: results.integer(RunResult.position) ?? last)
            if records { stop.records = Self.records(in: results) }
            if every > 0 { stop.flush = try Self.runFlush(results, readers: readers) }
            if results.boolean(RunResult.refused) == true {
                stop.refused = true
                return stop
            }
            (stop.commands, stop.commandsFailure) = Self.commands(in: results)
            stop.dirty = results.boolean(RunResult.dirty) == true
            return stop
        }
    }

    /// After a run raised: the position of the action it was reducing (nil: unknown), and what the readers gave
    /// before it.
    func runPosition(readers: ReaderKinds) throws(LuaError) -> (position: Int64?, flushed: Flushed) {
        try vm.call(self[.runPosition], arguments: []) { results throws(LuaError) in
            (results.integer(RunPositionResult.position), try Self.flushed(results, at: RunPositionResult.flushed, readers: readers))
        }
    }

    /// Reduces an action dispatched to child store `id` with its `reduce`, as a transaction; what it returned
    /// (its commands, or nil).
    func reduceChild(_ id: Int64, with reduce: LuaReference, action: LuaValue) throws(LuaError) -> (commands: LuaValue, failure: LuaError?) {
        try vm.call(self[.reduceChild], arguments: [.value(.integer(id)), .reference(reduce), .value(action)]) {
            results throws(LuaError) -> (LuaValue, LuaError?) in
            // (Commands that cannot be converted come after the action committed: the caller undoes it.)
            do throws(LuaError) {
                return (try results.value(1, root: "commands"), nil)
            } catch {
                return (.nil, error)
            }
        }
    }

    /// Runs `migrate` over the state as one transaction (`fromSchema`, `fromVersion`: its second and third
    /// arguments; absent when nil).
    func transform(with migrate: LuaReference, fromSchema: Int64?, fromVersion: String? = nil) throws(LuaError) {
        try vm.call(self[.transform], arguments: [
            .reference(migrate), .value(fromSchema.map(LuaValue.integer) ?? .nil), .value(fromVersion.map(LuaValue.string) ?? .nil),
        ])
    }

    /// Undoes the transaction a failed call left open — none, when it failed before one began —; `committed`: the
    /// last transaction, though it committed (what it returned turned out invalid).
    func rollback(committed: Bool = false) throws(LuaError) {
        try vm.call(self[.rollback], arguments: [.value(.boolean(committed))])
    }

    /// Puts the runtime back to rest after a failed call (a failure to do so leaves it as it is).
    func reset() { _ = try? vm.call(self[.reset], arguments: []) }

    /// Makes every reader, and `subscriptions`, run again at the next flush.
    func markAllDirty() throws(LuaError) { try vm.call(self[.markAllDirty], arguments: []) }

    // MARK: The state

    /// Makes `value` the state (converted into the VM; `owned`: no script holds it, so it is taken as it is).
    func setState(_ value: LuaValue, owned: Bool) throws(LuaError) {
        try vm.call(self[.setState], arguments: [.value(value), .value(.boolean(owned))])
    }

    /// Makes the state the one a recording's JSON `text` holds with each of `changes` (entries' `changes` lists,
    /// as text) applied, read and built in C; false, nothing done, where that reader does not take them.
    func setState(text: String, changes: [String]) throws(LuaError) -> Bool {
        try vm.call(self[.setState], arguments: [.value(.string(text)), .value(.boolean(true)),
                                                 .value(.table(LuaTable(array: changes.map(LuaValue.string))))]).first == .boolean(true)
    }

    /// Makes the table `reference` points at (what `init` returned; nil: none) the state.
    func setState(_ reference: LuaReference?) throws(LuaError) {
        try vm.call(self[.setState], arguments: [reference.map(LuaArgument.reference) ?? .value(.nil)])
    }

    /// The whole state, converted.
    func state() throws(LuaError) -> LuaValue {
        try vm.call(self[.state], arguments: []).first ?? .nil
    }

    /// Whether the state is exactly the value a recording's JSON `text` holds, read in C off the text (nothing is
    /// converted); false also where that reader is unsure (text it does not take): then convert and compare.
    func stateMatches(json text: String) throws(LuaError) -> Bool {
        try vm.call(self[.state], arguments: [.value(.string(text))]).first == .boolean(true)
    }

    /// The value at `path` in the state, converted.
    func value(at path: [LuaKey]) throws(LuaError) -> LuaValue {
        try vm.call(self[.valueAt], arguments: [.value(Self.list(path))]) { results throws(LuaError) in
            try results.value(1, root: LuaPath.render(root: "state", keys: path))
        }
    }

    /// A page of the keys of the table at `path` (nil: no table there).
    func slice(_ path: [LuaKey], offset: Int, limit: Int) throws(LuaError) -> StateSlice? {
        try vm.call(self[.peek], arguments: [
            .value(Self.list(path)), .value(.integer(Int64(max(0, offset)))), .value(.integer(Int64(max(0, limit)))),
        ]) { results throws(LuaError) -> StateSlice? in
            guard let count = results.integer(1) else { return nil }
            let keys = try results.value(2, root: "keys")
            let values = try results.value(3, root: "values")
            let tables = try results.value(4, root: "tables")
            var items: [StateSlice.Item] = []
            var position: Int64 = 1
            while let key = LuaKey(exactly: keys[.integer(position)]) {
                let value = values[.integer(position)]
                if tables[.integer(position)] == .boolean(true) {
                    items.append(StateSlice.Item(key: key, value: nil, size: value.integer.map(Int.init)))
                } else {
                    items.append(StateSlice.Item(key: key, value: value, size: nil))
                }
                position += 1
            }
            return StateSlice(path: path, count: Int(count), items: items, offset: max(0, offset))
        }
    }

    /// The places in the state where `text` is found, at most `limit`.
    func search(_ text: String, limit: Int) throws(LuaError) -> [StateMatch] {
        try vm.call(self[.search], arguments: [.value(.string(text)), .value(.integer(Int64(limit)))]) { results throws(LuaError) in
            let count = results.integer(1) ?? 0
            let paths = try results.value(2, root: "paths")
            let values = try results.value(3, root: "values")
            var matches: [StateMatch] = []
            for position in stride(from: Int64(1), through: count, by: 1) {
                var path: [LuaKey] = []
                var depth: Int64 = 1
                while let key = LuaKey(exactly: paths[.integer(position)][.integer(depth)]) {
                    path.append(key)
                    depth += 1
                }
                let value = values[.integer(position)]
                matches.append(StateMatch(path: path, value: value == .nil ? nil : value))
            }
            return matches
        }
    }

    private static func list(_ path: [LuaKey]) -> LuaValue {
        .table(LuaTable(array: path.map(\.value)))
    }

    // MARK: Readers and subscriptions

    /// Registers reader `id` (negative: a one-off evaluation) running `function` — over child store `child`'s
    /// state when given.
    func register(reader id: Int64, _ function: LuaReference, child: Int64? = nil) throws(LuaError) {
        var arguments: [LuaArgument] = [.value(.integer(id)), .reference(function)]
        if let child { arguments.append(.value(.integer(child))) }
        try vm.call(self[.register], arguments: arguments)
    }

    func unregister(reader id: Int64) { _ = try? vm.call(self[.unregister], arguments: [.value(.integer(id))]) }

    /// Runs reader `id` now; its value, converted (named `root` in errors).
    func evaluate(reader id: Int64, root: String) throws(LuaError) -> LuaValue {
        try vm.call(self[.evaluate], arguments: [.value(.integer(id))]) { results throws(LuaError) in
            try results.value(1, root: root)
        }
    }

    /// Runs reader `id` now; whether its value is truthy (a condition).
    func holds(reader id: Int64) throws(LuaError) -> Bool {
        try vm.call(self[.evaluate], arguments: [.value(.integer(id))]) { results throws(LuaError) in
            !(results.isNil(1) || results.boolean(1) == false)
        }
    }

    /// A selector of the value at `keys` in the state.
    func selector(at keys: [LuaKey]) throws(LuaError) -> LuaReference {
        guard let selector = try vm.callForReferences(self[.path], arguments: keys.map { .value($0.value) }).first ?? nil else {
            throw LuaError(.runtime, "the state runtime made no selector")
        }
        return selector
    }

    /// Runs the readers whose inputs changed (all of them when `everything`); what they gave.
    func flush(everything: Bool, readers: ReaderKinds) throws(LuaError) -> Flushed {
        try vm.call(self[.flush], arguments: [.value(.boolean(everything))]) { results throws(LuaError) in
            try Self.flushed(results, at: 1, readers: readers)
        }
    }

    /// Makes `function` the app's `subscriptions` (nil: none).
    func setSubscriptions(_ function: LuaReference?) throws(LuaError) {
        if let function {
            try vm.call(self[.register], arguments: [.value("subscriptions"), .reference(function)])
        } else {
            try vm.call(self[.unregister], arguments: [.value("subscriptions")])
        }
    }

    /// Runs `subscriptions`; what it returned, converted.
    func subscriptions() throws(LuaError) -> LuaValue {
        try vm.call(self[.subscriptions], arguments: [.value(true)]).first ?? .nil
    }

    // MARK: Child stores

    /// Gives child store `id` the state `initial` points at (what its `init` returned; nil: none).
    func setChild(_ id: Int64, state initial: LuaReference?) throws(LuaError) {
        try vm.call(self[.setChild], arguments: [.value(.integer(id)), initial.map(LuaArgument.reference) ?? .value(.nil)])
    }

    func removeChild(_ id: Int64) { _ = try? vm.call(self[.removeChild], arguments: [.value(.integer(id))]) }

    /// Child store `id`'s local state, converted.
    func childState(_ id: Int64) throws(LuaError) -> LuaValue {
        try vm.call(self[.childState], arguments: [.value(.integer(id))]).first ?? .nil
    }

    // MARK: The journal and the history

    /// Whether runs collect each action's changes.
    func setJournaling(_ on: Bool) { _ = try? vm.call(self[.setJournaling], arguments: [.value(.boolean(on))]) }

    /// What the last run's actions changed, as the barrier wrote it (`changes_record`, `CLuaState/changes.c`), read once.
    func encoded() throws(LuaError) -> EncodedJournal {
        let bytes = try vm.call(self[.encoded], arguments: []) { results throws(LuaError) in
            results.bytes(1, count: Int(results.integer(2) ?? 0)) ?? []
        }
        return EncodedJournal(bytes)
    }

    /// What the last transaction changed, read from its journal (O(changed)).
    func lastChanges() throws(LuaError) -> [StateChange] {
        try changes(from: .changes)[1] ?? []
    }

    /// What each action of the last run (or the single action last reduced) changed, by position.
    func collected() throws(LuaError) -> [Int64: [StateChange]] {
        try changes(from: .collected)
    }

    private func changes(from function: Function) throws(LuaError) -> [Int64: [StateChange]] {
        let list = try vm.call(self[function], arguments: []) { results throws(LuaError) -> LuaValue in
            (results.integer(1) ?? 0) == 0 ? .nil : try results.value(2, root: "state")
        }
        return Self.changes(fromCollected: list)
    }

    /// Keeps the newest `limit` committed entries in the history (0: none).
    func setHistory(limit: Int) { _ = try? vm.call(self[.setHistory], arguments: [.value(.integer(Int64(limit)))]) }

    func dropNewestHistory() { _ = try? vm.call(self[.dropNewestHistory], arguments: []) }

    func dropOldestHistory(_ count: Int) { _ = try? vm.call(self[.dropOldestHistory], arguments: [.value(.integer(Int64(count)))]) }

    /// Moves the state to just after the history's entry `index` (writing what the entries in between changed).
    func travel(to index: Int64) throws(LuaError) { try vm.call(self[.travel], arguments: [.value(.integer(index))]) }

    /// Forgets the history's entries after where the state is.
    func truncateHistory() { _ = try? vm.call(self[.truncateHistory], arguments: []) }

    // MARK: Reading results

    /// The journal records a run returned.
    private static func records(in results: LuaResults) -> EncodedJournal {
        EncodedJournal(results.bytes(RunResult.records, count: Int(results.integer(RunResult.recordsLength) ?? 0)) ?? [])
    }

    /// The commands a run returned (nil: none), converted — or why they cannot be: then each command is converted
    /// alone to find the first bad one, for its plugin's tag.
    private static func commands(in results: LuaResults) -> (LuaValue?, CommandsFailure?) {
        guard !results.isNil(RunResult.commands) else { return (nil, nil) }
        do throws(LuaError) {
            return (try results.value(RunResult.commands, root: "commands"), nil)
        } catch {
            var position: Int64 = 1
            while let command = try? results.value(RunResult.commands, at: position, root: "command"), command != .nil { position += 1 }
            return (nil, CommandsFailure(error: error, mount: results.string(RunResult.commands, at: position, field: "mount")))
        }
    }

    /// What the readers gave within a run.
    private static func runFlush(_ results: LuaResults, readers: ReaderKinds) throws(LuaError) -> RunFlush {
        let kind: LuaError.Kind = results.boolean(RunResult.flushTimedOut) == true ? .timeout : .runtime
        let failure = results.isNil(RunResult.flushFailure) ? nil
            : LuaError(kind, parsing: (try? results.value(RunResult.flushFailure, root: "error"))?.string ?? "the readers failed")
        return RunFlush(flushed: try flushed(results, at: RunResult.flushed, readers: readers),
                        settled: results.boolean(RunResult.settled) == true, failure: failure)
    }

    /// What readers gave, in the `FlushResult` layout starting at `first`; a reader no longer there is left out.
    private static func flushed(_ results: LuaResults, at first: Int32, readers: ReaderKinds) throws(LuaError) -> Flushed {
        var flushed = Flushed()
        let count = results.integer(first + FlushResult.count) ?? 0
        guard count > 0 else { return flushed }
        flushed.outcomes.reserveCapacity(Int(count))
        // Every value from one reader, none failed (a store's props, flushed after each action): its kind is
        // looked up once, and neither the ids nor the failures are read.
        var uniform: (id: Int64, kind: ReaderKind)?
        if let id = results.integer(first + FlushResult.uniform) {
            guard let kind = readers(id) else { return flushed }
            uniform = (id, kind)
        }
        for position in stride(from: Int64(1), through: count, by: 1) {
            let readerID: Int64, kind: ReaderKind
            if let uniform {
                (readerID, kind) = uniform
            } else {
                guard let id = results.integer(first + FlushResult.readers, at: position), let found = readers(id) else {
                    continue
                }
                (readerID, kind) = (id, found)
                if results.boolean(first + FlushResult.failed, at: position) == true {
                    let message = try results.value(first + FlushResult.values, at: position, root: "message")
                    flushed.outcomes.append(.failure(id: readerID, LuaError(.runtime, parsing: message.string ?? "\(message)")))
                    continue
                }
            }
            do throws(LuaError) {
                flushed.outcomes.append(.value(id: readerID, try results.value(first + FlushResult.values, at: position, root: kind.rootName)))
            } catch {
                flushed.outcomes.append(.failure(id: readerID, error))
            }
        }
        return flushed
    }
}
