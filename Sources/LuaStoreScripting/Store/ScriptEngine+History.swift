import LuaKit
import LuaStoreCore

// Time travel: the runtime keeps, for each committed entry, what it changed with the values before and after
// (`state_journal.lua`, "History"); going to a point writes those, so no reducer or effect runs again.
extension ScriptEngine {
    /// Keeps the newest `entries` committed entries (0: none), within about `bytes`.
    func setHistory(entries: Int, bytes: Int = .max) {
        history.limit = max(0, entries)
        history.bytesLimit = max(0, bytes)
        updateJournaling()
        _ = try? vm.call(runtime[.setHistory], arguments: [.value(.integer(Int64(history.limit)))])
        forgetOldest(history.sequences.count - history.limit, inRuntime: false)
        trimHistoryBytes()
    }

    /// The estimated size of a history entry: the entry and, per change, its four slots (table, key, before,
    /// after) and their share of the values — 64 bytes each. Tables a change replaced or removed are kept alive
    /// by the history too, and are not counted.
    static func historySize(changes: Int) -> Int { 64 + 64 * changes }

    /// Notes the entry the runtime kept for journal entry `sequence`, then keeps the history within its bounds.
    func keepInHistory(_ sequence: UInt64, changeCount: Int) {
        history.sequences.append(sequence)
        let size = Self.historySize(changes: changeCount)
        history.sizes.append(size)
        history.bytes += size
        // (The runtime keeps `historyLimit` entries by itself; only the Swift side's mirror is trimmed here.)
        forgetOldest(history.sequences.count - history.limit, inRuntime: false)
        trimHistoryBytes()
    }

    private func trimHistoryBytes() {
        var count = 0
        var bytes = history.bytes
        while bytes > history.bytesLimit, count < history.sequences.count - 1 { // the newest entry always stays
            bytes -= history.sizes[count]
            count += 1
        }
        forgetOldest(count, inRuntime: true)
    }

    private func forgetOldest(_ count: Int, inRuntime: Bool) {
        guard count > 0 else { return }
        if inRuntime { _ = try? vm.call(runtime[.dropOldestHistory], arguments: [.value(.integer(Int64(count)))]) }
        history.sequences.removeFirst(count)
        history.bytes -= history.sizes.prefix(count).reduce(0, +)
        history.sizes.removeFirst(count)
        history.firstIndex += Int64(count)
    }

    /// The sequence of the entry the state is at (the newest kept, unless traveling).
    var historyPosition: UInt64? { history.traveling ? history.travelPosition : history.sequences.last }

    /// Where the runtime's cursor goes for "just after entry `sequence`".
    func historyIndex(for sequence: UInt64) throws(ScriptFailure) -> Int64 {
        guard let first = history.sequences.first, sequence >= first else {
            let kept = history.sequences.first.map { "entries from \($0) on are kept" } ?? "no entry is kept (set historyEntries)"
            throw ScriptFailure(stage: .reduce, error: LuaError(.runtime, "journal entry \(sequence) is not in the history: \(kept)"))
        }
        guard sequence <= journalSequence else {
            throw ScriptFailure(stage: .reduce, error: LuaError(.runtime, "journal entry \(sequence) has not happened (the newest is \(journalSequence))"))
        }
        // The last kept entry at or before `sequence`: the failed ones after it changed nothing.
        var low = 0, high = history.sequences.count
        while low < high {
            let middle = (low + high) / 2
            if history.sequences[middle] <= sequence { low = middle + 1 } else { high = middle }
        }
        return history.firstIndex + Int64(low) - 1
    }

    func travel(to index: Int64) throws(ScriptFailure) {
        do {
            try vm.call(runtime[.travel], arguments: [.value(.integer(index))])
        } catch {
            throw ScriptFailure(stage: .reduce, error: error)
        }
        subscriptionsDirty = true
    }

    var newestIndex: Int64 { history.firstIndex + Int64(history.sequences.count) - 1 }

    func jump(to sequence: UInt64) throws(ScriptFailure) {
        let index = try historyIndex(for: sequence)
        try travel(to: index)
        history.traveling = index != newestIndex
        history.travelPosition = sequence
        flush()
    }

    /// Back to the newest state; returns the held actions, each with its source (for the store to reduce, in
    /// order: `RootStore.reinstate(_:)`).
    func resume() -> [(action: LuaValue, source: ActionSource)] {
        if history.traveling {
            try? travel(to: newestIndex) // (the newest entry is always kept)
            history.traveling = false
            flush()
        }
        defer { history.held = [] }
        return history.held.map { (action: $0.0, source: $0.1) }
    }

    /// Goes on from entry `sequence`: later entries are dropped. Returns the held actions.
    func rewind(to sequence: UInt64) throws(ScriptFailure) -> [(action: LuaValue, source: ActionSource)] {
        let index = try historyIndex(for: sequence)
        try travel(to: index)
        _ = try? vm.call(runtime[.truncateHistory], arguments: [])
        let dropped = Int(newestIndex - index)
        history.sequences.removeLast(dropped)
        history.bytes -= history.sizes.suffix(dropped).reduce(0, +)
        history.sizes.removeLast(dropped)
        history.traveling = false
        _ = try? vm.call(runtime[.markAllDirty], arguments: [])
        snapshotForPersistence() // (the journal's later entries no longer lead to this state)
        flush()
        defer { history.held = [] }
        return history.held.map { (action: $0.0, source: $0.1) }
    }

    /// The state just after entry `sequence`, converted; the state is put back where it was.
    func state(at sequence: UInt64) throws(ScriptFailure) -> LuaValue {
        try withState(at: sequence) { () throws(LuaError) in try state() }
    }
}

/// Time travel's state: the entries the runtime's history keeps, and whether (and where) the state stands in the
/// past, with the actions that arrived meanwhile.
struct HistoryState {
    /// How many committed entries the history keeps (0: none).
    var limit = 0
    /// The sequence numbers of the committed entries kept, oldest first; the runtime's entry for `sequences[i]`
    /// is `firstIndex + i`.
    var sequences: [UInt64] = []
    var firstIndex: Int64 = 1
    /// At most this many bytes (estimated: `HistorySize`) are kept; the oldest entries go first.
    var bytesLimit = Int.max
    /// The estimated size of each kept entry, parallel to `sequences`, and their sum.
    var sizes: [Int] = []
    var bytes = 0
    /// Whether the state is at a past entry (actions are held).
    var traveling = false
    /// The entry a jump went to.
    var travelPosition: UInt64 = 0
    /// Actions that arrived while traveling, in order.
    var held: [(LuaValue, ActionSource)] = []
}
