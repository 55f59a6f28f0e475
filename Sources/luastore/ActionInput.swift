import Foundation
import LuaKit
import LuaStoreScripting

/// JSON Lines actions from a file or a pipe, read ahead of the store on a thread of their own: large reads
/// (64 KiB), split into lines and parsed there, handed over a batch (one read's lines) at a time. At most
/// `aheadLimit` batches wait; the reader sleeps until the run takes one (memory stays bounded whatever the input).
final class ActionInput: @unchecked Sendable { // (its mutable state is guarded by `condition`)
    /// One non-blank line.
    struct Line: Sendable {
        enum Content: Sendable {
            case action(LuaValue)
            case malformed(String)
        }

        /// From 1.
        let number: Int
        let content: Content
    }

    private static let readSize = 64 << 10
    private static let aheadLimit = 8

    private let descriptor: Int32
    private let condition = NSCondition()
    private var ready: [[Line]] = []
    private var finished = false
    private var readFailure: String?
    private var waiting: CheckedContinuation<[Line]?, Never>?
    private var stopped = false

    /// Why a file of actions cannot be read, in words ("no such file or directory").
    struct Unreadable: Error {
        let reason: String
    }

    /// Reads `path` (`-` is standard input).
    static func open(_ path: String) throws(Unreadable) -> ActionInput {
        if path == "-" { return ActionInput(descriptor: STDIN_FILENO) }
        let descriptor = Foundation.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Unreadable(reason: OutputFailure.words(errno)) }
        var status = stat()
        if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            close(descriptor)
            throw Unreadable(reason: OutputFailure.words(EISDIR))
        }
        return ActionInput(descriptor: descriptor)
    }

    init(descriptor: Int32) {
        self.descriptor = descriptor
        let thread = Thread { [self] in readAll() }
        thread.name = "luastore.actions"
        thread.start()
    }

    /// The next batch of lines, in order; nil once the input has ended (`failure` then says if it broke).
    func next() async -> [Line]? {
        await withCheckedContinuation { continuation in
            condition.lock()
            if !ready.isEmpty {
                let batch = ready.removeFirst()
                condition.signal()
                condition.unlock()
                continuation.resume(returning: batch)
            } else if finished {
                condition.unlock()
                continuation.resume(returning: nil)
            } else {
                waiting = continuation
                condition.unlock()
            }
        }
    }

    /// Whether a batch is waiting (the next `next()` will not wait for the input).
    var hasBatchReady: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !ready.isEmpty || finished
    }

    /// Why reading stopped before the end of the input, in words.
    var failure: String? {
        condition.lock()
        defer { condition.unlock() }
        return readFailure
    }

    /// Stops reading (the reader ends at its next batch).
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    // MARK: The reader's thread

    private func readAll() {
        var pending: [UInt8] = [] // the start of a line the last read did not finish
        var chunk = [UInt8](repeating: 0, count: Self.readSize)
        var number = 0
        var failure: String?
        while true {
            let count = chunk.withUnsafeMutableBytes { Foundation.read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                failure = OutputFailure.words(errno)
                break
            }
            if count == 0 { break }
            var lines: [Line] = []
            chunk.withUnsafeBytes { raw in
                let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<count])
                var start = 0
                while let end = bytes[start...].firstIndex(of: 10) {
                    number += 1
                    if pending.isEmpty {
                        Self.parse(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), number: number, into: &lines)
                    } else {
                        pending.append(contentsOf: bytes[start..<end])
                        pending.withUnsafeBytes { Self.parse($0, number: number, into: &lines) }
                        pending.removeAll(keepingCapacity: true)
                    }
                    start = end + 1
                }
                pending.append(contentsOf: bytes[start...])
            }
            if !lines.isEmpty, !hand(lines) { break }
        }
        if !pending.isEmpty { // a last line without a line break
            var lines: [Line] = []
            number += 1
            pending.withUnsafeBytes { Self.parse($0, number: number, into: &lines) }
            if !lines.isEmpty { _ = hand(lines) }
        }
        if descriptor != STDIN_FILENO { close(descriptor) }
        condition.lock()
        finished = true
        readFailure = failure
        let continuation = waiting
        waiting = nil
        condition.unlock()
        continuation?.resume(returning: nil)
    }

    /// Hands a batch to the run (waiting while `aheadLimit` batches wait); false once stopped.
    private func hand(_ lines: [Line]) -> Bool {
        condition.lock()
        while ready.count >= Self.aheadLimit, !stopped { condition.wait() }
        if stopped {
            condition.unlock()
            return false
        }
        if let continuation = waiting {
            waiting = nil
            condition.unlock()
            continuation.resume(returning: lines)
        } else {
            ready.append(lines)
            condition.unlock()
        }
        return true
    }

    /// Parses a line unless it is blank (spaces, tabs, a carriage return).
    private static func parse(_ line: UnsafeRawBufferPointer, number: Int, into lines: inout [Line]) {
        guard line.contains(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0D }) else { return }
        do {
            lines.append(Line(number: number, content: .action(try ActionParser.parse(line, allowShortForm: false))))
        } catch {
            lines.append(Line(number: number, content: .malformed("\(error)")))
        }
    }
}
