import LuaKit
import LuaStoreCore

/// One change an action made to the state: the value now at `path` (`nil`: the key was removed). An empty path
/// is the whole state (a reducer that returned a new state table).
public struct StateChange: Sendable, Hashable {
    /// The keys from the root of the state.
    public var path: [LuaKey]
    /// The new value; `nil` when removed.
    public var value: LuaValue?

    /// The change that sets `path` to `value` (nil: removes it).
    public init(path: [LuaKey], value: LuaValue?) {
        self.path = path
        self.value = value
    }
}

/// An action sent with its sender's id (`ScriptedStore.send(_:id:)`), as the journal keeps it: what a server
/// answers when the same id comes again.
public struct ClientAction: Sendable, Equatable {
    /// The id its sender gave it.
    public var id: String
    /// Its journal entry.
    public var sequence: UInt64
    /// Why it failed (the state is as it was); nil when it was applied.
    public var failure: String?

    /// The action sent with `id` whose journal entry is `sequence`, with its failure (nil: applied).
    public init(id: String, sequence: UInt64, failure: String? = nil) {
        self.id = id
        self.sequence = sequence
        self.failure = failure
    }

    /// How a failure is kept: where, then what (`app.lua:5: boom`), as a recording's entry has it.
    public static func failureText(_ error: LuaError) -> String {
        error.location.map { "\($0): \(error.message)" } ?? error.message
    }
}

/// The latest `ClientAction`s, at most `capacity` (oldest dropped first).
struct RecentClientActions: Sendable {
    var capacity: Int
    private var kept: [ClientAction] = []
    private var start = 0

    init(capacity: Int) { self.capacity = capacity }

    mutating func append(_ action: ClientAction) {
        guard capacity > 0 else { return }
        kept.append(action)
        if kept.count - start > capacity { start += 1 }
        if start >= 1_024, start * 2 >= kept.count {
            kept.removeFirst(start)
            start = 0
        }
    }

    /// Replaces the newest (an action kept as applied whose entry could not be made).
    mutating func replaceLast(_ action: ClientAction) {
        guard kept.count > start else { return append(action) }
        kept[kept.count - 1] = action
    }

    /// Oldest first.
    var all: [ClientAction] { Array(kept[start...]) }

    /// Forgets those after `sequence` (time travel went on from an earlier entry).
    mutating func drop(after sequence: UInt64) {
        kept = all.filter { $0.sequence <= sequence }
        start = 0
    }
}

/// What the session journal says about one thing the store did: an action reduced (or refused), or a reload.
/// Entries are taken from the write barrier's own bookkeeping, so one costs what the action changed, never the
/// size of the state (see docs/scripted-apps.md, "The session journal").
public struct JournalEntry: Sendable {
    /// Where an action came from.
    public enum Origin: Sendable, Hashable {
        /// `dispatch` from outside the store.
        case outside
        /// Sent from outside with the sender's id for it (`ScriptedStore.send(_:id:)`, `luastore serve`): a resent
        /// action is known by it.
        case client(id: String)
        /// An effect: its kind (`http`, `delay`, …) and its key when it runs as a subscription.
        case effect(kind: String, subscription: String?)
        /// A child store it was dispatched to.
        case child
        /// The scripts were reloaded (`ScriptedStore.reload`, `--watch`).
        case reload
    }

    /// What happened.
    public enum Event: Sendable, Equatable {
        /// An action was reduced (its changes), or failed (`failure`; nothing changed).
        case action(LuaValue)
        /// New scripts were swapped in (`changes` are their migration's).
        case reload(fromSchema: Int64, toSchema: Int64)
        /// New scripts were refused (`failure` says why); the previous ones still run.
        case failedReload
    }

    /// 1, 2, 3, … in the order the store did things.
    public var sequence: UInt64
    /// What happened: an action, a reload, or a refused reload.
    public var event: Event
    /// Where the action came from (`.reload` for a reload's entry).
    public var origin: Origin
    /// Why the action or the reload failed.
    public var failure: ScriptFailure? {
        get { failed?.failure }
        set { failed = newValue.map(Failed.init) }
    }
    /// The failure, boxed: entries are copied on the store's thread and most never fail (an unboxed failure was
    /// nearly half of an entry's bytes).
    private final class Failed: Sendable {
        let failure: ScriptFailure
        init(_ failure: ScriptFailure) { self.failure = failure }
    }
    private var failed: Failed?
    /// A digest of the scripts that computed this entry (`ScriptedStore.journalPosition()` answers the running one).
    public var scripts: String
    /// How many changes there are (without converting them).
    public private(set) var changeCount: Int
    /// The commands the reducer returned (in order; subscriptions are not commands).
    public var commands: [ScriptEffect] = []
    /// When the action ran, in milliseconds since 1970-01-01 UTC: the store's clock for its run, which its
    /// reducers, props and subscriptions read (`os.time()`); recorded, and given again by a replay.
    public var time: Int64 = 0
    /// How long the VM took to reduce the action; actions reduced in one run (see docs/scripted-apps.md, "Runs") share the
    /// run's time equally.
    public var duration: Duration = .zero
    /// The state of `math.random`'s generator after this entry, when the reducers moved it since the entry (or the
    /// start) that last told it: a store resumed from its journal draws on from there, as the first run did.
    public var random: LuaRandomState?

    /// What changed, one entry per path (paths never overlap). The store's thread hands the journal's changes
    /// over as the JSON a recording writes (made by the barrier, `json.c`); they become Swift values when read,
    /// each time they are read — keep the array rather than reading it again.
    public var changes: [StateChange] {
        get {
            if let decoded { return decoded }
            guard let encodedChanges, changeCount > 0 else { return [] }
            do {
                return try RecordingLine.changes(from: RecordingJSON.Value(parsing: encodedChanges))
            } catch {
                preconditionFailure("the journal encoded changes it cannot read back: \(error)")
            }
        }
        set {
            decoded = newValue
            changeCount = newValue.count
            encodedChanges = nil
        }
    }

    /// About how many bytes the entry holds (its action, changes, commands and failure; see
    /// `LuaValue.estimatedBytes`): what a history bounded in bytes counts. Costs the entry's size.
    public var estimatedBytes: Int {
        var total = 160 + scripts.utf8.count
        if case .action(let action) = event { total += action.estimatedBytes }
        if let encodedChanges {
            total += encodedChanges.count
        } else if let decoded {
            for change in decoded { total += 32 + change.path.count * 24 + (change.value?.estimatedBytes ?? 0) }
        }
        for command in commands { total += 48 + command.payload.estimatedBytes }
        if let failure { total += 64 + failure.error.message.utf8.count }
        return total
    }

    /// Whether the entry's changes are, byte for byte, the JSON `json` (a recording's `changes`): true only when
    /// the barrier wrote them, as a recording of the same changes does — then they are the same changes, and
    /// neither side is read. False says nothing: compare `changes`.
    public func changesAreEncoded(as json: ArraySlice<UInt8>) -> Bool {
        guard decoded == nil, let encodedChanges else { return false }
        return encodedChanges.elementsEqual(json)
    }

    /// The changes as converted values, when they were made in Swift (or set).
    private var decoded: [StateChange]?
    /// The changes' JSON (`[[path, value], …]`), when the barrier wrote them (`RecordingLine` copies it).
    private(set) var encodedChanges: ArraySlice<UInt8>?

    /// An entry whose changes are Swift values; `commands`, `time` and `duration` start empty (set them after).
    public init(sequence: UInt64, event: Event, origin: Origin, changes: [StateChange], failure: ScriptFailure?, scripts: String) {
        self.sequence = sequence
        self.event = event
        self.origin = origin
        self.failed = failure.map(Failed.init)
        self.scripts = scripts
        self.decoded = changes
        self.changeCount = changes.count
    }

    /// A committed action's entry with its changes as the barrier wrote them.
    init(sequence: UInt64, action: LuaValue, origin: Origin, encoded: EncodedJournal.Record, scripts: String) {
        self.sequence = sequence
        self.event = .action(action)
        self.origin = origin
        self.scripts = scripts
        self.encodedChanges = encoded.changes
        self.changeCount = encoded.changeCount
    }

    /// The action, for action entries.
    public var action: LuaValue? {
        if case .action(let action) = event { return action }
        return nil
    }
}

/// What the actions of a run changed, as the barrier wrote it (`changes_record`, `CLuaState/changes.c`): for each action
/// that changed something, its run position, the number of changes and their JSON — or no JSON, when the
/// barrier left them to Swift (the runtime's `collected` list then holds them). Read in run order, once.
struct EncodedJournal: Sendable {
    struct Record {
        var changeCount: Int
        var changes: ArraySlice<UInt8>?
    }

    /// The records: three native `UInt32`s each — position, changes, length (`UInt32.max`: no JSON) — then the JSON;
    /// or, after an action's, a record of where it left `math.random`'s generator: changes `UInt32.max`, length 32,
    /// then the four words (`random(at:)`).
    private let bytes: [UInt8]
    /// Where the next record starts.
    private var offset = 0
    private static let header = 3 * MemoryLayout<UInt32>.size
    /// Whether every record holds its changes' JSON (none was left to Swift).
    let isWritten: Bool

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        var offset = 0
        var written = true
        bytes.withUnsafeBytes { raw in
            while offset + Self.header <= raw.count {
                let length = raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
                offset += Self.header
                if length == .max { written = false } else { offset += Int(length) }
            }
        }
        isWritten = written
    }

    /// The record of the action at run `position`, if it changed anything; positions are asked in order.
    mutating func record(at position: Int64) -> Record? {
        guard offset + Self.header <= bytes.count else { return nil }
        let (recorded, count, length) = bytes.withUnsafeBytes { raw in
            (raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self),
             raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
             raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self))
        }
        guard Int64(recorded) == position, count != .max else { return nil }
        offset += Self.header
        var record = Record(changeCount: Int(count))
        if length != .max {
            record.changes = bytes[offset..<(offset + Int(length))]
            offset += Int(length)
        }
        return record
    }

    /// Where the action at run `position` left `math.random`'s generator, when it moved it (asked after
    /// `record(at:)`, positions in order).
    mutating func random(at position: Int64) -> LuaRandomState? {
        guard offset + Self.header + 32 <= bytes.count else { return nil }
        let found: LuaRandomState? = bytes.withUnsafeBytes { raw in
            guard Int64(raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) == position,
                  raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) == .max,
                  raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self) == 32 else { return nil }
            let words = offset + Self.header
            return LuaRandomState(words: (raw.loadUnaligned(fromByteOffset: words, as: UInt64.self),
                                          raw.loadUnaligned(fromByteOffset: words + 8, as: UInt64.self),
                                          raw.loadUnaligned(fromByteOffset: words + 16, as: UInt64.self),
                                          raw.loadUnaligned(fromByteOffset: words + 24, as: UInt64.self)))
        }
        if found != nil { offset += Self.header + 32 }
        return found
    }
}

/// The journal entries of the actions one crossing into the VM committed, as the barrier wrote them: walked
/// where they are read — made into `JournalEntry`s for whoever hears the journal, written as lines straight from
/// the records by the session recorder on its writer's thread — so the store's thread makes nothing for the
/// recorder.
struct JournalRun: Sendable {
    /// The first action's entry's sequence number (the others follow).
    let firstSequence: UInt64
    let actions: ArraySlice<LuaValue>
    let origin: JournalEntry.Origin
    /// The first action's position in the run the barrier numbered.
    let firstPosition: Int64
    let encoded: EncodedJournal
    /// Changes the barrier left to Swift, read from the runtime's list, by position (when any were).
    let converted: [Int64: [StateChange]]?
    /// The commands the action at `position` returned.
    let commands: (position: Int64, effects: [ScriptEffect])?
    /// Each action's share of the run's time.
    let duration: Duration
    let scripts: String
    /// The store's clock for the run (every action of it ran at this time).
    let time: Int64
    /// The state of `math.random`'s generator after the run's last action, when its reducers moved it
    /// (`JournalEntry.random`: the last action's entry tells it).
    var random: LuaRandomState?

    /// Each action in order, with its sequence number, its position in the run, and the barrier's record of
    /// what it changed when that record holds the changes' JSON (otherwise they are `changes(at:)`).
    /// `random`: where the action left `math.random`'s generator, when it moved it (the barrier's record; for the
    /// last, `JournalRun.random` when nothing recorded it).
    func forEachAction(_ body: (_ sequence: UInt64, _ position: Int64, _ action: LuaValue, _ written: EncodedJournal.Record?,
                                _ random: LuaRandomState?) throws -> Void)
        rethrows {
        var encoded = encoded
        var position = firstPosition
        var sequence = firstSequence
        for action in actions {
            let record = encoded.record(at: position)
            let random = encoded.random(at: position) ?? (sequence == lastSequence ? self.random : nil)
            try body(sequence, position, action, record?.changes != nil ? record : nil, random)
            position += 1
            sequence += 1
        }
    }

    /// Where the barrier's records last told `math.random`'s generator was, in this run (nil: none did).
    var lastRandomRecorded: LuaRandomState? {
        var encoded = encoded
        var told: LuaRandomState?
        for position in firstPosition..<(firstPosition + Int64(actions.count)) {
            _ = encoded.record(at: position)
            if let random = encoded.random(at: position) { told = random }
        }
        return told
    }

    /// The last action's sequence number.
    var lastSequence: UInt64 { firstSequence + UInt64(actions.count) - 1 }

    /// The changes of the action at `position` whose record holds no JSON: left to Swift, or none.
    func changes(at position: Int64) -> [StateChange] { converted?[position] ?? [] }

    /// Makes each action's entry, in order.
    func forEachEntry(_ body: (JournalEntry) throws -> Void) rethrows {
        try forEachAction { sequence, position, action, written, random in
            var entry = if let written {
                JournalEntry(sequence: sequence, action: action, origin: origin, encoded: written, scripts: scripts)
            } else {
                JournalEntry(sequence: sequence, event: .action(action), origin: origin, changes: changes(at: position),
                             failure: nil, scripts: scripts)
            }
            if let commands, commands.position == position { entry.commands = commands.effects }
            entry.duration = duration
            entry.time = time
            entry.random = random
            try body(entry)
        }
    }
}

extension JournalEntry.Origin {
    init(_ source: ActionSource) {
        switch source {
        case .outside: self = .outside
        case .client(let id): self = .client(id: id)
        case .child: self = .child
        case .effect(let kind, let subscription): self = .effect(kind: kind.name, subscription: subscription)
        }
    }
}

/// A digest of an app's scripts: FNV-1a (64 bits) over each file's name and contents in name order, in hex. It
/// tells versions of the scripts apart (recordings, the journal); it is not a cryptographic hash.
enum ScriptsDigest {
    static func of(_ files: [String: [UInt8]]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) {
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01b3
            }
        }
        for name in files.keys.sorted() {
            mix(name.utf8)
            mix([0])
            mix(files[name] ?? [])
            mix([0])
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// What a new set of subscriptions (the app's `subscriptions`, run again after an action changed what it read)
/// launches and cancels: the store diffs them by key, and a key whose effect changed is cancelled and launched.
public struct SubscriptionChange: Sendable {
    /// The journal entry after which the set was taken (0: before any).
    public var after: UInt64
    /// The subscriptions launched, by key.
    public var launched: [String: ScriptEffect]
    /// The keys cancelled, sorted.
    public var cancelled: [String]
}
