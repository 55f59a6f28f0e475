import LuaKit
import LuaStoreCore

// Time travel: the runtime keeps, for each committed entry, what it changed with the values before and after
// (`state_journal.lua`, "History"); going to a point writes those, so no reducer or effect runs again. What is
// kept and where the state stands is the journal's `History`; this tells the runtime.
extension ScriptEngine {
    /// Keeps the newest `entries` committed entries (0: none), within about `bytes`.
    func setHistory(entries: Int, bytes: Int = .max) {
        let dropped = journal.history.setLimits(entries: entries, bytes: bytes)
        updateCollecting()
        runtime.setHistory(limit: journal.history.limit)
        dropOldestInRuntime(dropped)
    }

    /// Notes the entry the runtime kept for journal entry `sequence`, then keeps the history within its bounds.
    func keepInHistory(_ sequence: UInt64, changeCount: Int, time: Int64) {
        dropOldestInRuntime(journal.history.keep(sequence, changeCount: changeCount, time: time))
    }

    /// Drops the runtime's `count` oldest entries (beyond the number it keeps by itself: for the bytes).
    private func dropOldestInRuntime(_ count: Int) {
        if count > 0 { runtime.dropOldestHistory(count) }
    }

    /// The sequence of the entry the state is at (the newest kept, unless traveling).
    var historyPosition: UInt64? { journal.history.position }

    /// Where the runtime's cursor goes for "just after entry `sequence`".
    func historyIndex(for sequence: UInt64) throws(ScriptFailure) -> Int64 {
        try journal.history.index(for: sequence, newest: journal.sequence)
    }

    func travel(to index: Int64) throws(ScriptFailure) {
        do {
            try runtime.travel(to: index)
        } catch {
            throw ScriptFailure(stage: .reduce, error: error)
        }
        subscriptions.markDirty()
    }

    func jump(to sequence: UInt64) throws(ScriptFailure) {
        let index = try historyIndex(for: sequence)
        if !journal.history.traveling { journal.history.timeBeforeTravel = vm.clockMillis }
        try travel(to: index)
        journal.history.traveled(to: index, sequence: sequence)
        // (The props show what the user saw then: the state, and the time it was seen at.)
        if let time = journal.history.time(at: sequence) { vm.clockMillis = time }
        flush()
    }

    /// Back to the newest state; returns the held actions, each with its source (for the store to reduce, in
    /// order: `RootStore.reinstate(_:)`).
    func resume() -> [(action: LuaValue, source: ActionSource)] {
        if journal.history.traveling {
            try? travel(to: journal.history.newestIndex) // (the newest entry is always kept)
            journal.history.returned()
            vm.clockMillis = journal.history.timeBeforeTravel
            flush()
        }
        return journal.history.takeHeld()
    }

    /// Goes on from entry `sequence`: later entries are dropped. Returns the held actions.
    func rewind(to sequence: UInt64) throws(ScriptFailure) -> [(action: LuaValue, source: ActionSource)] {
        let index = try historyIndex(for: sequence)
        try travel(to: index)
        if let time = journal.history.time(at: sequence) { vm.clockMillis = time }
        runtime.truncateHistory()
        journal.history.truncate(after: index)
        journal.clientActions.drop(after: sequence) // (their actions no longer lead to this state)
        // (The generator as the reducers left it just after `sequence`: the store draws on from there.)
        journal.dropRandoms(after: sequence)
        vm.randomState = journal.random(after: sequence) ?? vm.startingRandomState
        journal.random = journal.random(after: sequence)
        try? runtime.markAllDirty()
        snapshotForPersistence() // (the journal's later entries no longer lead to this state)
        flush()
        return journal.history.takeHeld()
    }

    /// The state just after entry `sequence`, converted; the state is put back where it was.
    func state(at sequence: UInt64) throws(ScriptFailure) -> LuaValue {
        try withState(at: sequence) { () throws(LuaError) in try state() }
    }
}
