import Foundation
import LuaKit

/// Keeps a scripted store's state across launches (`ScriptedStoreOptions.persistence`; `LuaStorePersistence`'s
/// `StoreDatabase` is the one there is). The store hands it the session journal through `recorder` — what each
/// action changed, never the whole state — and, now and then, a snapshot; it starts from `resumed`, without
/// running `init` or any reducer.
public protocol StatePersistence: AnyObject, Sendable {
    /// What the store resumes from: the state kept, with the scripts' schema version it was written under and the
    /// sequence number of its last journal entry; nil for a new store (`init` runs).
    var resumed: PersistedStart? { get }
    /// Where the journal goes (its headers are the snapshots).
    var recorder: SessionRecorder { get }
    /// Whether each action must be durable before the store goes on (`.full`): then actions are reduced one at
    /// a time and `waitUntilDurable` waits.
    var waitsForEachAction: Bool { get }
    /// A snapshot is due once this many entries were written since the last one.
    var snapshotInterval: UInt64 { get }
    /// On the store's thread, after the journal up to `sequence` was handed to `recorder`: returns once it is
    /// durable (`waitsForEachAction`), or at once; throws when writing failed — the store then refuses every
    /// later action (it never acknowledges what it could not write).
    func waitUntilDurable(through sequence: UInt64) throws(PersistenceFailure)
    /// What it holds now (the devtools show it).
    var status: PersistenceStatus { get }
}

/// What a durable store's database holds now (`StatePersistence.status`, the devtools' `/api/persistence`).
public struct PersistenceStatus: Sendable, Equatable {
    /// The file.
    public var path: String
    /// `full` or `batch`.
    public var durability: String
    /// Its size on disk (the file and its write-ahead log).
    public var bytes: Int64
    /// The sequence number of the last entry committed.
    public var sequence: UInt64
    /// When the last commit happened (nil: none since it was opened).
    public var committed: Date?
    /// Why writing failed, if it did (the store then accepts no more actions).
    public var failure: String?

    /// The status of the database at `path`, from what it holds now.
    public init(path: String, durability: String, bytes: Int64, sequence: UInt64, committed: Date?, failure: String?) {
        self.path = path
        self.durability = durability
        self.bytes = bytes
        self.sequence = sequence
        self.committed = committed
        self.failure = failure
    }
}

/// The state a durable store resumes from (`StatePersistence.resumed`).
public struct PersistedStart: Sendable {
    /// The state (`.nil` when `text` holds it).
    public var state: LuaValue
    /// The state as the database holds it — its snapshot's text and the changes of the entries after it — for
    /// the store to read in its VM (nil when `state` holds it).
    public var text: PersistedText?
    /// The app's `schemaVersion` when it was written: `migrate` runs if the app's is now greater.
    public var schemaVersion: Int64
    /// The digest of the scripts that wrote it.
    public var scripts: String
    /// The sequence number of the last journal entry it includes.
    public var sequence: UInt64
    /// The time of that entry, in milliseconds since 1970-01-01 UTC (the clock goes on from it).
    public var time: Int64
    /// The store's clock as it was recorded: when the store first started (`os.clock()` counts from it).
    public var clock: RecordedClock
    /// The latest actions sent with an id that it includes, oldest first (its snapshot's and its entries').
    public var clientActions: [ClientAction] = []
    /// The state of `math.random`'s generator after its last entry (nil: as every VM starts it): the store draws on
    /// from there, so a resumed store never draws again what it drew before.
    public var random: LuaRandomState?

    /// The state, decoded from `text` where that holds it; why not, in words.
    public func decodedState() throws(PersistenceFailure) -> LuaValue {
        guard let text else { return state }
        return try text.decoded()
    }

    /// A start from the state kept (`state`, or `text`) and what it was written under; `clientActions` starts empty.
    public init(state: LuaValue, text: PersistedText? = nil, schemaVersion: Int64, scripts: String, sequence: UInt64, time: Int64 = 0,
                clock: RecordedClock = RecordedClock(started: 0)) {
        self.state = state
        self.text = text
        self.schemaVersion = schemaVersion
        self.scripts = scripts
        self.sequence = sequence
        self.time = time
        self.clock = clock
    }
}

/// A durable store's state as its database holds it: the text of its last snapshot's state and the `changes` of
/// each entry after it (`PersistedStart.text`). The store reads it in its VM, in C, without converting anything
/// (jsonread.c); where that reader does not take it, the store decodes it here (`decoded()`), which names what is
/// wrong.
public struct PersistedText: Sendable {
    /// The `changes` list of one journal entry, as written.
    public struct Changes: Sendable {
        /// The sequence number of the entry.
        public var sequence: UInt64
        /// The entry's `changes` list, as JSON (docs/recordings.md).
        public var text: String

        /// The `changes` text of entry `sequence`.
        public init(sequence: UInt64, text: String) {
            self.sequence = sequence
            self.text = text
        }
    }

    /// The database, for messages.
    public var path: String
    /// The snapshot's state (JSON, docs/recordings.md).
    public var state: String
    /// The changes of the entries after the snapshot, in order.
    public var changes: [Changes]

    /// The state of the database at `path`: its snapshot's `state` and the `changes` after it, in order.
    public init(path: String, state: String, changes: [Changes]) {
        self.path = path
        self.state = state
        self.changes = changes
    }

    /// The state with every change applied, decoded in Swift; why not, in words, naming the entry.
    public func decoded() throws(PersistenceFailure) -> LuaValue {
        var value: LuaValue
        do {
            value = try RecordingJSON.decode(text: state[...])
        } catch {
            throw PersistenceFailure(path: path, reason: "is damaged: its snapshot's state: \(error); it was left as it is")
        }
        for entry in changes {
            let read: [StateChange]
            do {
                read = try RecordingLine.changes(from: RecordingJSON.Value(parsing: entry.text[...]))
            } catch {
                throw PersistenceFailure(path: path, reason: "is damaged at entry \(entry.sequence): \(error); it was left as it is")
            }
            for change in read {
                if let blocked = value.firstNonTable(along: change.path) {
                    throw PersistenceFailure(path: path, reason: "is damaged at entry \(entry.sequence): its change of \(LuaPath.render(root: "state", keys: change.path)) goes through \(LuaPath.render(root: "state", keys: blocked)), which is not a table; it was left as it is")
                }
                value.apply(change)
            }
        }
        return value
    }
}

/// Why a durable store's database could not be read or written, in words (which file, what is wrong, what to do).
public struct PersistenceFailure: Error, CustomStringConvertible, Sendable {
    /// The database's file.
    public let path: String
    /// What is wrong and, where it helps, what to do; worded to follow `path`.
    public let reason: String
    public var description: String { "\(path): \(reason)" }

    /// A failure of the database at `path`, for `reason`.
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
}

extension LuaValue {
    /// The first place along `path` — short of its last key — that does not hold a table (nil when every one does,
    /// so that a change at `path` can be applied).
    func firstNonTable(along path: [LuaKey]) -> [LuaKey]? {
        var here = self
        for depth in 0..<max(0, path.count - 1) {
            guard case .table = here else { return Array(path[..<depth]) }
            here = here[path[depth]]
        }
        guard path.isEmpty || here.table != nil else { return Array(path.dropLast()) }
        return nil
    }

    /// Applies a journal change: the value at its path becomes its value (removed when nil; the whole state for
    /// an empty path).
    public mutating func apply(_ change: StateChange) {
        Self.set(change.value ?? .nil, at: change.path[...], in: &self)
    }

    private static func set(_ value: LuaValue, at path: ArraySlice<LuaKey>, in state: inout LuaValue) {
        guard let key = path.first else {
            state = value
            return
        }
        if path.count == 1 {
            state[key] = value
        } else {
            var child = state[key]
            // A placeholder, so that `child` is the only reference and is changed in place (not nil: removing an
            // element of the sequence would move every later one).
            state[key] = .boolean(false)
            set(value, at: path.dropFirst(), in: &child)
            state[key] = child
        }
    }
}
