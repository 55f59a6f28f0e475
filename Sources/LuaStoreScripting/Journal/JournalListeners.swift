import LuaKit
import Synchronization

/// Who hears a scripted store's journal: the `journal` closure, the session recorder, a durable store's recorder,
/// the journal streams, and the sends waiting for their actions' entries. (The history, which keeps entries of its
/// own, is `History`.) While any of them listens, runs collect each action's changes. On the engine's thread.
struct JournalListeners {
    /// Hears every entry (`ScriptedStoreOptions.journal`).
    var journal: (@Sendable (JournalEntry) -> Void)?
    /// Records the journal (`ScriptedStoreOptions.recorder`): takes runs as the barrier wrote them.
    var recorder: SessionRecorder?
    /// Keeps the state across launches (`ScriptedStoreOptions.persistence`): hears the journal as the recorder
    /// does, and gets a snapshot every `snapshotInterval` entries (`ScriptEngine+Persistence.swift`).
    var persistence: (any StatePersistence)?
    /// The actions `ScriptedStore.send` and `submit` put in line that are not yet answered (their entries are
    /// wanted). Counted from any thread; read here.
    var sends = WaitingSends()
    /// The last entry made while a send waited (what `send` returns for its action, read right after it was reduced).
    private(set) var lastEntry: JournalEntry?
    private var streams: [Int: AsyncStream<JournalEntry>.Continuation] = [:]
    private var lastStreamID = 0

    /// Whether anyone listens (runs then collect each action's changes).
    var listening: Bool { recorder != nil || persistence != nil || wantsEntries }

    /// Whether anyone takes entries one by one (the recorders take a run whole).
    var wantsEntries: Bool { journal != nil || !streams.isEmpty || sends.any }

    /// Adds a stream (`ScriptedStore.journalEntries`); its ID, to remove it.
    mutating func addStream(_ continuation: AsyncStream<JournalEntry>.Continuation) -> Int {
        lastStreamID += 1
        streams[lastStreamID] = continuation
        return lastStreamID
    }

    mutating func removeStream(_ id: Int) { streams[id] = nil }

    /// Hands `entry` to every listener; to the recorders too unless `recorded` (they have it in their run).
    mutating func hear(_ entry: JournalEntry, recorded: Bool) {
        if !recorded {
            recorder?.append(entry)
            persistence?.recorder.append(entry)
        }
        if sends.any { lastEntry = entry }
        journal?(entry)
        for continuation in streams.values { continuation.yield(entry) }
    }
}

/// How many actions sent (`ScriptedStore.send`, `submit`) are not yet answered: counted up on the sender's thread
/// before its action is put in line — the store's thread, which takes the action after that, sees the count — and
/// down on the store's thread once it is answered. While any waits, each action's entry is made and kept
/// (`JournalListeners.lastEntry`); the engine looks at the count before it reduces an action on its own
/// (`ScriptEngine.reduce(_:source:timed:)`), so a send needs no turn of the store's thread of its own.
final class WaitingSends: Sendable {
    private let count = Atomic<Int>(0)

    /// An action is about to be sent.
    func begin() { count.add(1, ordering: .relaxed) }

    /// A sent action was answered.
    func end() { count.subtract(1, ordering: .relaxed) }

    /// Whether any sent action is not yet answered.
    var any: Bool { count.load(ordering: .relaxed) > 0 }
}

/// The child stores' modules, by the ID their store knows them by. On the engine's thread.
struct ChildTable {
    private(set) var modules: [Int64: ScriptEngine.ChildModule] = [:]
    private var lastID: Int64 = 0

    /// Adds `module`; its ID.
    mutating func add(_ module: ScriptEngine.ChildModule) -> Int64 {
        lastID += 1
        modules[lastID] = module
        return lastID
    }

    subscript(id: Int64) -> ScriptEngine.ChildModule? { modules[id] }

    mutating func remove(_ id: Int64) { modules[id] = nil }

    /// Puts the reloaded modules in place of the running ones (the same IDs).
    mutating func replace(with reloaded: [Int64: ScriptEngine.ChildModule]) { modules = reloaded }
}
