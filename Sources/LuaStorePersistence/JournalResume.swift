import Foundation
import LuaKit
import LuaStoreScripting

/// Reads what a durable store resumes from, wherever its journal is kept (SQLite here, PostgreSQL for a cluster):
/// the latest snapshot's header line and the rows of entries after it, read as one recording — every line checked
/// as `RecordingLines` checks it — into the state's text and each entry's changes (read in the store's VM), the
/// last sequence number and the ids of the latest actions sent with one.
public enum JournalResume {
    /// `header`: the snapshot's line (at `snapshotSequence`); `nextRow`: the next row of entries after it, in
    /// order (lines with a line break between them and none after the last), nil after the last;
    /// `unreadable`: the words for a row that could not be read (nil: the reader's own). `path` names the journal
    /// in messages. A damaged snapshot or entry is a failure naming it.
    public static func read(path: String, snapshotSequence: UInt64, header: Data,
                            nextRow: @escaping () throws(LineReader.Unreadable) -> Data?,
                            unreadable: () -> String? = { nil }) throws(PersistenceFailure) -> PersistedStart {
        var sequence = snapshotSequence
        var first = true
        let lines = LineReader(blocks: { () throws(LineReader.Unreadable) -> [UInt8]? in
            defer { first = false }
            if first { return line(header) }
            return try nextRow().map(line)
        }, maximumLength: .max)
        do {
            // (The state and each entry's changes are kept as written: the store reads them in its VM.)
            var recording = try RecordingLines(lines, passingOverKept: true, decodingState: false)
            sequence = recording.header.sequence ?? sequence
            guard let state = String(validating: recording.header.stateText, as: UTF8.self) else {
                throw PersistenceFailure(path: path, reason: "is damaged: its snapshot's state is not UTF-8 text; it was left as it is")
            }
            var changes: [PersistedText.Changes] = []
            var clientActions = recording.header.clientActions
            while case let entries = try recording.next(), !entries.isEmpty {
                for entry in entries {
                    if let id = entry.clientId { clientActions.append(ClientAction(id: id, sequence: entry.sequence, failure: entry.failureText)) }
                    guard entry.failure == nil, let written = entry.changesJSON else { continue }
                    guard let text = String(validating: written, as: UTF8.self) else {
                        throw PersistenceFailure(path: path, reason: "is damaged at entry \(entry.sequence): its changes are not UTF-8 text; it was left as it is")
                    }
                    changes.append(PersistedText.Changes(sequence: entry.sequence, text: text))
                }
                sequence = recording.last ?? sequence
            }
            if let line = recording.cutShort { // (every line was written whole: a row is one transaction)
                throw PersistenceFailure(path: path, reason: "is damaged after entry \(sequence): line \(line) of its entries is cut short; it was left as it is")
            }
            sequence = recording.last ?? sequence
            var start = PersistedStart(state: .nil, text: PersistedText(path: path, state: state, changes: changes),
                                       schemaVersion: recording.header.schemaVersion, scripts: recording.header.scripts,
                                       sequence: sequence, time: recording.time, clock: recording.header.clock)
            start.clientActions = clientActions
            start.random = recording.random
            return start
        } catch let problem as RecordingLines.Problem {
            switch problem.kind {
            case .header, .empty:
                throw PersistenceFailure(path: path, reason: "is damaged: its snapshot at entry \(snapshotSequence): \(problem.reason)")
            case .entry:
                throw PersistenceFailure(path: path, reason: "is damaged at entry \(problem.sequence.map(String.init) ?? "after \(sequence)"): \(problem.reason); it was left as it is")
            case .unreadable:
                if let words = unreadable() { throw PersistenceFailure(path: path, reason: words) }
                throw PersistenceFailure(path: path, reason: "is damaged after entry \(sequence): \(problem.reason); it was left as it is")
            }
        } catch let failure as PersistenceFailure {
            throw failure
        } catch {
            throw PersistenceFailure(path: path, reason: "cannot be read: \(error)")
        }
    }

    /// A row's bytes with the line break that ends its last line.
    static func line(_ data: Data) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(data.count + 1)
        bytes.append(contentsOf: data)
        bytes.append(10)
        return bytes
    }
}
