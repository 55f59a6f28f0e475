import Foundation
import LuaKit
import LuaStoreCore

/// Records a session (`run --record`) in format 5 (`RecordingLine`): the header first — the state the journal
/// starts from — then each journal entry, encoded and written off the store's thread (a `JournalOutput`: a file,
/// or a durable store's database), in batches: the store's thread only hands entries over.
public final class SessionRecorder: Sendable {
    /// Where it writes.
    public let output: any JournalOutput
    /// The time of the last line written (the header's `time`, then each entry's): the next entry's `dt` counts
    /// from it. Used by the writer only.
    private let writtenTime = Protected<Int64>(0)
    /// The file it writes, when it writes one (`init(file:)`).
    public let file: OutputFile?
    /// An entry, or the entries of a run of actions (`ScriptedStoreOptions.recorder`), made by the writer.
    /// A header after the first: a snapshot of the state at `start.sequence` (a durable store's).
    private enum Item {
        case entry(JournalEntry)
        case run(JournalRun)
        case header(app: String, start: JournalStart)

        var lastSequence: UInt64 {
            switch self {
            case .entry(let entry): entry.sequence
            case .run(let run): run.firstSequence + UInt64(run.actions.count) - 1
            case .header(_, let start): start.sequence
            }
        }
    }

    /// What a header holds (`LuaStoreScripting.JournalStart`).
    public typealias JournalStart = LuaStoreScripting.JournalStart

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
    public init(file: OutputFile) {
        self.output = file
        self.file = file
    }

    /// A recorder writing to `output` (a durable store's database).
    public init(output: any JournalOutput) {
        self.output = output
        self.file = output as? OutputFile
    }

    /// Writes the header; entries the header's state already includes are dropped, later ones follow it.
    public func start(app: String, _ start: JournalStart) {
        pending.withLock { pending in
            output.append(lines: { [writtenTime] line in
                line.append(contentsOf: try RecordingLine.header(app: app, start: start).utf8)
                line.append(10)
                writtenTime.withLock { $0 = start.time }
            })
            startWriting(after: start.sequence, &pending)
        }
    }

    /// Starts without a header: what was written before (a durable store's database) holds the entries up to
    /// `sequence`, the last of them at `time`; later ones follow.
    public func resume(after sequence: UInt64, time: Int64) {
        pending.withLock { pending in
            output.append(lines: { [writtenTime] _ in writtenTime.withLock { $0 = time } })
            startWriting(after: sequence, &pending)
        }
    }

    private func startWriting(after sequence: UInt64, _ pending: inout Pending) {
        pending.waiting = (pending.early ?? []).filter { $0.lastSequence > sequence }
        pending.early = nil
        pending.taken = true
        if !pending.waiting.isEmpty { scheduleWriting(&pending) }
    }

    /// Writes a header in the middle, in order with the entries: the state at `start.sequence` (a snapshot).
    public func snapshot(app: String, _ start: JournalStart) {
        append(item: .header(app: app, start: start))
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
        output.append(lines: { [self] line in
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
            guard !output.failed else { return }
            var time = writtenTime.value
            defer { writtenTime.withLock { $0 = time } }
            for item in items {
                switch item {
                case .entry(let entry):
                    try RecordingLine.append(entry, after: time, to: &line)
                    line.append(10)
                    time = entry.time
                case .run(let run):
                    try RecordingLine.append(run, after: time, to: &line)
                    time = run.time
                case .header(let app, let start):
                    line.append(contentsOf: try RecordingLine.header(app: app, start: start).utf8)
                    line.append(10)
                    time = start.time
                }
            }
        })
    }
}

/// What a recording's header holds: the state the journal starts from, the scripts' digest and schema version, the
/// sequence number of the last entry the state includes, the time the next entry's `dt` counts from, and the
/// store's clock (when it started, its offset from UTC, its environment).
public struct JournalStart: Sendable {
    /// The state the journal starts from.
    public var state: LuaValue
    /// The digest of the app's Lua files.
    public var scripts: String
    /// The app's `schemaVersion`.
    public var schemaVersion: Int64
    /// The sequence number of the last entry the state includes (0: none).
    public var sequence: UInt64
    /// In milliseconds since 1970-01-01 UTC.
    public var time: Int64
    /// The store's clock: when it started, its offset from UTC, its environment.
    public var clock: RecordedClock
    /// The latest actions sent with an id before `sequence` (`ScriptedStore.send(_:id:)`), oldest first: a snapshot
    /// of a durable store keeps them (the header's `clients`), so that a resent action is still known after the
    /// entries before it are gone.
    public var clientActions: [ClientAction] = []
    /// The state of `math.random`'s generator at `sequence` (the header's `random`); nil: as every VM starts it.
    public var random: LuaRandomState?

    /// A start holding these fields; `clientActions` starts empty.
    public init(state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64, time: Int64, clock: RecordedClock) {
        self.state = state
        self.scripts = scripts
        self.schemaVersion = schemaVersion
        self.sequence = sequence
        self.time = time
        self.clock = clock
    }
}
