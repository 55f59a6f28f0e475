import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// What the devtools keep of the session: the newest journal entries (a bounded ring), and the open pages to tell of new ones. The store's thread only appends (`hear`); pages are told at
/// most every `interval`, a batch at a time, and only while a page is open.
public final class DevtoolsJournal: Sendable {
    /// One kept entry.
    struct Kept: Sendable {
        let entry: JournalEntry
        /// When it ran: the store's recorded clock (milliseconds since 1970), which its scripts read as `os.time()`.
        var time: Int64 { entry.time }
        /// What the entry holds, about (`JournalEntry.estimatedBytes`).
        let bytes: Int
    }

    private struct Ring {
        var items: [Kept] = []
        /// Where the oldest kept entry is in `items` (the ones before are dropped in blocks).
        var start = 0
        var types: Set<String> = []
        /// The kept entries' bytes, about.
        var bytes = 0
        /// What the subscriptions did after an entry, by its sequence (trimmed with the ring).
        var subscriptions: [UInt64: SubscriptionChange] = [:]
        var count: Int { items.count - start }
    }

    /// At most this many entries are kept (the oldest go first).
    public let capacity: Int
    /// At most about this many bytes of entries are kept (the oldest go first; the newest always stays): an app
    /// whose every action carries a large command is bounded by this rather than by `capacity`.
    public let byteCapacity: Int
    /// The default `byteCapacity`: 256 MiB.
    public static let defaultByteCapacity = 256 << 20
    /// How long after an entry pages hear of it, at most.
    let interval: Duration
    private let ring = Protected(Ring())
    /// The newest entry a rewind undid (0: none): the kept entries up to it no longer lead to the state, so an
    /// export starts after it, from the state the rewind left.
    private let rewound = Protected<UInt64>(0)
    private let scheduled = Protected(false)
    private let listeners = Protected<[Int: @Sendable () -> Void]>([:])
    private let nextListener = Protected(0)

    /// An empty journal that keeps at most `capacity` entries and about `bytes` bytes of them, and tells open pages
    /// of new ones at most every `interval`.
    public init(capacity: Int = 100_000, bytes: Int = DevtoolsJournal.defaultByteCapacity, interval: Duration = .milliseconds(40)) {
        self.capacity = max(1, capacity)
        self.byteCapacity = max(1, bytes)
        self.interval = interval
    }

    /// Keeps `entry` (the journal's hook: `ScriptedStoreOptions.journal`). Quick: an append under a lock.
    public func hear(_ entry: JournalEntry) {
        let (capacity, byteCapacity) = (self.capacity, self.byteCapacity)
        let bytes = entry.estimatedBytes
        ring.withLock { ring in
            ring.items.append(Kept(entry: entry, bytes: bytes))
            ring.bytes += bytes
            if case .action(let action) = entry.event, let type = action["type"].string, ring.types.count < 1000 {
                ring.types.insert(type)
            }
            if ring.count > capacity || ring.bytes > byteCapacity {
                while ring.count > 1, ring.count > capacity || ring.bytes > byteCapacity {
                    ring.bytes -= ring.items[ring.start].bytes
                    ring.start += 1
                }
                if ring.start > ring.count / 8 + 64 {
                    let first = ring.items[ring.start].entry.sequence
                    if !ring.subscriptions.isEmpty { ring.subscriptions = ring.subscriptions.filter { $0.key >= first } }
                    ring.items.removeFirst(ring.start)
                    ring.start = 0
                }
            }
        }
        guard listeners.withLock({ !$0.isEmpty }) else { return }
        let schedule = scheduled.withLock { scheduled in
            defer { scheduled = true }
            return !scheduled
        }
        if schedule {
            let interval = self.interval
            Task { [weak self] in
                try? await Task.sleep(for: interval)
                self?.tellListeners()
            }
        }
    }

    /// Keeps what the subscriptions did after an entry (the hook `ScriptedStoreOptions.subscriptionsChanged`).
    public func hear(_ change: SubscriptionChange) {
        guard change.after > 0 else { return }
        ring.withLock { ring in
            if var known = ring.subscriptions[change.after] {
                known.launched.merge(change.launched) { $1 }
                known.cancelled = Array(Set(known.cancelled + change.cancelled)).sorted()
                ring.subscriptions[change.after] = known
            } else {
                ring.subscriptions[change.after] = change
            }
        }
    }

    /// What the subscriptions launched and cancelled after entry `sequence`.
    func subscriptions(after sequence: UInt64) -> SubscriptionChange? {
        ring.withLock { $0.subscriptions[sequence] }
    }

    private func tellListeners() {
        scheduled.withLock { $0 = false }
        for listener in listeners.withLock({ Array($0.values) }) { listener() }
    }

    /// Calls `body` (on some thread) at most every `interval` while entries arrive; returns its id for `remove`.
    func listen(_ body: @escaping @Sendable () -> Void) -> Int {
        let id = nextListener.withLock { id in
            defer { id += 1 }
            return id
        }
        listeners.withLock { $0[id] = body }
        return id
    }

    func removeListener(_ id: Int) {
        listeners.withLock { $0[id] = nil }
    }

    /// The store went back to an earlier entry (`ScriptedStore.rewind(to:)`), undoing every entry through
    /// `last`: those stay in the timeline (what happened), but no export holds them or what came before them.
    func rewound(through last: UInt64) {
        rewound.withLock { $0 = max($0, last) }
    }

    /// The newest entry a rewind undid (0: none).
    var rewoundThrough: UInt64 { rewound.withLock { $0 } }

    // MARK: Reading

    /// The sequence of the oldest kept entry and of the newest (0, 0 when none), and how many entries were dropped.
    var bounds: (first: UInt64, last: UInt64, count: Int) {
        ring.withLock { ring in
            guard ring.count > 0 else { return (0, 0, 0) }
            return (ring.items[ring.start].entry.sequence, ring.items[ring.items.count - 1].entry.sequence, ring.count)
        }
    }

    /// The action types seen so far (at most 1,000), sorted.
    var types: [String] { ring.withLock { $0.types.sorted() } }

    /// The kept entry with this sequence number.
    func entry(_ sequence: UInt64) -> Kept? {
        ring.withLock { ring in
            guard ring.count > 0 else { return nil }
            let first = ring.items[ring.start].entry.sequence
            guard sequence >= first else { return nil }
            let index = ring.start + Int(sequence - first)
            guard index < ring.items.count, ring.items[index].entry.sequence == sequence else { return nil }
            return ring.items[index]
        }
    }

    /// Every kept entry, oldest first, taken 4,096 at a time (the ring's lock is not held while `body` runs).
    func forEachKept(_ body: (Kept) throws -> Void) rethrows {
        var offset = 0
        while true {
            let batch = entries(offset: offset, limit: 4096)
            if batch.isEmpty { return }
            for item in batch { try body(item) }
            offset += batch.count
        }
    }

    /// The kept entries from the `offset`th (0: the oldest) on, at most `limit`.
    func entries(offset: Int, limit: Int) -> [Kept] {
        ring.withLock { ring in
            let from = ring.start + max(0, offset)
            let to = min(ring.items.count, from + max(0, limit))
            return from < to ? Array(ring.items[from..<to]) : []
        }
    }

    /// Every kept entry with a sequence after `sequence`, oldest first (for a filter catching up).
    func entries(after sequence: UInt64) -> [Kept] {
        ring.withLock { ring in
            guard ring.count > 0 else { return [] }
            let first = ring.items[ring.start].entry.sequence
            let skip = sequence >= first ? Int(sequence - first + 1) : 0
            let from = ring.start + skip
            return from < ring.items.count ? Array(ring.items[from...]) : []
        }
    }
}
