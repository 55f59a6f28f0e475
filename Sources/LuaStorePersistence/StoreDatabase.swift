import Foundation
import GRDB
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

#if canImport(Glibc)
import Glibc
#endif

/// When an action counts as kept (`StoreDatabase.Durability`).
public enum Durability: String, Sendable, CaseIterable {
    /// Each action is committed and synced to the disk before the store goes on (its props, `send`'s answer):
    /// after a crash, even of the machine, nothing acknowledged is lost. Costs a disk sync per action.
    case full
    /// Actions are committed in groups, as fast as the disk takes them, while the store goes on: a crash of the
    /// process loses at most the actions not yet handed to SQLite (what the store did in the last few
    /// milliseconds); a crash of the machine, also the last commits not yet synced.
    case batch
}

/// A durable store's database (`ScriptedStoreOptions.persistence`, `luastore run --persist FILE`): one SQLite file
/// (WAL mode) holding the session journal as it happened — each entry as the line a recording would hold (what
/// the action changed, O(changed)) — and snapshots of the whole state, the latest of which supersedes every entry
/// before it. Opening it reads the latest snapshot and applies the entries after it, without running any reducer.
///
/// Nothing it did not write is ever modified: a file that is not a LuaStore store, one of another app, one written
/// by a newer format, or a damaged one is refused in words before anything is written, and a second process
/// opening the same file is refused while the first holds it.
public final class StoreDatabase: StatePersistence, Sendable {
    /// The file format this version reads and writes (the `luastore` table's `version`).
    public static let formatVersion: Int64 = 1
    /// How many entries make a snapshot due, by default.
    public static let defaultSnapshotInterval: UInt64 = 10_000
    /// How many pages the write-ahead log holds before a burst is checkpointed in its middle, by default: 4,096
    /// (16 MiB at the 4 KiB pages of a new store).
    public static let defaultLogLimitPages = 4_096

    /// The SQLite file's path, as given.
    public let path: String
    /// When an action counts as kept: synced one by one (`full`) or committed in groups (`batch`).
    public let durability: Durability
    public let snapshotInterval: UInt64
    public let resumed: PersistedStart?
    /// What opening it with `recover` dropped of a damaged log, in words (nil: nothing).
    public let recovered: String?
    public let recorder: SessionRecorder
    public var waitsForEachAction: Bool { durability == .full }
    private let writer: StoreWriter

    /// Opens (or creates) the store database at `path` for `app` (its folder's name). `reset`: an existing store
    /// of this or another app starts over, empty (a file that is not a store is still refused). A log a crash left
    /// damaged, with committed transactions past the damage, is refused unless `recover` (then what comes before
    /// the damage is kept, and `recovered` says what was dropped).
    ///
    /// `logLimitPages` bounds the write-ahead log: a burst that writes more without a pause is checkpointed in its
    /// middle (else the log is copied into the file in the first pause). A large log keeps a long burst from
    /// waiting on checkpoints; a small one is written over in place sooner — writing into new space of a file
    /// costs the system more than writing over pages it holds — and keeps many open stores' logs small (`serve`
    /// gives each store 256 pages, 1 MiB).
    public init(path: String, app: String, durability: Durability = .batch,
                snapshotInterval: UInt64 = StoreDatabase.defaultSnapshotInterval,
                logLimitPages: Int = StoreDatabase.defaultLogLimitPages, reset: Bool = false,
                recover: Bool = false) throws(PersistenceFailure) {
        self.path = path
        self.durability = durability
        self.snapshotInterval = max(1, snapshotInterval)
        let writer = try StoreWriter(path: path, app: app, durability: durability, logLimitPages: logLimitPages, reset: reset,
                                     recover: recover)
        recovered = writer.droppedLog
        self.writer = writer
        resumed = try writer.resume()
        recorder = SessionRecorder(output: writer)
    }

    public func waitUntilDurable(through sequence: UInt64) throws(PersistenceFailure) {
        try writer.wait(through: durability == .full ? sequence : nil)
    }

    /// Waits until the journal through `sequence` is committed, whatever the durability (throws if writing failed).
    public func waitUntilCommitted(through sequence: UInt64) throws(PersistenceFailure) {
        try writer.wait(through: sequence)
    }

    /// The bytes the database's pages take (the log and the snapshot, without free pages and the WAL).
    public func storedBytes() -> Int64 {
        writer.storedBytes()
    }

    /// Writes what is queued and closes the file (its lock goes with it). Returns why writing failed, if it did.
    public func close() -> PersistenceFailure? {
        writer.close()
    }

    /// Why writing failed, if it did (then every later action is refused).
    public var failure: PersistenceFailure? {
        writer.failure
    }

    /// What the database holds now: its size on disk (the file and its WAL), the last entry committed and when,
    /// and why writing failed, if it did.
    public var status: PersistenceStatus {
        let (bytes, sequence, committed, failure) = writer.status
        return PersistenceStatus(path: path, durability: durability.rawValue, bytes: bytes, sequence: sequence,
                                 committed: committed, failure: failure?.reason)
    }
}
