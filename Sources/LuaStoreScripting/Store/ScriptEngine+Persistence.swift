import LuaKit

// A durable store (`ScriptedStoreOptions.persistence`): the journal goes to the database as it goes to a
// recording; a snapshot of the whole state now and then (every `snapshotInterval` entries, after a reload, after
// a rewind), so that resuming reads the latest snapshot and the entries after it.
extension ScriptEngine {
    /// After the journal up to `journalSequence` was handed over: waits until it is durable (`.full`), and makes
    /// a failure to write the store's: this action and every later one are refused.
    func persisted() throws(LuaError) {
        guard let persistence = listeners.persistence else { return }
        do {
            try persistence.waitUntilDurable(through: journalSequence)
        } catch {
            persistenceFailure = error
            throw LuaError(.runtime, "the store's database could not be written (\(error)); the store accepts no more actions")
        }
    }

    /// Refuses an action once the database could not be written: nothing is acknowledged that is not kept.
    func refuseWithoutPersistence() throws(LuaError) {
        guard let persistenceFailure else { return }
        throw LuaError(.runtime, "the store accepts no more actions: its database could not be written (\(persistenceFailure))")
    }

    /// Takes a snapshot when `snapshotInterval` entries were written since the last one.
    func snapshotIfDue() {
        guard let persistence = listeners.persistence, journalSequence - snapshotSequence >= persistence.snapshotInterval else { return }
        snapshotForPersistence()
    }

    /// Hands the database the whole state, as of the last journal entry (converted here, on the store's thread:
    /// O(state), once every `snapshotInterval` entries; encoded and written on the database's).
    func snapshotForPersistence() {
        guard let persistence = listeners.persistence, persistenceFailure == nil else { return }
        do {
            persistence.recorder.snapshot(app: folder.lastPathComponent, (try state(), app.digest, app.schemaVersion, journalSequence))
            snapshotSequence = journalSequence
        } catch {
            report(ScriptFailure(stage: .reduce, error: LuaError(.runtime, "the state could not be snapshotted for the database: \(error.message)")))
        }
    }

    /// Starts persisting: resumes after what the database holds — running `migrate` first when the app's
    /// schema version grew since it was written (then a snapshot holds the migrated state) — or, for a new
    /// database, writes the initial state as its first snapshot.
    func startPersisting(_ persistence: any StatePersistence) throws(ScriptFailure) {
        listeners.persistence = persistence
        guard let resumed = persistence.resumed else {
            persistence.recorder.start(app: folder.lastPathComponent, (try convertedState(), app.digest, app.schemaVersion, journalSequence))
            return
        }
        journalSequence = resumed.sequence
        snapshotSequence = resumed.sequence
        if resumed.schemaVersion > app.schemaVersion {
            throw ScriptFailure(stage: .migrate, error: LuaError(
                .runtime, "the store's database was written by schemaVersion \(resumed.schemaVersion), newer than this app's \(app.schemaVersion): run the newer app (the database is left as it is)",
                chunkName: main))
        }
        // (A mount the resumed state had no slice for got its init as the engine started: the database needs
        // a snapshot with it, as after a migration.)
        let grew = resumed.schemaVersion < app.schemaVersion
        guard grew || mountOptions.placedSlices else {
            persistence.recorder.resume(after: resumed.sequence)
            return
        }
        if grew {
            guard app.ownMigrate != nil, let migrate = app.migrate else {
                throw ScriptFailure(stage: .migrate, error: LuaError(
                    .runtime, "the store's database holds schemaVersion \(resumed.schemaVersion) and the app's is \(app.schemaVersion), but \(main) has no 'migrate'",
                    chunkName: main))
            }
            do {
                try vm.withTimeBudget(atLeast: vm.limits.stateBuildingTimeBudget) { () throws(LuaError) in
                    try vm.call(runtime[.transform], arguments: [.reference(migrate), .value(.integer(resumed.schemaVersion))])
                }
            } catch {
                undoLastTransaction()
                throw ScriptFailure(stage: .migrate, error: error)
            }
        }
        persistence.recorder.start(app: folder.lastPathComponent, (try convertedState(), app.digest, app.schemaVersion, journalSequence))
        snapshotSequence = journalSequence
    }

    private func convertedState() throws(ScriptFailure) -> LuaValue {
        do {
            return try state()
        } catch {
            throw ScriptFailure(stage: .initialize, error: error)
        }
    }
}
