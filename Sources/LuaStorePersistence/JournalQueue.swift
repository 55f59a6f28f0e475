import Foundation
import LuaStoreConcurrency
import LuaStoreScripting

/// What a durable journal's writer shares with the store's thread, wherever the journal is kept (`StoreWriter`'s
/// SQLite, a cluster's PostgreSQL): the lines queued and whether a drain is scheduled, the last entry committed and
/// when, why writing failed — and the wait for a commit (`full`).
public final class JournalQueue: @unchecked Sendable { // (its state is under a lock; the condition is for waiting)
    private struct State {
        var pending: [@Sendable (inout [UInt8]) throws -> Void] = []
        var scheduled = false
        var failure: PersistenceFailure?
        var durable: UInt64?
        var committed: Date?
        var closed = false
    }
    /// Names the journal in failures.
    public let path: String
    private let state = Protected(State())
    private let condition = NSCondition()

    /// An empty queue for the journal `path` names.
    public init(path: String) { self.path = path }

    /// Queues `write` (it appends lines); true when the caller must schedule a drain (none is).
    public func add(_ write: @escaping @Sendable (inout [UInt8]) throws -> Void) -> Bool {
        state.withLock { state -> Bool in
            guard state.failure == nil, !state.closed else { return false }
            state.pending.append(write)
            defer { state.scheduled = true }
            return !state.scheduled
        }
    }

    /// On the writer's thread: the lines of everything queued (the queue emptied), nil when there are none or they
    /// could not be made (then writing has failed).
    public func takeLines() -> [UInt8]? {
        let writes = state.withLock { state in
            state.scheduled = false
            defer { state.pending = [] }
            return state.pending
        }
        guard !writes.isEmpty else { return nil }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(writes.count * 256)
        do {
            for write in writes { try write(&buffer) }
        } catch {
            fail("a journal entry could not be encoded: \(error)")
            return nil
        }
        return buffer
    }

    /// On the writer's thread: `takeLines()` and the rows they make (`JournalRow`), nil as for `takeLines`.
    public func takeRows() -> (lines: [UInt8], rows: [JournalRow])? {
        guard let lines = takeLines() else { return nil }
        do {
            return (lines, try JournalRow.rows(in: lines))
        } catch {
            fail(error.reason)
            return nil
        }
    }

    /// The lines were committed, through entry `last`; those waiting for it go on.
    public func committed(through last: UInt64?) {
        state.withLock { state in
            if let last { state.durable = max(state.durable ?? 0, last) }
            state.committed = Date()
        }
        wake()
    }

    /// What the journal held when it was opened: entries through `sequence`.
    public func resumed(through sequence: UInt64) {
        state.withLock { $0.durable = sequence }
    }

    /// Writing failed (the first reason is kept): nothing more is taken, and waits end.
    public func fail(_ reason: String) {
        state.withLock { state in
            if state.failure == nil { state.failure = PersistenceFailure(path: path, reason: reason) }
            state.pending = []
        }
        wake()
    }

    /// Waits until the entries through `sequence` are committed (nil: does not wait); throws if writing failed.
    public func wait(through sequence: UInt64?) throws(PersistenceFailure) {
        if let sequence {
            condition.lock()
            while true {
                let (durable, failure) = state.withLock { ($0.durable, $0.failure) }
                if let durable, durable >= sequence { break }
                if failure != nil { break }
                condition.wait()
            }
            condition.unlock()
        }
        if let failure = state.withLock({ $0.failure }) { throw failure }
    }

    /// Takes nothing more; whether it was closed already.
    public func close() -> Bool {
        state.withLock { state -> Bool in
            defer { state.closed = true }
            return state.closed
        }
    }

    /// Why writing failed (the first reason given to `fail`); nil while it has not.
    public var failure: PersistenceFailure? { state.withLock { $0.failure } }
    /// The last entry committed (or held when opened), and when the last commit was.
    public var progress: (durable: UInt64?, committed: Date?) { state.withLock { ($0.durable, $0.committed) } }
    /// Whether nothing waits to be written and the journal still takes lines.
    public var isIdle: Bool { state.withLock { $0.pending.isEmpty && !$0.closed && $0.failure == nil } }

    private func wake() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }
}

/// The rows a batch of journal lines makes: consecutive entry lines as one (`first` through `last`, the lines
/// between a line break), a snapshot (a header line) on its own — as a durable store's journal keeps them.
public enum JournalRow: Equatable, Sendable {
    /// Entries `first` through `last`: the bytes `lines` of the buffer, without the last line break.
    case entries(first: UInt64, last: UInt64, lines: Range<Int>)
    /// A snapshot whose header holds `sequence`: the bytes `line` of the buffer, without its line break.
    case snapshot(sequence: UInt64, line: Range<Int>)

    /// The rows of `buffer` (lines, each with its line break); a line without a sequence number is a bug, said so.
    public static func rows(in buffer: [UInt8]) throws(PersistenceFailure) -> [JournalRow] {
        var rows: [JournalRow] = []
        var start = buffer.startIndex
        while start < buffer.endIndex {
            let end = buffer[start...].firstIndex(of: 10) ?? buffer.endIndex
            defer { start = end + 1 }
            let line = buffer[start..<end]
            guard !line.isEmpty else { continue }
            if let sequence = RecordingLine.entrySequence(line) {
                if case .entries(let first, _, let lines)? = rows.last {
                    rows[rows.count - 1] = .entries(first: first, last: sequence, lines: lines.lowerBound..<end)
                } else {
                    rows.append(.entries(first: sequence, last: sequence, lines: start..<end))
                }
            } else if let sequence = RecordingLine.headerSequence(line) {
                rows.append(.snapshot(sequence: sequence, line: start..<end))
            } else {
                throw PersistenceFailure(path: "", reason: "a journal line has no sequence number (a bug: please report it)")
            }
        }
        return rows
    }

    /// The last entry (or snapshot) the rows hold.
    public static func last(of rows: [JournalRow]) -> UInt64? {
        switch rows.last {
        case .entries(_, let last, _)?: last
        case .snapshot(let sequence, _)?: sequence
        case nil: nil
        }
    }
}
