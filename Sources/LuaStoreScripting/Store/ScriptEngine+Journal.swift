import Dispatch
import Foundation
import LuaKit
import LuaStoreCore

/// The session journal: entries for what the store did, made from what the barrier wrote, handed to whoever hears
/// the journal (the recorder, `journal`, journal streams, the history, `send`).
extension ScriptEngine {
    /// Journal entries for `actions`, committed at run positions `first`, `first + 1`, …, from the records the
    /// barrier wrote (`records`, read with the run's results; else `encodedJournal`); changes it left to Swift are
    /// read from the runtime's list.
    /// `commands`: what the action at that position returned; `duration`: each action's share of the time. The
    /// recorder takes the run as it is (its writer makes the entries); entries are made here only for whoever
    /// else hears the journal, or when the barrier left changes to Swift.
    func journalCommitted(_ actions: ArraySlice<LuaValue>, origin: JournalEntry.Origin, from first: Int64,
                          records: EncodedJournal? = nil, commands: (position: Int64, [ScriptEffect])? = nil,
                          duration: Duration = .zero, snapshotting: Bool = true) throws(LuaError) {
        let encoded = if let records { records } else { try runtime.encoded() }
        let converted = encoded.isWritten ? nil : try runtime.collected()
        var run = JournalRun(firstSequence: journal.advance(by: actions.count), actions: actions, origin: origin, firstPosition: first,
                             encoded: encoded, converted: converted, commands: commands, duration: duration, scripts: app.digest,
                             time: vm.clockMillis)
        // (Each action that moved `math.random`'s generator has the barrier's record of where; where the run ended
        // on a failure, the generator holds that action's draws too, which its own entry tells.)
        if snapshotting {
            run.random = journal.randomMoved(to: vm.randomState, start: vm.startingRandomState)
        } else if let told = run.lastRandomRecorded {
            journal.random = told
        }
        journal.listeners.recorder?.append(run: run)
        journal.listeners.persistence?.recorder.append(run: run)
        // (Not while a failed action's writes are still in the state: `snapshotting` false, the caller snapshots
        // once they are undone.)
        defer { if snapshotting { snapshotIfDue() } }
        try persisted()
        guard journal.wantsEntries else { return }
        run.forEachEntry { entry in deliver(entry, kept: true, recorded: true) }
    }

    /// Hands a journal entry to whoever hears the journal. `kept`: the runtime kept a history entry for it
    /// (a committed action, a migration); by default, whether it did not fail.
    func record(_ event: JournalEntry.Event, origin: JournalEntry.Origin, changes: [StateChange], failure: ScriptFailure?,
                kept: Bool? = nil, duration: Duration = .zero) {
        var entry = JournalEntry(sequence: journal.advance(), event: event, origin: origin, changes: changes, failure: failure,
                                 scripts: app.digest)
        entry.duration = duration
        entry.time = vm.clockMillis
        entry.random = journal.randomMoved(to: vm.randomState, start: vm.startingRandomState)
        deliver(entry, kept: kept ?? (failure == nil))
    }

    /// What a recording's header holds for `state`, the state as of the last entry.
    func journalStart(state: LuaValue) -> JournalStart {
        var start = JournalStart(state: state, scripts: app.digest, schemaVersion: app.schemaVersion, sequence: journal.sequence,
                                 time: vm.clockMillis, clock: clock.recorded)
        start.clientActions = journal.clientActions.all
        start.random = vm.randomState.flatMap { $0 == vm.startingRandomState ? nil : $0 }
        return start
    }

    /// Hands `entry` (the next in sequence) to whoever hears the journal; `kept`: as for `record`; `recorded`: the
    /// recorder has it already (in its run).
    func deliver(_ entry: JournalEntry, kept: Bool, recorded: Bool = false) {
        if journal.history.limit > 0, kept { keepInHistory(entry.sequence, changeCount: entry.changeCount, time: entry.time) }
        journal.told(entry.random, at: entry.sequence)
        journal.hear(entry, recorded: recorded)
        if case .reload = entry.event { snapshotForPersistence() } // (a migration's changes are not in its entry)
    }

    /// What the last transaction changed, read from its journal by the runtime (O(changed)).
    func lastChanges() throws(LuaError) -> [StateChange] { try runtime.lastChanges() }
}
