import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStorePersistence
import LuaStoreScripting
import PostgresNIO

/// One key's journal in the cluster's database (`ScriptedStoreOptions.persistence` of a store a `serve` node runs
/// with `--cluster`): the entry lines and snapshots a durable store writes to SQLite, in `luastore_entries` and
/// `luastore_snapshots`. Every commit first reads the key's lease row, locked (`FOR UPDATE`), and writes only if this
/// node still holds the key at the epoch it opened it with (**fencing**): a node that was paused past its lease while
/// another took the key over can never write again — its store then accepts no more actions.
public final class PostgresJournal: StatePersistence, JournalOutput, @unchecked Sendable { // (its state is under `state`'s lock)
    public let key: String
    public let epoch: Int64
    public let durability: Durability
    public let snapshotInterval: UInt64
    public let resumed: PersistedStart?
    public var recorder: SessionRecorder { madeRecorder! }
    private var madeRecorder: SessionRecorder? // (set once, as it opens)
    public var waitsForEachAction: Bool { durability == .full }
    private let database: ClusterDatabase
    private let writing: DispatchQueue
    private let display: String

    /// What the store's thread hands over, what was committed, why writing failed.
    private let journal: JournalQueue
    /// The bytes of lines committed since it was opened.
    private let written = Protected<Int64>(0)

    /// Opens `key`'s journal, which this node holds at `epoch` (`ClusterDatabase.acquire`): reads its snapshot and
    /// the entries after it (nil `resumed`: a new key, `init` runs).
    public init(database: ClusterDatabase, key: String, epoch: Int64, durability: Durability = .batch,
                snapshotInterval: UInt64 = StoreDatabase.defaultSnapshotInterval) throws(PersistenceFailure) {
        self.database = database
        self.key = key
        self.epoch = epoch
        self.durability = durability
        self.snapshotInterval = max(1, snapshotInterval)
        display = "key \(key) in \(database.display)"
        writing = DispatchQueue(label: "luastore.cluster.journal")
        journal = JournalQueue(path: display)
        resumed = try Self.read(database: database, key: key, display: display)
        if let resumed { journal.resumed(through: resumed.sequence) }
        madeRecorder = SessionRecorder(output: self)
    }

    private static func read(database: ClusterDatabase, key: String, display: String) throws(PersistenceFailure) -> PersistedStart? {
        let read: (snapshot: (seq: Int64, header: Data)?, rows: [Data])
        do {
            read = try database.lanes[database.lane(of: key)].perform { connection, logger in
                let snapshots = try connection.query("SELECT seq, header FROM luastore_snapshots WHERE key = \(key)", logger: logger).wait()
                guard let row = snapshots.first else {
                    let count = try connection.query("SELECT count(*) FROM luastore_entries WHERE key = \(key)", logger: logger).wait()
                    if let row = count.first, try row.decode(Int64.self) > 0 {
                        throw ClusterFailure("is damaged: it holds entries but no snapshot to apply them to")
                    }
                    return (nil, [])
                }
                let (seq, header) = try row.decode((Int64, ByteBuffer).self)
                var rows: [Data] = []
                for entry in try connection.query("SELECT lines FROM luastore_entries WHERE key = \(key) AND seq > \(seq) ORDER BY seq",
                                                  logger: logger).wait() {
                    rows.append(Data(try entry.decode(ByteBuffer.self).readableBytesView))
                }
                return ((seq, Data(header.readableBytesView)), rows)
            }
        } catch {
            throw PersistenceFailure(path: display, reason: error.description)
        }
        guard let snapshot = read.snapshot else { return nil }
        var rows = read.rows[...]
        return try JournalResume.read(path: display, snapshotSequence: UInt64(snapshot.seq), header: snapshot.header) {
            () throws(LineReader.Unreadable) -> Data? in rows.popFirst()
        }
    }

    // MARK: Writing (JournalOutput)

    public var failed: Bool { failure != nil }
    public var failure: PersistenceFailure? { journal.failure }

    public func append(lines write: @escaping @Sendable (inout [UInt8]) throws -> Void) {
        if journal.add(write) { writing.async { [self] in drain() } }
    }

    /// On the writer's queue: makes the lines of everything queued and commits them as one transaction — after
    /// checking, in it, that this node still holds the key at its epoch.
    private func drain() {
        guard let (buffer, rows) = journal.takeRows() else { return }
        let key = self.key, epoch = self.epoch, node = database.node
        do {
            try database.lanes[database.lane(of: key)].perform { connection, logger in
                _ = try connection.query("BEGIN", logger: logger).wait()
                do {
                    let lease = try connection.query("SELECT node, epoch FROM luastore_leases WHERE key = \(key) FOR UPDATE", logger: logger).wait()
                    guard let row = lease.first else { throw ClusterFailure("its lease is gone") }
                    let (holder, held) = try row.decode((String, Int64).self)
                    guard holder == node, held == epoch else {
                        throw ClusterFailure("node \(holder) took the key over (epoch \(held); this node opened it at \(epoch)): this node no longer writes it")
                    }
                    for row in rows {
                        switch row {
                        case .entries(let first, let last, let lines):
                            let bytes = ByteBuffer(bytes: buffer[lines])
                            _ = try connection.query("""
                                INSERT INTO luastore_entries (key, seq, first, lines) VALUES (\(key), \(Int64(last)), \(Int64(first)), \(bytes))
                                ON CONFLICT (key, seq) DO UPDATE SET first = EXCLUDED.first, lines = EXCLUDED.lines
                                """, logger: logger).wait()
                        case .snapshot(let sequence, let line):
                            let bytes = ByteBuffer(bytes: buffer[line])
                            _ = try connection.query("""
                                INSERT INTO luastore_snapshots (key, seq, header) VALUES (\(key), \(Int64(sequence)), \(bytes))
                                ON CONFLICT (key) DO UPDATE SET seq = EXCLUDED.seq, header = EXCLUDED.header
                                """, logger: logger).wait()
                            _ = try connection.query("DELETE FROM luastore_entries WHERE key = \(key) AND seq <= \(Int64(sequence))",
                                                 logger: logger).wait()
                        }
                    }
                    let done = try connection.query("COMMIT", logger: logger).wait()
                    guard done.metadata.command != "ROLLBACK" else { throw ClusterFailure("the commit was rolled back") }
                } catch {
                    _ = try? connection.query("ROLLBACK", logger: logger).wait()
                    throw error
                }
            }
        } catch {
            journal.fail("cannot be written: \(error.description)")
            return
        }
        written.withLock { $0 += Int64(buffer.count) }
        journal.committed(through: JournalRow.last(of: rows))
    }

    // MARK: StatePersistence

    public func waitUntilDurable(through sequence: UInt64) throws(PersistenceFailure) {
        try wait(through: durability == .full ? sequence : nil)
    }

    /// Waits until the journal through `sequence` is committed (nil: does not wait); throws if writing failed.
    public func wait(through sequence: UInt64?) throws(PersistenceFailure) {
        try journal.wait(through: sequence)
    }

    public var status: PersistenceStatus {
        let (durable, committed) = journal.progress
        return PersistenceStatus(path: display, durability: durability.rawValue, bytes: written.withLock { $0 }, sequence: durable ?? 0,
                                 committed: committed, failure: journal.failure?.reason)
    }

    /// Writes what is queued; no more is taken. Returns why writing failed, if it did.
    public func close() -> PersistenceFailure? {
        if !journal.close() { writing.sync { drain() } }
        return journal.failure
    }
}
