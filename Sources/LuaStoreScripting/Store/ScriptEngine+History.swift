import LuaKit
import LuaStoreCore

// Time travel: the runtime keeps, for each committed entry, what it changed with the values before and after
// (`state_journal.lua`, "History"); going to a point writes those, so no reducer or effect runs again.
extension ScriptEngine {
    /// Keeps the newest `entries` committed entries (0: none), within about `bytes`.
    func setHistory(entries: Int, bytes: Int = .max) {
        historyLimit = max(0, entries)
        historyBytesLimit = max(0, bytes)
        updateJournaling()
        _ = try? vm.call(runtime[.setHistory], arguments: [.value(.integer(Int64(historyLimit)))])
        forgetOldest(historySequences.count - historyLimit, inRuntime: false)
        trimHistoryBytes()
    }

    /// The estimated size of a history entry: the entry and, per change, its four slots (table, key, before,
    /// after) and their share of the values — 64 bytes each. Tables a change replaced or removed are kept alive
    /// by the history too, and are not counted.
    static func historySize(changes: Int) -> Int { 64 + 64 * changes }

    /// Notes the entry the runtime kept for journal entry `sequence`, then keeps the history within its bounds.
    func keepInHistory(_ sequence: UInt64, changeCount: Int) {
        historySequences.append(sequence)
        let size = Self.historySize(changes: changeCount)
        historySizes.append(size)
        historyBytes += size
        // (The runtime keeps `historyLimit` entries by itself; only the Swift side's mirror is trimmed here.)
        forgetOldest(historySequences.count - historyLimit, inRuntime: false)
        trimHistoryBytes()
    }

    private func trimHistoryBytes() {
        var count = 0
        var bytes = historyBytes
        while bytes > historyBytesLimit, count < historySequences.count - 1 { // the newest entry always stays
            bytes -= historySizes[count]
            count += 1
        }
        forgetOldest(count, inRuntime: true)
    }

    private func forgetOldest(_ count: Int, inRuntime: Bool) {
        guard count > 0 else { return }
        if inRuntime { _ = try? vm.call(runtime[.dropOldestHistory], arguments: [.value(.integer(Int64(count)))]) }
        historySequences.removeFirst(count)
        historyBytes -= historySizes.prefix(count).reduce(0, +)
        historySizes.removeFirst(count)
        historyFirstIndex += Int64(count)
    }

    /// The sequence of the entry the state is at (the newest kept, unless traveling).
    var historyPosition: UInt64? { traveling ? travelPosition : historySequences.last }

    /// Where the runtime's cursor goes for "just after entry `sequence`".
    func historyIndex(for sequence: UInt64) throws(ScriptFailure) -> Int64 {
        guard let first = historySequences.first, sequence >= first else {
            let kept = historySequences.first.map { "entries from \($0) on are kept" } ?? "no entry is kept (set historyEntries)"
            throw ScriptFailure(stage: .reduce, error: LuaError(.runtime, "journal entry \(sequence) is not in the history: \(kept)"))
        }
        guard sequence <= journalSequence else {
            throw ScriptFailure(stage: .reduce, error: LuaError(.runtime, "journal entry \(sequence) has not happened (the newest is \(journalSequence))"))
        }
        // The last kept entry at or before `sequence`: the failed ones after it changed nothing.
        var low = 0, high = historySequences.count
        while low < high {
            let middle = (low + high) / 2
            if historySequences[middle] <= sequence { low = middle + 1 } else { high = middle }
        }
        return historyFirstIndex + Int64(low) - 1
    }

    func travel(to index: Int64) throws(ScriptFailure) {
        do {
            try vm.call(runtime[.travel], arguments: [.value(.integer(index))])
        } catch {
            throw ScriptFailure(stage: .reduce, error: error)
        }
        subscriptionsDirty = true
    }

    var newestIndex: Int64 { historyFirstIndex + Int64(historySequences.count) - 1 }

    func jump(to sequence: UInt64) throws(ScriptFailure) {
        let index = try historyIndex(for: sequence)
        try travel(to: index)
        traveling = index != newestIndex
        travelPosition = sequence
        flush()
    }

    /// Back to the newest state; returns the held actions, each with its source (for the store to reduce, in
    /// order: `RootStore.reinstate(_:)`).
    func resume() -> [(action: LuaValue, source: ActionSource)] {
        if traveling {
            try? travel(to: newestIndex) // (the newest entry is always kept)
            traveling = false
            flush()
        }
        defer { held = [] }
        return held.map { (action: $0.0, source: $0.1) }
    }

    /// Goes on from entry `sequence`: later entries are dropped. Returns the held actions.
    func rewind(to sequence: UInt64) throws(ScriptFailure) -> [(action: LuaValue, source: ActionSource)] {
        let index = try historyIndex(for: sequence)
        try travel(to: index)
        _ = try? vm.call(runtime[.truncateHistory], arguments: [])
        let dropped = Int(newestIndex - index)
        historySequences.removeLast(dropped)
        historyBytes -= historySizes.suffix(dropped).reduce(0, +)
        historySizes.removeLast(dropped)
        traveling = false
        _ = try? vm.call(runtime[.markAllDirty], arguments: [])
        snapshotForPersistence() // (the journal's later entries no longer lead to this state)
        flush()
        defer { held = [] }
        return held.map { (action: $0.0, source: $0.1) }
    }

    /// The state just after entry `sequence`, converted; the state is put back where it was.
    func state(at sequence: UInt64) throws(ScriptFailure) -> LuaValue {
        try withState(at: sequence) { () throws(LuaError) in try state() }
    }
}
