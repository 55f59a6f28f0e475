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
    /// The state of `math.random`'s generator the journal last told of (an entry's, or where the store started):
    /// an entry after which the reducers left it elsewhere tells where (`JournalEntry.random`).
    var random: LuaRandomState?

    /// What the journal's entries told of the generator (`JournalEntry.random`), by entry, oldest first, while a
    /// history is kept: those time travel still reaches, and the last before them. (None told at or before an
    /// entry: the generator was where the store started it, `randomStart`.)
    private(set) var randomsTold: [(sequence: UInt64, random: LuaRandomState)] = []
    /// The generator's state where the store started (nil: as every VM starts it): a resumed store's, a replay's.
    var randomStart: LuaRandomState?

    /// Notes what entry `sequence` told of the generator, for time travel and the history's export.
    mutating func told(_ random: LuaRandomState?, at sequence: UInt64) {
        guard history.limit > 0, let random else { return }
        randomsTold.append((sequence, random))
        // (What time travel no longer reaches goes: all but the last told before the oldest entry kept.)
        if randomsTold.count > 64, let oldest = history.sequences.first {
            let before = randomsTold.lastIndex { $0.sequence < oldest } ?? 0
            if before > 32 { randomsTold.removeFirst(before) }
        }
    }

    /// Forgets what entries after `sequence` told (time travel went on from an earlier entry).
    mutating func dropRandoms(after sequence: UInt64) {
        randomsTold.removeAll { $0.sequence > sequence }
    }

    /// The generator's state just after entry `sequence` (nil: as every VM starts it), as far as the journal told.
    func random(after sequence: UInt64) -> LuaRandomState? {
        randomsTold.last { $0.sequence <= sequence }?.random ?? randomStart
    }

    /// The generator's state `now`, when it differs from what the journal last told (before anything, `start`:
    /// where the VM started it): the journal tells it from the next entry on.
    mutating func randomMoved(to now: LuaRandomState?, start: LuaRandomState?) -> LuaRandomState? {
        guard let now, now != (random ?? start) else { return nil }
        random = now
        return now
    }

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
