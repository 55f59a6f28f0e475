import Foundation
import GRDB
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

#if canImport(Glibc)
import Glibc
#endif

/// The database's connection and its writer thread (`JournalOutput`): what the recorder hands over is made into
/// lines there, and each batch of lines is one transaction.
final class StoreWriter: JournalOutput, @unchecked Sendable {
    let path: String
    private let app: String
    private let durability: Durability
    /// The write-ahead log's bound, in pages: only a burst that writes this much without a pause checkpoints in the
    /// middle of it (SQLite's own automatic checkpoint).
    private let logLimitPages: Int
    private let queue: DatabaseQueue
    /// What opening the file dropped of a damaged log (`recover`), in words.
    private(set) var droppedLog: String?
    /// The open file whose `flock` keeps other processes out.
    private let lockDescriptor: Int32
    /// Where its writing runs, one job at a time: a queue of its own, or its lane's thread.
    private let writing: WritingPlace
    /// The shared writer a `batch` store commits on (nil: a `full` store, which writes on a queue of its own: its
    /// syncs wait on the disk side by side with other stores').
    private let lane: BatchLane?
    /// The writers the `batch` stores share: one for every two cores, each store on one in turn.
    private static let lanes = (1...max(1, ProcessInfo.processInfo.activeProcessorCount / 2)).map(BatchLane.init)
    private static let nextLane = Protected(0)

    private static func lane(for durability: Durability) -> BatchLane? {
        guard durability == .batch else { return nil }
        return lanes[nextLane.withLock { turn in
            defer { turn = (turn + 1) % lanes.count }
            return turn
        }]
    }

    /// What makes a checkpoint worth a pause in the work: at least this many bytes committed since the last.
    static let checkpointBytes = 1 << 20
    /// How long the writer must have had nothing to do before it checkpoints.
    static let checkpointPause: Duration = .milliseconds(20)

    /// What the store's thread hands over, what was committed, why writing failed.
    private let journal: JournalQueue
    /// Checkpointing, on the writer's thread.
    private struct Checkpoints {
        /// Bytes committed since the last checkpoint (about: the lines, not SQLite's pages).
        var uncheckpointed = 0
        /// Whether a checkpoint waits for the pause to last (`checkpointIfIdle`).
        var waiting = false
    }
    private let checkpoints = Protected(Checkpoints())

    init(path: String, app: String, durability: Durability, logLimitPages: Int = StoreDatabase.defaultLogLimitPages, reset: Bool,
         recover: Bool = false) throws(PersistenceFailure) {
        self.path = path
        self.app = app
        self.durability = durability
        self.logLimitPages = max(1, logLimitPages)
        lane = Self.lane(for: durability)
        writing = lane.map(WritingPlace.lane) ?? .queue(DispatchQueue(label: "luastore.persistence"))
        journal = JournalQueue(path: path)
        lockDescriptor = try Self.lock(path)
        var kind: StoreFile.Kind
        do {
            try Self.emptyIfHalfMade(lockDescriptor, path: path, app: app)
            kind = try StoreFile.kind(of: path)
            if kind == .new {
                // A new store is written whole at once — a store made elsewhere, its bytes in one write — so that a
                // crash while it is made leaves the empty file or the store, never a database half made.
                try Self.writeNewStore(to: lockDescriptor, path: path, app: app)
                kind = .made
            }
            if let damage = StoreFile.logDamage(of: path) {
                guard recover else { throw PersistenceFailure(path: path, reason: damage.reason(path)) }
                droppedLog = "frame \(damage.frame) of its log was damaged: \(damage.framesAfter) frames after it (\(damage.commitsAfter) committed transactions) were dropped"
            }
            if kind != .made { try Self.probe(path, app: app, reset: reset) }
            var configuration = Configuration()
            configuration.label = "luastore.persistence"
            // (The process holds the file alone — `lock` — so SQLite's lock is taken once and kept, not taken and
            // let go at every commit: two system calls a commit fewer; the log's index is kept in memory.)
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE") }
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch let failure as PersistenceFailure {
            Glibc.close(lockDescriptor)
            throw failure
        } catch {
            Glibc.close(lockDescriptor)
            throw PersistenceFailure(path: path, reason: "cannot be opened as a database: \(Self.words(error))")
        }
        do {
            try prepare(reset: reset, marked: kind != .unmarked)
        } catch {
            try? queue.close()
            Glibc.close(lockDescriptor)
            throw error
        }
    }

    // MARK: Opening

    /// Takes the file's lock (created empty if it does not exist), or says who holds it.
    private static func lock(_ path: String) throws(PersistenceFailure) -> Int32 {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            let code = errno
            let reason = code == EACCES || code == EROFS
                ? "cannot be written (\(String(cString: strerror(code)))): a durable store needs a file it may write"
                : "cannot be opened (\(String(cString: strerror(code))))"
            throw PersistenceFailure(path: path, reason: reason)
        }
        var information = stat()
        if fstat(descriptor, &information) == 0, (information.st_mode & S_IFMT) != S_IFREG {
            Glibc.close(descriptor)
            throw PersistenceFailure(path: path, reason: "is not a regular file: a durable store is kept in a file of its own")
        }
        // A child process another thread is starting holds a copy of a descriptor until it runs its program (then
        // the copy closes: O_CLOEXEC), and with it a lock just let go; so a held lock is tried again for a while
        // before the file is called busy.
        var attempts = 0
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            attempts += 1
            if errno == EWOULDBLOCK && attempts < 100 {
                usleep(10_000)
                continue
            }
            Glibc.close(descriptor)
            throw PersistenceFailure(path: path, reason: "is in use by another process (one store per file: stop the other run, or choose another file)")
        }
        return descriptor
    }

    /// A new store's bytes, by app: made once in a process (`newStore(app:)`).
    private static let newStores = Protected<[String: [UInt8]]>([:])

    /// The bytes of a new store of `app` (`newStore(app:)`), made once in a process.
    static func newStoreBytes(app: String) throws(PersistenceFailure) -> [UInt8] {
        if let made = newStores.withLock({ $0[app] }) { return made }
        let bytes = try newStore(app: app)
        newStores.withLock { $0[app] = bytes }
        return bytes
    }

    /// How many bytes open a new store's file: SQLite's mark ("SQLite format 3\0"), written last.
    static let markLength = 16

    /// Writes a new store of `app` into the empty file `descriptor` holds (at `path`, to name it), and syncs it: all
    /// of it but SQLite's mark first, then the mark — 16 bytes, which a kill lands before or after, never within
    /// (the kernel may stop a write of several pages part way for a fatal signal; one page it copies whole). A
    /// file a kill left without its mark is ours and half made (`emptyIfHalfMade`): the next run makes it again.
    private static func writeNewStore(to descriptor: Int32, path: String, app: String) throws(PersistenceFailure) {
        let bytes = try newStoreBytes(app: app)
        var unmarked = bytes
        for index in 0..<markLength { unmarked[index] = 0 }
        var written = unmarked.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        if written == bytes.count {
            written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, markLength, 0) } == markLength ? bytes.count : -1
        }
        guard written == bytes.count, fsync(descriptor) == 0 else {
            let reason = written < 0 ? OutputFailure.words(errno) : "only \(max(0, written)) of \(bytes.count) bytes were written"
            _ = ftruncate(descriptor, 0) // (empty again: a new store the next time)
            throw PersistenceFailure(path: path, reason: "cannot be made a LuaStore store: \(reason)")
        }
    }

    /// Empties the file `descriptor` holds (at `path`) when it is a new store of `app` that a kill stopped while it
    /// was written (`writeNewStore`): no mark yet, and every byte after the mark a new store's. Any other file is
    /// left as it is (`StoreFile.kind` says what it is).
    static func emptyIfHalfMade(_ descriptor: Int32, path: String, app: String) throws(PersistenceFailure) {
        var information = stat()
        guard fstat(descriptor, &information) == 0, information.st_size > 0 else { return }
        var head = [UInt8](repeating: 0xFF, count: markLength)
        let read = head.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, markLength, 0) }
        guard read > 0, head.prefix(read).allSatisfy({ $0 == 0 }) else { return }
        let bytes = try newStoreBytes(app: app)
        let size = Int(information.st_size)
        guard size <= bytes.count else { return }
        var found = [UInt8](repeating: 0, count: size)
        let whole = found.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, size, 0) }
        guard whole == size, found[min(markLength, size)...].elementsEqual(bytes[min(markLength, size)..<size]) else { return }
        if let log = StoreFile.size(of: path + "-wal"), log > 0 { return } // (a store that was written since)
        guard ftruncate(descriptor, 0) == 0 else {
            throw PersistenceFailure(path: path, reason: "was left half made by a run that stopped, and cannot be emptied: \(OutputFailure.words(errno))")
        }
    }

    /// The bytes of a new, empty store of `app` — marked, in WAL mode, its tables made — built in a file of the
    /// system's temporary folder, which goes again.
    private static func newStore(app: String) throws(PersistenceFailure) -> [UInt8] {
        var template = Array((FileManager.default.temporaryDirectory.path + "/luastore-new-store-XXXXXX").utf8CString)
        let descriptor = mkstemp(&template)
        guard descriptor >= 0 else {
            throw PersistenceFailure(path: FileManager.default.temporaryDirectory.path, reason: "cannot hold a new store while it is made: \(OutputFailure.words(errno))")
        }
        Glibc.close(descriptor)
        let made = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { for suffix in ["", "-wal", "-shm", "-journal"] { unlink(made + suffix) } }
        do {
            let queue = try DatabaseQueue(path: made)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.inTransaction {
                    try markAndMakeTables(db, app: app)
                    return .commit
                }
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            try queue.close()
        } catch {
            throw PersistenceFailure(path: made, reason: "cannot be made a LuaStore store: \(Self.words(error))")
        }
        guard let bytes = FileManager.default.contents(atPath: made), !bytes.isEmpty else {
            throw PersistenceFailure(path: made, reason: "cannot be read back as a new store")
        }
        return [UInt8](bytes)
    }

    /// Marks the database as a store of `app` and makes its tables (emptied if they were there), in the transaction
    /// under way.
    private static func markAndMakeTables(_ db: Database, app: String) throws {
        try db.execute(sql: "PRAGMA application_id = \(Int32(bitPattern: StoreFile.applicationID))")
        try db.execute(sql: "PRAGMA user_version = \(StoreDatabase.formatVersion)")
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS luastore (key TEXT PRIMARY KEY, value);
            CREATE TABLE IF NOT EXISTS snapshots (seq INTEGER PRIMARY KEY, header BLOB NOT NULL);
            CREATE TABLE IF NOT EXISTS entries (seq INTEGER PRIMARY KEY, first INTEGER NOT NULL, lines BLOB NOT NULL);
            """)
        try db.execute(sql: "DELETE FROM snapshots; DELETE FROM entries")
        try db.execute(sql: "INSERT OR REPLACE INTO luastore (key, value) VALUES ('format', 'luastore-store'), ('version', ?), ('app', ?)",
                       arguments: [StoreDatabase.formatVersion, app])
    }

    /// Reads an existing file's tables without writing anything (a read-only connection neither applies nor
    /// checkpoints a log): refuses one that is not this app's store in a format this version reads, or that
    /// SQLite's `quick_check` finds damaged.
    private static func probe(_ path: String, app: String, reset: Bool) throws(PersistenceFailure) {
        do {
            var configuration = Configuration()
            configuration.readonly = true
            configuration.label = "luastore.persistence.probe"
            // (SQLite makes the log and its index beside a WAL-mode file as it reads it; those it made for this
            // look go with it: a refused file is left with nothing beside it that was not there.)
            // (What opening it made beside it is removed, also when the opening itself fails on a damaged file.)
            let sidecars = ["-wal", "-shm"].filter { !FileManager.default.fileExists(atPath: path + $0) }
            var opened: DatabaseQueue?
            defer {
                try? opened?.close()
                for suffix in sidecars {
                    let size = (try? FileManager.default.attributesOfItem(atPath: path + suffix))?[.size] as? Int
                    if suffix == "-shm" || size == 0 { try? FileManager.default.removeItem(atPath: path + suffix) }
                }
            }
            let probe = try DatabaseQueue(path: path, configuration: configuration)
            opened = probe
            let (tables, meta, check) = try probe.read { db -> ([String], [String: DatabaseValue], [String]) in
                let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")
                guard tables.contains("luastore") else { return (tables, [:], []) }
                let rows = try Row.fetchAll(db, sql: "SELECT key, value FROM luastore")
                let meta = Dictionary(rows.compactMap { row in String.fromDatabaseValue(row["key"] as DatabaseValue).map { ($0, row["value"] as DatabaseValue) } },
                                      uniquingKeysWith: { $1 })
                return (tables, meta, try String.fetchAll(db, sql: "PRAGMA quick_check"))
            }
            guard tables.contains("luastore"), String.fromDatabaseValue(meta["format"] ?? .null) == "luastore-store" else {
                throw PersistenceFailure(path: path, reason: "is an SQLite database but not a LuaStore store (it has no 'luastore' table of format 'luastore-store'); it was left as it is: choose another file")
            }
            let version = Int64.fromDatabaseValue(meta["version"] ?? .null) ?? 0
            if version > StoreDatabase.formatVersion {
                throw PersistenceFailure(path: path, reason: "was written by a newer LuaStore (store format \(version); this one reads \(StoreDatabase.formatVersion)); it was left as it is: run the newer luastore")
            }
            let owner = String.fromDatabaseValue(meta["app"] ?? .null) ?? ""
            if owner != app && !reset {
                throw PersistenceFailure(path: path, reason: "is the store of app '\(owner)', not of '\(app)'; it was left as it is (--persist-reset starts it over for '\(app)')")
            }
            if check != ["ok"] && !reset { // (a store started over keeps nothing of what it held)
                throw PersistenceFailure(path: path, reason: "is damaged (SQLite's check: \(check.prefix(3).joined(separator: "; "))); it was left as it is: restore it from a copy, or start over with --persist-reset")
            }
        } catch let failure as PersistenceFailure {
            throw failure
        } catch {
            throw PersistenceFailure(path: path, reason: "cannot be read as a LuaStore store: \(Self.words(error)); it was left as it is")
        }
    }

    /// Starts an existing store over (`reset`), and marks it as a store's (`marked`: it is already); switches it to
    /// WAL mode and the durability's sync level first. (`probe` checked an existing file before: nothing is written
    /// to one that is not this app's store; a new one was written whole, `writeNewStore`.)
    private func prepare(reset: Bool, marked: Bool) throws(PersistenceFailure) {
        let app = self.app
        do {
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: durability == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = \(logLimitPages)")
                guard reset || !marked else { return }
                try db.inTransaction {
                    if reset {
                        try Self.markAndMakeTables(db, app: app)
                    } else {
                        try db.execute(sql: "PRAGMA application_id = \(Int32(bitPattern: StoreFile.applicationID))")
                        try db.execute(sql: "PRAGMA user_version = \(StoreDatabase.formatVersion)")
                    }
                    return .commit
                }
            }
        } catch {
            throw PersistenceFailure(path: path, reason: "cannot be made a LuaStore store: \(Self.words(error))")
        }
    }

    /// The state the store resumes from: the latest snapshot with every later entry's changes applied (no
    /// reducer runs); nil when the store holds nothing yet. A damaged snapshot or entry is refused, naming it.
    func resume() throws(PersistenceFailure) -> PersistedStart? {
        let snapshot: Row?
        do {
            snapshot = try queue.read { db in try Row.fetchOne(db, sql: "SELECT seq, header FROM snapshots ORDER BY seq DESC LIMIT 1") }
        } catch {
            throw PersistenceFailure(path: path, reason: "cannot be read: \(Self.words(error))")
        }
        guard let snapshot else {
            let entries = (try? queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM entries") ?? 0 }) ?? 0
            if entries > 0 {
                throw PersistenceFailure(path: path, reason: "is damaged: it holds entries but no snapshot to apply them to (--persist-reset starts it over)")
            }
            return nil
        }
        guard let snapshotSequence = Int64.fromDatabaseValue(snapshot["seq"] as DatabaseValue),
              let header = Data.fromDatabaseValue(snapshot["header"] as DatabaseValue) else {
            throw PersistenceFailure(path: path, reason: "is damaged: its snapshot is not one LuaStore writes (--persist-reset starts it over)")
        }
        var databaseError: (any Error)?
        let start: PersistedStart
        do {
            start = try queue.read { db in
                // The rows of entries after the snapshot, in order (a row holds lines, a line break between them).
                let cursor = try Row.fetchCursor(db, sql: "SELECT lines FROM entries WHERE seq > ? ORDER BY seq", arguments: [snapshotSequence])
                return try JournalResume.read(path: path, snapshotSequence: UInt64(snapshotSequence), header: header) {
                    () throws(LineReader.Unreadable) -> Data? in
                    let row: Row?
                    do {
                        row = try cursor.next()
                    } catch {
                        databaseError = error
                        throw LineReader.Unreadable(reason: Self.words(error))
                    }
                    guard let row else { return nil }
                    guard let data = Data.fromDatabaseValue(row["lines"] as DatabaseValue) else {
                        throw LineReader.Unreadable(reason: "a row of entries holds no lines")
                    }
                    return data
                } unreadable: {
                    databaseError.map { "cannot be read: \(Self.words($0))" }
                }
            }
        } catch let failure as PersistenceFailure {
            throw failure
        } catch {
            throw PersistenceFailure(path: path, reason: "cannot be read: \(Self.words(error))")
        }
        journal.resumed(through: start.sequence)
        return start
    }

    // MARK: Writing

    var failure: PersistenceFailure? { journal.failure }
    var failed: Bool { failure != nil }

    func append(lines write: @escaping @Sendable (inout [UInt8]) throws -> Void) {
        guard journal.add(write) else { return } // (a drain is due already)
        if let lane {
            lane.schedule(self)
        } else {
            writing.async { [self] in drain() }
        }
    }

    /// On the writer's thread: makes the lines of everything queued, and commits them as one transaction.
    fileprivate func drain() {
        guard let (buffer, rows) = journal.takeRows() else { return }
        var snapshot = false
        do {
            try queue.writeWithoutTransaction { db in
                // (BEGIN and COMMIT prepared once: `inTransaction` compiled both anew at every commit, a tenth of a
                // busy server's time.)
                try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                do {
                    // Consecutive entry lines go in as one row (a chunk: `seq` is its last entry's, `first` its
                    // first's); a snapshot removes every row it supersedes.
                    for row in rows {
                        switch row {
                        case .entries(let first, let last, let lines):
                            let statement = try db.cachedStatement(sql: "INSERT OR REPLACE INTO entries (seq, first, lines) VALUES (?, ?, ?)")
                            try buffer[lines].withUnsafeBytes { lines in // (SQLite copies it: no copy before)
                                let bytes = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: lines.baseAddress!), count: lines.count, deallocator: .none)
                                try statement.execute(arguments: [Int64(last), Int64(first), bytes])
                            }
                        case .snapshot(let sequence, let line):
                            snapshot = true
                            try db.cachedStatement(sql: "INSERT OR REPLACE INTO snapshots (seq, header) VALUES (?, ?)")
                                .execute(arguments: [Int64(sequence), Data(buffer[line])])
                            try db.cachedStatement(sql: "DELETE FROM entries WHERE seq <= ?").execute(arguments: [Int64(sequence)])
                            try db.cachedStatement(sql: "DELETE FROM snapshots WHERE seq < ?").execute(arguments: [Int64(sequence)])
                        }
                    }
                    try db.cachedStatement(sql: "COMMIT").execute()
                } catch {
                    if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK") }
                    throw error
                }
            }
        } catch {
            journal.fail("cannot be written: \(Self.words(error))")
            return
        }
        // A snapshot supersedes every entry before it: checkpointed with its commit, the state is in the database
        // file and the log starts over small (what resuming reads first). (A checkpoint that fails loses nothing:
        // the log holds the commit, and the next one tries again.)
        let copied = snapshot ? (try? queue.writeWithoutTransaction { db in try db.checkpoint(.passive) }) : nil
        journal.committed(through: JournalRow.last(of: rows))
        let checkpoint = checkpoints.withLock { state -> Bool in
            if let copied, copied.checkpointedFrameCount >= copied.walFrameCount {
                state.uncheckpointed = 0
            } else {
                state.uncheckpointed += buffer.count
            }
            guard state.uncheckpointed >= Self.checkpointBytes, !state.waiting else { return false }
            state.waiting = true
            return true
        }
        if checkpoint { writing.async(after: Self.checkpointPause) { [self] in checkpointIfIdle() } }
    }

    /// On the writer's thread: copies what the write-ahead log holds into the database file when nothing came to
    /// be written during the pause. Checkpointing costs about what writing the log did; done in a pause, a burst
    /// of actions does not wait for it (nor for SQLite's automatic one, until the log reaches `logLimitPages`).
    /// A checkpoint that cannot finish (a reader holds an old page) is tried again at the next pause; nothing is
    /// lost meanwhile: the log holds every commit.
    private func checkpointIfIdle() {
        checkpoints.withLock { $0.waiting = false }
        guard journal.isIdle else { return }
        if let (logged, copied) = try? queue.writeWithoutTransaction({ db in try db.checkpoint(.passive) }), copied >= logged {
            checkpoints.withLock { $0.uncheckpointed = 0 }
        }
    }

    /// Waits until the entries through `sequence` are committed (nil: does not wait); throws if writing failed.
    func wait(through sequence: UInt64?) throws(PersistenceFailure) {
        try journal.wait(through: sequence)
    }

    /// Writes what is queued, then closes the connection and lets the lock go.
    func close() -> PersistenceFailure? {
        if journal.close() { return journal.failure }
        writing.sync { [self] in drain() }
        try? queue.close()
        Glibc.close(lockDescriptor)
        return journal.failure
    }

    func storedBytes() -> Int64 {
        (try? queue.read { db in
            let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let free = try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
            let size = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return (pages - free) * size
        }) ?? 0
    }

    var status: (bytes: Int64, sequence: UInt64, committed: Date?, failure: PersistenceFailure?) {
        let size = { (path: String) -> Int64 in
            ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.int64Value ?? 0
        }
        let bytes = size(path) + size(path + "-wal")
        let (durable, committed) = journal.progress
        return (bytes, durable ?? 0, committed, journal.failure)
    }

    static func words(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_FULL: return "the disk is full"
            case .SQLITE_READONLY: return "the file is read-only"
            case .SQLITE_NOTADB: return "not a database"
            case .SQLITE_CORRUPT: return "the database is damaged"
            case .SQLITE_IOERR: return "an input/output error (\(error.message ?? "no detail"): the disk may be full, or the file at a size limit)"
            default: return error.message ?? "\(error)"
            }
        }
        return "\(error)"
    }
}

/// Where a store's writing runs, one job at a time: a serial queue of its own (a `full` store: its syncs wait on the
/// disk beside other stores'), or the thread of the `batch` lane it shares.
enum WritingPlace: Sendable {
    case queue(DispatchQueue)
    case lane(BatchLane)

    func async(_ job: @escaping @Sendable () -> Void) {
        switch self {
        case .queue(let queue): queue.async(execute: job)
        case .lane(let lane): lane.async(job)
        }
    }

    func async(after delay: Duration, _ job: @escaping @Sendable () -> Void) {
        switch self {
        case .queue(let queue): queue.asyncAfter(deadline: .after(delay), execute: job)
        case .lane(let lane): lane.async(after: delay, job)
        }
    }

    /// Runs `job` there and waits for it.
    func sync(_ job: @escaping @Sendable () -> Void) {
        switch self {
        case .queue(let queue): queue.sync(execute: job)
        case .lane(let lane): lane.sync(job)
        }
    }
}

/// A writer thread that `batch` stores share, waking at most once a `tick` however many stores have something to
/// write: each store with entries queued commits them (one transaction each) in the tick after its first. Woken for
/// each entry instead, the writer thread slept and woke for nearly every action of a server whose stores each take a
/// few hundred a second — a third of its time — and each wake-up cost the store's thread that sent it too. A crash
/// loses at most a tick more of actions.
///
/// It is a thread of its own that gives the processor up between one store's commit and the next (`sched_yield`):
/// committing the stores due one after another took one of two cores for about 15 ms at a time at 20,000 actions a
/// second over 100 keys, and every action answered meanwhile waited for the other core (`serve.p50_ms` 2.6–7.2 ms,
/// `serve.p99_ms` 15–33 ms before; 0.7–2.5 and 8–29 ms after, alternated).
final class BatchLane: Sendable {
    /// How long a store's first entry waits for others to join its commit, and other stores' for theirs.
    static let tick: Duration = .milliseconds(1)

    private struct Jobs {
        var ready: [@Sendable () -> Void] = []
        var timed: [(at: ContinuousClock.Instant, job: @Sendable () -> Void)] = []
        /// The stores whose entries wait for the tick.
        var writers: [StoreWriter] = []
        /// Whether the tick is on its way.
        var armed = false
    }
    private let jobs = Protected(Jobs())
    /// Signalled when a job is added (the thread may wake with nothing to do: it waits again).
    private let added = DispatchSemaphore(value: 0)
    private let threadID = Protected<pthread_t?>(nil)

    init(_ number: Int) {
        let thread = Thread { [self] in run() }
        thread.name = "luastore.persistence.batch-\(number)"
        thread.start()
    }

    /// `writer` has entries to commit (it had none before).
    func schedule(_ writer: StoreWriter) {
        let arm = jobs.withLock { jobs -> Bool in
            jobs.writers.append(writer)
            defer { jobs.armed = true }
            return !jobs.armed
        }
        if arm { async(after: Self.tick) { [self] in commitDue() } }
    }

    func async(_ job: @escaping @Sendable () -> Void) {
        jobs.withLock { $0.ready.append(job) }
        added.signal()
    }

    func async(after delay: Duration, _ job: @escaping @Sendable () -> Void) {
        let at = ContinuousClock.now + delay
        jobs.withLock { $0.timed.append((at, job)) }
        added.signal()
    }

    /// Runs `job` on the lane's thread and waits for it (at once, when called there).
    func sync(_ job: @escaping @Sendable () -> Void) {
        if let lane = threadID.value, pthread_equal(lane, pthread_self()) != 0 {
            job()
            return
        }
        let done = DispatchSemaphore(value: 0)
        async {
            job()
            done.signal()
        }
        done.wait()
    }

    /// The lane thread: the jobs in the order they came, each timed one once its time has come.
    private func run() {
        threadID.withLock { $0 = pthread_self() }
        while true {
            let (due, next) = jobs.withLock { jobs -> ([@Sendable () -> Void], ContinuousClock.Instant?) in
                let now = ContinuousClock.now
                var due = jobs.ready
                jobs.ready.removeAll(keepingCapacity: true)
                if !jobs.timed.isEmpty {
                    due += jobs.timed.filter { $0.at <= now }.map(\.job)
                    jobs.timed.removeAll { $0.at <= now }
                }
                return (due, jobs.timed.map(\.at).min())
            }
            for job in due { job() }
            guard due.isEmpty else { continue }
            if let next {
                _ = added.wait(timeout: .after(ContinuousClock.now.duration(to: next)))
            } else {
                added.wait()
            }
        }
    }

    /// On the lane's thread (so never beside another job of a store of the lane): each due store's entries committed,
    /// the processor given up between two (the threads answering actions run first, if any waits).
    private func commitDue() {
        let writers = jobs.withLock { jobs in
            defer {
                jobs.writers = []
                jobs.armed = false
            }
            return jobs.writers
        }
        for (index, writer) in writers.enumerated() {
            writer.drain()
            if index + 1 < writers.count { sched_yield() }
        }
    }
}

private extension DispatchTime {
    /// Now and `delay` (none when it is not positive).
    static func after(_ delay: Duration) -> DispatchTime {
        let (seconds, attoseconds) = delay.components
        return .now() + .nanoseconds(max(0, Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)))
    }
}
