import Foundation
import LuaKit
import LuaStoreScripting

/// JSON Lines actions from a file or a pipe, read ahead of the store on a thread of their own: large reads
/// (`LineReader`), split into lines and parsed there, handed over a batch (one read's lines) at a time. At most
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

    private static let aheadLimit = 8

    private let condition = NSCondition()
    private var ready: [[Line]] = []
    private var finished = false
    private var readFailure: String?
    private var waiting: CheckedContinuation<[Line]?, Never>?
    private var stopped = false

    /// Reads `path` (`-` is standard input); a line longer than `maximumLineLength` bytes ends the input with
    /// a failure naming it.
    static func open(_ path: String, maximumLineLength: Int) throws(LineReader.Unreadable) -> ActionInput {
        ActionInput(try LineReader(path: path, maximumLength: maximumLineLength))
    }

    private init(_ reader: LineReader) {
        let thread = Thread { [self] in readAll(reader) }
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

    /// Ends the input now, as if it had ended: what was read and not taken is dropped, and a `next()` waiting
    /// answers nil (the reader's thread, which may be waiting for the input, is left to end with the process).
    func interrupt() {
        condition.lock()
        stopped = true
        finished = true
        ready.removeAll()
        let continuation = waiting
        waiting = nil
        condition.signal()
        condition.unlock()
        continuation?.resume(returning: nil)
    }

    /// Stops reading (the reader ends at its next batch).
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    // MARK: The reader's thread

    private func readAll(_ reader: LineReader) {
        var lines: [Line] = []
        var halted = false
        var failure: String?
        do {
            // A batch is what the reader had before it reads (and perhaps waits for) more.
            while let (line, _) = try reader.next(beforeWaiting: {
                guard !lines.isEmpty else { return }
                halted = !hand(lines)
                lines.removeAll()
            }), !halted {
                line.withUnsafeBytes { Self.parse($0, number: reader.number, into: &lines) }
            }
        } catch {
            failure = error.reason
        }
        if !lines.isEmpty { _ = hand(lines) }
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
