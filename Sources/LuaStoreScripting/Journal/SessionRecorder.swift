import Foundation
import LuaKit
import LuaStoreCore

/// Records a session (`run --record`) in format 3 (`RecordingLine`): the header first — the state the journal
/// starts from — then each journal entry, encoded and written off the store's thread (`OutputFile`), in batches:
/// the store's thread only hands entries over.
public final class SessionRecorder: Sendable {
    /// Where it writes.
    public let file: OutputFile
    /// An entry, or the entries of a run of actions (`ScriptedStoreOptions.recorder`), made by the writer.
    private enum Item {
        case entry(JournalEntry)
        case run(JournalRun)

        var lastSequence: UInt64 {
            switch self {
            case .entry(let entry): entry.sequence
            case .run(let run): run.firstSequence + UInt64(run.actions.count) - 1
            }
        }
    }

    /// What waits for the writer, under a lock.
    private struct Pending {
        /// Items heard before the header was written (an effect launched at start may act at once; `nil` once
        /// the header is out).
        var early: [Item]? = []
        /// Items waiting for the writer.
        var waiting: [Item] = []
        /// The writer's emptied list, given back: the next items fill it without growing a new one (each
        /// growth copies every item so far).
        var spare: [Item] = []
        /// Whether the writer will take what waits (else one must be queued).
        var taken = true
    }
    private let pending = Protected(Pending())

    /// A recorder writing to `file`; pass `append` as `ScriptedStoreOptions.journal`, then call `start` once the
    /// store is made.
    public init(file: OutputFile) { self.file = file }

    /// Writes the header; entries the header's state already includes are dropped, later ones follow it.
    public func start(app: String, _ start: (state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64)) {
        pending.withLock { pending in
            file.append { try RecordingLine.header(app: app, start: start) }
            pending.waiting = (pending.early ?? []).filter { $0.lastSequence > start.sequence }
            pending.early = nil
            pending.taken = true
            if !pending.waiting.isEmpty { scheduleWriting(&pending) }
        }
    }

    /// Records one entry (on the store's thread: encoding and writing happen on the file's).
    public func append(_ entry: JournalEntry) {
        append(item: .entry(entry))
    }

    /// Records the entries of a run of actions, made on the file's thread.
    func append(run: JournalRun) {
        append(item: .run(run))
    }

    private func append(item: Item) {
        pending.withLock { pending in
            if pending.early != nil {
                pending.early?.append(item)
                return
            }
            pending.waiting.append(item)
            if pending.taken { scheduleWriting(&pending) }
        }
    }

    /// Queues one writer for whatever is waiting when it runs (entries arriving meanwhile join it).
    private func scheduleWriting(_ pending: inout Pending) {
        pending.taken = false
        file.append(lines: { [self] line in
            var items = self.pending.withLock { pending in
                pending.taken = true
                var items = pending.spare
                swap(&items, &pending.waiting)
                pending.spare = []
                return items
            }
            defer { // (a list a burst grew large is let go)
                items.removeAll(keepingCapacity: items.capacity <= 8_192)
                self.pending.withLock { pending in pending.spare = items }
            }
            guard !file.failed else { return }
            for item in items {
                switch item {
                case .entry(let entry):
                    try RecordingLine.append(entry, to: &line)
                    line.append(10)
                case .run(let run):
                    try RecordingLine.append(run, to: &line)
                }
            }
        })
    }
}
