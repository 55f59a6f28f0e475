import LuaKit
import LuaStoreCore

/// Time travel's bookkeeping, a part of the engine (`ScriptEngine.journal`): which committed entries the runtime's
/// history keeps (it holds their changes; this mirrors their sequence numbers and estimated sizes), whether the
/// state stands at a past one, and the actions that arrived meanwhile. It decides what to forget and where the
/// runtime's cursor goes; the engine tells the runtime (`ScriptEngine+History.swift`).
struct History {
    /// How many committed entries the history keeps (0: none).
    private(set) var limit = 0
    /// The sequence numbers of the committed entries kept, oldest first; the runtime's entry for `sequences[i]`
    /// is `firstIndex + i`.
    private(set) var sequences: [UInt64] = []
    private(set) var firstIndex: Int64 = 1
    /// At most this many bytes (estimated: `size(changes:)`) are kept; the oldest entries go first.
    private var bytesLimit = Int.max
    /// The estimated size of each kept entry, parallel to `sequences`, and their sum.
    private var sizes: [Int] = []
    /// When each kept entry ran (the store's clock), parallel to `sequences`.
    private var times: [Int64] = []
    private var bytes = 0
    /// Whether the state is at a past entry (actions are held).
    private(set) var traveling = false
    /// The entry a jump went to.
    private(set) var travelPosition: UInt64 = 0
    /// The store's clock when the first jump left the newest state (it is the clock again on return).
    var timeBeforeTravel: Int64 = 0
    /// Actions that arrived while traveling, in order.
    private var held: [(action: LuaValue, source: ActionSource)] = []

    /// How many actions are held.
    var heldCount: Int { held.count }

    /// The estimated size of a history entry: the entry and, per change, its four slots (table, key, before,
    /// after) and their share of the values — 64 bytes each. Tables a change replaced or removed are kept alive
    /// by the history too, and are not counted.
    static func size(changes: Int) -> Int { 64 + 64 * changes }

    /// Keeps the newest `entries` (0: none) within about `bytes`; how many of the oldest the runtime must drop
    /// beyond its own limit (for the bytes).
    mutating func setLimits(entries: Int, bytes: Int) -> Int {
        limit = max(0, entries)
        bytesLimit = max(0, bytes)
        forgetOldest(sequences.count - limit) // (the runtime keeps `limit` entries by itself)
        return trimmedForBytes()
    }

    /// Notes the entry the runtime kept for journal entry `sequence`; how many of the oldest the runtime must drop.
    mutating func keep(_ sequence: UInt64, changeCount: Int, time: Int64) -> Int {
        sequences.append(sequence)
        times.append(time)
        let size = Self.size(changes: changeCount)
        sizes.append(size)
        bytes += size
        forgetOldest(sequences.count - limit)
        return trimmedForBytes()
    }

    /// Forgets the oldest entries while over the bytes allowed (the newest always stays); how many.
    private mutating func trimmedForBytes() -> Int {
        var count = 0
        var kept = bytes
        while kept > bytesLimit, count < sequences.count - 1 {
            kept -= sizes[count]
            count += 1
        }
        forgetOldest(count)
        return count
    }

    private mutating func forgetOldest(_ count: Int) {
        guard count > 0 else { return }
        sequences.removeFirst(count)
        times.removeFirst(count)
        bytes -= sizes.prefix(count).reduce(0, +)
        sizes.removeFirst(count)
        firstIndex += Int64(count)
    }

    /// The sequence of the entry the state is at (the newest kept, unless traveling).
    var position: UInt64? { traveling ? travelPosition : sequences.last }

    /// When the last kept entry at or before `sequence` ran: the time the state just after `sequence` was seen at.
    func time(at sequence: UInt64) -> Int64? {
        var low = 0, high = sequences.count
        while low < high {
            let middle = (low + high) / 2
            if sequences[middle] <= sequence { low = middle + 1 } else { high = middle }
        }
        return low > 0 ? times[low - 1] : nil
    }

    /// The runtime's index of the newest kept entry.
    var newestIndex: Int64 { firstIndex + Int64(sequences.count) - 1 }

    /// Where the runtime's cursor goes for "just after entry `sequence`"; `newest`: the journal's last sequence.
    func index(for sequence: UInt64, newest: UInt64) throws(ScriptFailure) -> Int64 {
        guard let first = sequences.first, sequence >= first else {
            let kept = sequences.first.map { "entries from \($0) on are kept" } ?? "no entry is kept (set historyEntries)"
            throw ScriptFailure(stage: .reduce, error: LuaError(.runtime, "journal entry \(sequence) is not in the history: \(kept)"))
        }
        guard sequence <= newest else {
            throw ScriptFailure(stage: .reduce, error: LuaError(.runtime, "journal entry \(sequence) has not happened (the newest is \(newest))"))
        }
        // The last kept entry at or before `sequence`: the failed ones after it changed nothing.
        var low = 0, high = sequences.count
        while low < high {
            let middle = (low + high) / 2
            if sequences[middle] <= sequence { low = middle + 1 } else { high = middle }
        }
        return firstIndex + Int64(low) - 1
    }

    /// Where the runtime's cursor goes for "just before entry `sequence`": the state its reducer saw.
    func index(before sequence: UInt64, newest: UInt64) throws(ScriptFailure) -> Int64 {
        if let position = sequences.binarySearch(sequence) {
            return firstIndex + Int64(position) - 1
        }
        return try index(for: sequence, newest: newest) // (a failed entry changed nothing)
    }

    /// The runtime's index of where the state is now.
    func currentIndex(newest: UInt64) throws(ScriptFailure) -> Int64 {
        traveling ? try index(for: travelPosition, newest: newest) : newestIndex
    }

    /// The state went to runtime index `index`, just after entry `sequence`.
    mutating func traveled(to index: Int64, sequence: UInt64) {
        traveling = index != newestIndex
        travelPosition = sequence
    }

    /// The state is back at the newest entry.
    mutating func returned() { traveling = false }

    /// The entries after runtime index `index` are gone (a rewind went on from there).
    mutating func truncate(after index: Int64) {
        let dropped = Int(newestIndex - index)
        sequences.removeLast(dropped)
        times.removeLast(dropped)
        bytes -= sizes.suffix(dropped).reduce(0, +)
        sizes.removeLast(dropped)
        traveling = false
    }

    /// Holds an action that arrived while traveling.
    mutating func hold(_ action: LuaValue, source: ActionSource) { held.append((action, source)) }

    /// Holds a run of actions from outside that arrived while traveling.
    mutating func hold(run actions: ArraySlice<LuaValue>) { held.append(contentsOf: actions.lazy.map { ($0, .outside) }) }

    /// The held actions, in order, given up (for the store to reduce: `RootStore.reinstate(_:)`).
    mutating func takeHeld() -> [(action: LuaValue, source: ActionSource)] {
        defer { held = [] }
        return held
    }
}
