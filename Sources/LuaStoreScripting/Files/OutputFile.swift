import Foundation
import LuaStoreCore

/// An output file written as Unix tools write theirs — through symbolic links, to devices, FIFOs and
/// `/dev/stdout` — except that a regular file is never truncated in place: what the file held stays whole until the
/// new contents are complete. Writes are buffered and made off the caller's thread; the first failing write is
/// kept, and `close` returns it in words ("no space left on device").
///
/// A regular file is replaced by writing a new file beside it (in the same folder, named `.NAME.luastore-…`) and,
/// once every byte is written and synced, renaming it over the old one; a failure removes the new file and leaves
/// the old one as it was. What is not a regular file (a device, a FIFO, a terminal) is written in place. The
/// `Mode` says when a file that does not exist yet appears.
public final class OutputFile: JournalOutput, @unchecked Sendable {
    /// When a new regular file appears under its name.
    public enum Mode: Sendable {
        /// At once, filled as lines come (a recording): after a crash it holds every complete line written. A file
        /// that already exists is still replaced only at `close`.
        case stream
        /// Whole, at `close`, or not at all (a state file).
        case whole
    }

    /// The path it was opened at.
    public let path: String
    private let descriptor: Int32
    /// The new file written beside the one it replaces at `close`, and the one it replaces (the path's target,
    /// through links); nil when written in place.
    private let replacement: (temporary: String, target: String)?
    private let queue = DispatchQueue(label: "luastore.output")
    // Only on `queue`:
    private var buffer: [UInt8] = []
    private var failure: String?
    private var closed = false
    /// Lines not yet taken by the writer, whether a drain is scheduled, and whether a write failed.
    private struct Queue {
        var queued: [Pending] = []
        var draining = false
        var failed = false
    }

    private let pending = Protected(Queue())

    /// Opens `path` for writing (see `Mode`); nothing that exists there is changed before `close`.
    public init(path: String, mode: Mode = .stream) throws(OutputFailure) {
        self.path = path
        var status = stat()
        let exists = stat(path, &status) == 0
        let regular = exists && (status.st_mode & S_IFMT) == S_IFREG
        if regular || (!exists && mode == .whole && errno == ENOENT) {
            let target = regular ? (OutputFile.resolved(path) ?? path) : path
            let (fd, temporary) = try OutputFile.createBeside(target, path: path)
            if regular { _ = fchmod(fd, status.st_mode & 0o7777) }
            descriptor = fd
            replacement = (temporary, target)
        } else {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
            guard fd >= 0 else { throw OutputFailure(path: path, reason: OutputFailure.words(errno)) }
            descriptor = fd
            replacement = nil
        }
        buffer.reserveCapacity(1 << 16)
    }

    /// Replaces (or creates) the file at `path` with `bytes`, whole or not at all (`Mode.whole`).
    public static func write(_ bytes: [UInt8], to path: String) throws(OutputFailure) {
        let file = try OutputFile(path: path, mode: .whole)
        file.append(lines: { buffer in buffer.append(contentsOf: bytes) })
        if let failure = file.close() { throw failure }
    }

    /// The file a path names, through symbolic links (a link is kept and its target replaced).
    private static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    /// Creates a new, empty file in `target`'s folder (mode 0666 less the umask).
    private static func createBeside(_ target: String, path: String) throws(OutputFailure) -> (Int32, String) {
        let folder = (target as NSString).deletingLastPathComponent
        let name = (target as NSString).lastPathComponent
        for _ in 0..<100 {
            let temporary = (folder.isEmpty ? "" : folder + "/") + ".\(name).luastore-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            if fd >= 0 { return (fd, temporary) }
            guard errno == EEXIST else {
                throw OutputFailure(path: path, reason: "cannot create a file in \(folder.isEmpty ? "." : folder) to replace it with: \(OutputFailure.words(errno))")
            }
        }
        throw OutputFailure(path: path, reason: "cannot create a file beside it to replace it with")
    }

    /// Queues one line, made on the writer's thread by `make` (which may throw: then the file records why).
    /// Lines are taken in batches: one wake-up and one write for many.
    public func append(_ make: @escaping @Sendable () throws -> String) {
        append(bytes: { buffer in buffer.append(contentsOf: try make().utf8) })
    }

    /// What `append` queued: a writer of one line (its newline added after it), or of whole lines.
    private struct Pending {
        let write: @Sendable (inout [UInt8]) throws -> Void
        let wholeLines: Bool
    }

    /// Queues one line, appended to the file's buffer (as UTF-8, without its newline) on the writer's thread by
    /// `write`; if it throws, what it appended is dropped and the file records why.
    public func append(bytes write: @escaping @Sendable (inout [UInt8]) throws -> Void) {
        enqueue(Pending(write: write, wholeLines: false))
    }

    /// Queues lines: `write` appends them, each with its newline, on the writer's thread; if it throws, the line it
    /// was making is dropped (the ones before it stay) and the file records why.
    public func append(lines write: @escaping @Sendable (inout [UInt8]) throws -> Void) {
        enqueue(Pending(write: write, wholeLines: true))
    }

    private func enqueue(_ pending: Pending) {
        let schedule = self.pending.withLock { queue -> Bool in
            queue.queued.append(pending)
            guard !queue.draining else { return false }
            queue.draining = true
            return true
        }
        // The writer starts a moment later: lines arriving meanwhile join the same batch (one wake-up of the
        // writer's thread per batch, not per line, which matters when the store produces lines continuously).
        if schedule { queue.asyncAfter(deadline: .now() + .milliseconds(2)) { [self] in drain() } }
    }

    /// On `queue`: makes and buffers every queued line, writing when the buffer is large and when nothing is
    /// left to take.
    private func drain() {
        var batch: [Pending] = []
        while true {
            pending.withLock { queue in
                swap(&batch, &queue.queued)
                if batch.isEmpty { queue.draining = false }
            }
            if batch.isEmpty { break }
            for pending in batch {
                guard failure == nil else {
                    // Nothing more is written; a writer of whole lines still runs (into nothing), so that whoever
                    // queued it knows it was taken (`failed` tells it not to bother making them).
                    var nowhere: [UInt8] = []
                    if pending.wholeLines { try? pending.write(&nowhere) }
                    continue
                }
                let start = buffer.count
                do {
                    try pending.write(&buffer)
                    if !pending.wholeLines { buffer.append(10) }
                } catch {
                    let kept = pending.wholeLines ? (buffer[start...].lastIndex(of: 10).map { $0 + 1 } ?? start) : start
                    buffer.removeSubrange(kept...)
                    fail("\(error)")
                }
                if buffer.count >= 1 << 16 { flush() }
            }
            batch.removeAll(keepingCapacity: true)
        }
        flush()
    }

    /// Whether a write failed (nothing more will be written).
    public var failed: Bool { pending.withLock { $0.failed } }

    /// On `queue`: keeps the first failure.
    private func fail(_ reason: String) {
        failure = reason
        pending.withLock { $0.failed = true }
    }

    private func flush() {
        var offset = 0
        while offset < buffer.count, failure == nil {
            let written = buffer.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                fail(OutputFailure.words(errno))
            } else {
                offset += written
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Returns once every line appended before the call is written (or the file failed).
    public func flushed() async -> OutputFailure? {
        await withCheckedContinuation { continuation in
            queue.async { [self] in
                drain()
                continuation.resume(returning: failure.map { OutputFailure(path: path, reason: $0) })
            }
        }
    }

    /// Writes what is buffered, closes the file — for a replacement, syncs it and renames it over the old one —
    /// and says what went wrong, if anything (a replacement that failed is removed, the old file kept).
    public func close() -> OutputFailure? {
        queue.sync {
            guard !closed else { return failure.map { OutputFailure(path: path, reason: $0) } }
            closed = true
            drain()
            if failure == nil, replacement != nil || isRegularFile(descriptor), fsync(descriptor) != 0 { fail(OutputFailure.words(errno)) }
            if Foundation.close(descriptor) != 0, failure == nil { fail(OutputFailure.words(errno)) }
            if let (temporary, target) = replacement {
                if failure == nil, rename(temporary, target) != 0 {
                    fail("cannot put the new file in place: \(OutputFailure.words(errno))")
                }
                if failure != nil {
                    unlink(temporary)
                } else {
                    OutputFile.syncFolder(of: target)
                }
            }
            return failure.map { OutputFailure(path: path, reason: $0) }
        }
    }

    /// Closes the file without putting anything in place: a replacement is removed and the old file left as it
    /// was (a file written in place keeps what was written).
    public func discard() {
        queue.sync {
            guard !closed else { return }
            closed = true
            if failure == nil { fail("discarded") }
            _ = Foundation.close(descriptor)
            if let (temporary, _) = replacement { unlink(temporary) }
        }
    }

    private func isRegularFile(_ descriptor: Int32) -> Bool {
        var status = stat()
        return fstat(descriptor, &status) == 0 && (status.st_mode & S_IFMT) == S_IFREG
    }

    /// Syncs the folder holding `path`, so that a rename into it survives a crash.
    static func syncFolder(of path: String) {
        let folder = (path as NSString).deletingLastPathComponent
        let fd = open(folder.isEmpty ? "." : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        _ = Foundation.close(fd)
    }
}

/// Why an output file could not be written, in words.
public struct OutputFailure: Error, CustomStringConvertible {
    /// The file.
    public let path: String
    /// What went wrong, in words.
    public let reason: String
    public var description: String { "\(path): \(reason)" }

    /// The system's message for `code`, as a sentence fragment: "no space left on device".
    public static func words(_ code: Int32) -> String {
        let text = String(cString: strerror(code))
        return text.prefix(1).lowercased() + text.dropFirst()
    }

    /// A Foundation file error in words — the system's message for the error underneath, and the file — never the
    /// error's own text (`NSCocoaErrorDomain error 512`): where no system error is underneath, what stands in the
    /// way of the file's folders is looked at (`obstacle(to:)`).
    public static func words(for error: any Error) -> String {
        if let failure = error as? OutputFailure { return failure.description }
        let error = error as NSError
        let path = (error.userInfo[NSFilePathErrorKey] as? String) ?? (error.userInfo[NSURLErrorKey] as? URL)?.path
        var code: Int32?
        if error.domain == NSPOSIXErrorDomain {
            code = Int32(error.code)
        } else if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            code = Int32(underlying.code)
        } else if error.domain == NSCocoaErrorDomain {
            switch CocoaError.Code(rawValue: error.code) {
            case .fileWriteOutOfSpace: code = ENOSPC
            case .fileWriteNoPermission, .fileReadNoPermission: code = EACCES
            case .fileWriteVolumeReadOnly: code = EROFS
            case .fileNoSuchFile, .fileReadNoSuchFile: code = ENOENT
            default: code = nil
            }
        }
        if let path, code == nil || code == ENOENT || code == ENOTDIR || code == EEXIST, let obstacle = obstacle(to: path) {
            return obstacle
        }
        let reason = code.map(words) ?? "the file system refused it"
        return path.map { "\($0): \(reason)" } ?? reason
    }

    /// What keeps `path` from being made: the first folder above it that does not exist (unless `makingFolders`:
    /// those are made), or that is a file; nil when nothing stands in the way.
    public static func obstacle(to path: String, makingFolders: Bool = false) -> String? {
        var folder = ""
        for part in URL(fileURLWithPath: path).standardizedFileURL.pathComponents.dropLast() {
            folder = folder.isEmpty ? part : (folder == "/" ? "/" + part : folder + "/" + part)
            var status = stat()
            if stat(folder, &status) != 0 {
                if errno == ENOENT { return makingFolders ? nil : "\(folder) does not exist" }
                return "\(folder): \(words(errno))"
            }
            if (status.st_mode & S_IFMT) != S_IFDIR { return "\(folder) is a file, not a folder" }
        }
        return nil
    }
}

