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

    /// On the writer's queue: makes the lines of everything queued and commits them in one statement, so one
    /// transaction and one round trip (`luastore_append`) — which writes only if this node still holds the key at its
    /// epoch.
    private func drain() {
        guard let (buffer, rows) = journal.takeRows() else { return }
        var sequences: [Int64] = [], firsts: [Int64] = [], snapshots: [Bool] = [], bytes: [ByteBuffer] = []
        for row in rows {
            switch row {
            case .entries(let first, let last, let lines):
                sequences.append(Int64(last))
                firsts.append(Int64(first))
                snapshots.append(false)
                bytes.append(ByteBuffer(bytes: buffer[lines]))
            case .snapshot(let sequence, let line):
                sequences.append(Int64(sequence))
                firsts.append(0)
                snapshots.append(true)
                bytes.append(ByteBuffer(bytes: buffer[line]))
            }
        }
        let key = self.key, epoch = self.epoch, node = database.node
        do throws(ClusterFailure) {
            try database.lanes[database.lane(of: key)].perform { connection, logger in
                _ = try connection.query("SELECT luastore_append(\(key), \(node), \(epoch), \(sequences), \(firsts), \(snapshots), \(bytes))",
                                         logger: logger).wait()
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
