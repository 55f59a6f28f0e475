import LuaKit

/// The journal's bookkeeping, a part of the engine (`ScriptEngine.journal`): who hears it, whether runs collect
/// each action's changes for it, the sequence numbers handed out and snapshotted, why a durable store stopped
/// taking actions, whether the last reload migrated, and the history time travel keeps. The engine makes the
/// entries and tells the runtime (`ScriptEngine+Journal.swift`, `+Persistence`, `+History`).
struct Journaling {
    /// Who hears the journal; changed through `changeListeners`.
    private(set) var listeners = JournalListeners()
    /// Whether runs collect each action's changes (anyone hears the journal, or the history keeps entries).
    private(set) var collecting = false
    /// The sequence number of the last entry.
    private(set) var sequence: UInt64 = 0
    /// The sequence number the last snapshot for the durable store was taken at.
    private(set) var snapshotSequence: UInt64 = 0
    /// Why the durable store could not write: every later action is refused.
    private(set) var persistenceFailure: PersistenceFailure?
    /// Whether the last successful reload ran a migration (its transaction is the last one).
    var migrated = false
    /// Time travel's entries.
    var history = History()
    /// The latest actions sent with an id.
    var clientActions = RecentClientActions(capacity: 10_000)

    /// Changes who hears the journal; `body`'s result.
    mutating func changeListeners<T>(_ body: (inout JournalListeners) -> T) -> T {
        body(&listeners)
    }

    /// Whether runs must now collect changes, when that differs from what they do (the runtime is to be told).
    mutating func collectingChanged() -> Bool? {
        let wanted = listeners.listening || history.limit > 0
        guard wanted != collecting else { return nil }
        collecting = wanted
        return wanted
    }

    /// Whether anyone takes entries one by one, or the history keeps them.
    var wantsEntries: Bool { listeners.wantsEntries || history.limit > 0 }

    /// Hands out `count` sequence numbers; the first.
    mutating func advance(by count: Int = 1) -> UInt64 {
        defer { sequence += UInt64(count) }
        return sequence + 1
    }

    /// Goes on from what a durable store holds: entries up to `sequence`, snapshotted there.
    mutating func resume(at sequence: UInt64) {
        self.sequence = sequence
        snapshotSequence = sequence
    }

    /// Hands `entry` to every listener; to the recorders too unless `recorded` (they have it in their run).
    mutating func hear(_ entry: JournalEntry, recorded: Bool) {
        listeners.hear(entry, recorded: recorded)
    }

    /// Whether a durable store is due a snapshot (`snapshotInterval` entries since the last).
    var snapshotDue: Bool {
        guard let persistence = listeners.persistence else { return false }
        return sequence - snapshotSequence >= persistence.snapshotInterval
    }

    /// A snapshot was taken as of the last entry.
    mutating func snapshotted() { snapshotSequence = sequence }

    /// The durable store could not write: from now on every action is refused.
    mutating func persistenceFailed(_ failure: PersistenceFailure) { persistenceFailure = failure }
}
