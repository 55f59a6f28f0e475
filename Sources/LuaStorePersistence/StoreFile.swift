import Foundation
import LuaStoreScripting

#if canImport(Glibc)
import Glibc
#endif

/// What a durable store's file is, told from its bytes and the files beside it before SQLite opens it: SQLite acts
/// on what it finds as it opens a file — it rolls a hot journal back, and drops a log's frames past the first
/// damaged one — so a file that is not ours, or a log that would lose committed entries, is refused before that.
enum StoreFile {
    /// The `application_id` in the header of every store's file (`PRAGMA application_id`): "LuaS".
    static let applicationID: UInt32 = 0x4C75_6153

    /// What the file at a path is.
    enum Kind: Equatable {
        /// Nothing (an empty file, just made): a new store.
        case new
        /// A file marked as a store's.
        case marked
        /// An SQLite database in WAL mode without a mark: a store an older luastore made, or another program's
        /// database — its tables say which.
        case unmarked
        /// A new store, just written whole into a file that was empty (`StoreWriter`).
        case made
    }

    /// The kind of the file at `path`, or why it is refused (the file and those beside it left as they are).
    static func kind(of path: String) throws(PersistenceFailure) -> Kind {
        if let journal = size(of: path + "-journal"), journal > 0 {
            throw PersistenceFailure(path: path, reason: "has a rollback journal beside it (\(path)-journal), which SQLite would apply as it opens the file: it is not a LuaStore store (stores keep a log, -wal); both were left as they are")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else { throw PersistenceFailure(path: path, reason: "cannot be read") }
        defer { try? handle.close() }
        let head = [UInt8]((try? handle.read(upToCount: 100)) ?? Data())
        if head.isEmpty {
            if let log = size(of: path + "-wal"), log > 0 {
                throw PersistenceFailure(path: path, reason: "is empty but has a log beside it (\(path)-wal): it was left as it is")
            }
            return .new
        }
        guard head.count == 100, head.starts(with: Array("SQLite format 3\0".utf8)) else {
            throw PersistenceFailure(path: path, reason: "is not a LuaStore store (not an SQLite database); it was left as it is: choose another file")
        }
        let application = bigEndian(head, at: 68)
        if application == applicationID { return .marked }
        if application != 0 {
            throw PersistenceFailure(path: path, reason: "is the database of another program (its application id is 0x\(String(application, radix: 16))), not a LuaStore store; it was left as it is: choose another file")
        }
        guard head[18] == 2, head[19] == 2 else { // (a store has been in WAL mode since it was made)
            throw PersistenceFailure(path: path, reason: "is an SQLite database but not a LuaStore store (LuaStore did not make it); it was left as it is: choose another file")
        }
        return .unmarked
    }

    /// What a crash left damaged in the store's log (`FILE-wal`): its frames are checked as SQLite checks them
    /// (salts and running checksums), and a log whose damaged frame is followed by more committed frames of the
    /// same generation would lose them when opened. Nil when the log is whole (or absent).
    struct LogDamage: Error {
        /// The first frame SQLite would not read (from 1), the frames of the log's generation after it, and how
        /// many of those end a transaction.
        let frame: Int, framesAfter: Int, commitsAfter: Int

        func reason(_ path: String) -> String {
            "has a damaged log (\(path)-wal): frame \(frame) is damaged, and \(framesAfter) frames after it (\(commitsAfter) committed transactions) would be dropped if it were opened; both were left as they are (--persist-recover opens it, keeping what comes before frame \(frame))"
        }
    }

    /// Scans `path`-wal, if any (O(its size), read in blocks).
    static func logDamage(of path: String) -> LogDamage? {
        guard let handle = FileHandle(forReadingAtPath: path + "-wal") else { return nil }
        defer { try? handle.close() }
        guard let headerData = try? handle.read(upToCount: 32), headerData.count == 32 else { return nil }
        let header = [UInt8](headerData)
        let magic = bigEndian(header, at: 0)
        guard magic == 0x377F_0682 || magic == 0x377F_0683 else { return nil } // (not a log SQLite would read)
        let bigEndianSums = magic & 1 == 1
        var pageSize = Int(bigEndian(header, at: 8))
        if pageSize == 1 { pageSize = 65_536 }
        guard pageSize >= 512, pageSize <= 65_536, pageSize & (pageSize - 1) == 0 else { return nil }
        let salts = (bigEndian(header, at: 16), bigEndian(header, at: 20))
        var sums = checksum(header[0..<24], bigEndian: bigEndianSums, from: (0, 0))
        guard sums == (bigEndian(header, at: 24), bigEndian(header, at: 28)) else { return nil } // (SQLite ignores such a log)
        var index = 0
        var broken: Int?
        var framesAfter = 0, commitsAfter = 0
        while let read = try? handle.read(upToCount: 24 + pageSize), read.count == 24 + pageSize {
            index += 1
            let frame = [UInt8](read)
            let sameGeneration = (bigEndian(frame, at: 8), bigEndian(frame, at: 12)) == salts
            if broken == nil {
                let next = checksum(frame[24...], bigEndian: bigEndianSums, from: checksum(frame[0..<8], bigEndian: bigEndianSums, from: sums))
                if sameGeneration, bigEndian(frame, at: 0) != 0, next == (bigEndian(frame, at: 16), bigEndian(frame, at: 20)) {
                    sums = next
                    continue
                }
                broken = index
            } else if sameGeneration {
                framesAfter += 1
                if bigEndian(frame, at: 4) != 0 { commitsAfter += 1 }
            }
        }
        guard let broken, commitsAfter > 0 else { return nil }
        return LogDamage(frame: broken, framesAfter: framesAfter, commitsAfter: commitsAfter)
    }

    /// SQLite's log checksum of `bytes` (a multiple of 8), continuing `sums`.
    private static func checksum(_ bytes: ArraySlice<UInt8>, bigEndian: Bool, from sums: (UInt32, UInt32)) -> (UInt32, UInt32) {
        var (s0, s1) = sums
        var at = bytes.startIndex
        while at + 8 <= bytes.endIndex {
            let x0 = word(bytes, at, bigEndian), x1 = word(bytes, at + 4, bigEndian)
            s0 = s0 &+ x0 &+ s1
            s1 = s1 &+ x1 &+ s0
            at += 8
        }
        return (s0, s1)
    }

    private static func word(_ bytes: ArraySlice<UInt8>, _ at: Int, _ bigEndian: Bool) -> UInt32 {
        let (a, b, c, d) = (UInt32(bytes[at]), UInt32(bytes[at + 1]), UInt32(bytes[at + 2]), UInt32(bytes[at + 3]))
        return bigEndian ? a << 24 | b << 16 | c << 8 | d : d << 24 | c << 16 | b << 8 | a
    }

    private static func bigEndian(_ bytes: [UInt8], at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }

    static func size(of path: String) -> Int64? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int64(status.st_size)
    }
}
