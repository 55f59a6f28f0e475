import LuaKit

// A durable store (`ScriptedStoreOptions.persistence`): the journal goes to the database as it goes to a
// recording; a snapshot of the whole state now and then (every `snapshotInterval` entries, after a reload, after
// a rewind), so that resuming reads the latest snapshot and the entries after it.
extension ScriptEngine {
    /// After the journal up to its last sequence number was handed over: waits until it is durable (`.full`), and makes
    /// a failure to write the store's: this action and every later one are refused.
    func persisted() throws(LuaError) {
        guard let persistence = journal.listeners.persistence else { return }
        do {
            try persistence.waitUntilDurable(through: journal.sequence)
        } catch {
            journal.persistenceFailed(error)
            throw LuaError(.runtime, "the store's database could not be written (\(error)); the store accepts no more actions")
        }
    }

    /// Refuses an action once the database could not be written: nothing is acknowledged that is not kept.
    func refuseWithoutPersistence() throws(LuaError) {
        guard let persistenceFailure = journal.persistenceFailure else { return }
        throw LuaError(.runtime, "the store accepts no more actions: its database could not be written (\(persistenceFailure))")
    }

    /// Takes a snapshot when `snapshotInterval` entries were written since the last one.
    func snapshotIfDue() {
        if journal.snapshotDue { snapshotForPersistence() }
    }

    /// Hands the database the whole state, as of the last journal entry (converted here, on the store's thread:
    /// O(state), once every `snapshotInterval` entries; encoded and written on the database's).
    func snapshotForPersistence() {
        guard let persistence = journal.listeners.persistence, journal.persistenceFailure == nil else { return }
        do {
            persistence.recorder.snapshot(app: app.folder.lastPathComponent, journalStart(state: try state()))
            journal.snapshotted()
        } catch {
            report(ScriptFailure(stage: .reduce, error: LuaError(.runtime, "the state could not be snapshotted for the database: \(error.message)")))
        }
    }

    /// Starts persisting: resumes after what the database holds — running `migrate` first when the app's
    /// schema version grew since it was written (then a snapshot holds the migrated state) — or, for a new
    /// database, writes the initial state as its first snapshot.
    func startPersisting(_ persistence: any StatePersistence) throws(ScriptFailure) {
        changeListeners { $0.persistence = persistence }
        guard let resumed = persistence.resumed else {
            persistence.recorder.start(app: app.folder.lastPathComponent, journalStart(state: try convertedState()))
            return
        }
        journal.resume(at: resumed.sequence)
        for action in resumed.clientActions { journal.clientActions.append(action) }
        // (The generator as the reducers left it: the store draws on from there, as the first run did.)
        vm.randomState = resumed.random ?? vm.startingRandomState
        journal.random = resumed.random
        journal.randomStart = resumed.random
        if resumed.schemaVersion > app.schemaVersion {
            throw ScriptFailure(stage: .migrate, error: LuaError(
                .runtime, "the store's database was written by schemaVersion \(resumed.schemaVersion), newer than this app's \(app.schemaVersion): run the newer app (the database is left as it is)",
                chunkName: app.main))
        }
        // (A mount the resumed state had no slice for got its init as the engine started: the database needs
        // a snapshot with it, as after a migration.)
        let grew = resumed.schemaVersion < app.schemaVersion
        guard grew || mounts.placedSlices else {
            persistence.recorder.resume(after: resumed.sequence, time: resumed.time)
            return
        }
        if grew {
            guard app.ownMigrate != nil, let migrate = app.migrate else {
                throw ScriptFailure(stage: .migrate, error: LuaError(
                    .runtime, "the store's database holds schemaVersion \(resumed.schemaVersion) and the app's is \(app.schemaVersion), but \(app.main) has no 'migrate'",
                    chunkName: app.main))
            }
            do {
                try vm.withTimeBudget(atLeast: vm.limits.stateBuildingTimeBudget) { () throws(LuaError) in
                    try runtime.transform(with: migrate, fromSchema: resumed.schemaVersion)
                }
            } catch {
                undoLastTransaction()
                throw ScriptFailure(stage: .migrate, error: located(error, returnedBy: migrate)) // (what it returned: at its `function`)
            }
            // The migrated state's props, before the database holds it: once it does, the app that wrote it can no
            // longer open it — a migration whose props fail is undone, as a reload's is, and the database is left
            // as it is.
            do {
                try checkProps(app.props)
            } catch {
                rollBack(committed: true)
                var failed = error
                failed.message = "props fail on the state `migrate` made (the database is left as it is, at schemaVersion "
                    + "\(resumed.schemaVersion)): \(error.message)"
                throw ScriptFailure(stage: .props, error: failed)
            }
        }
        persistence.recorder.start(app: app.folder.lastPathComponent, journalStart(state: try convertedState()))
        journal.snapshotted()
    }

    private func convertedState() throws(ScriptFailure) -> LuaValue {
        do {
            return try state()
        } catch {
            throw ScriptFailure(stage: .initialize, error: error)
        }
    }
}
