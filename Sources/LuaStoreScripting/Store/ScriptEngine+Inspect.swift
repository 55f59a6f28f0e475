import LuaKit

/// A shallow look at one table of the state: how many keys it has and a page of them, in display order
/// (numbers ascending, then strings, then `false`, `true`), each with its value — or, for a table, its size.
/// What a state tree shows when a node opens (`ScriptedStore.inspect`): the cost is that table's keys, never
/// the whole state.
public struct StateSlice: Sendable, Equatable {
    /// One key of the table.
    public struct Item: Sendable, Equatable {
        /// The key in the table.
        public var key: LuaKey
        /// The value; `nil` when it is a table (then `size` says how many keys it has).
        public var value: LuaValue?
        /// The number of keys of a table value.
        public var size: Int?
    }

    /// The path of the table from the root of the state.
    public var path: [LuaKey]
    /// How many keys the table has in all.
    public var count: Int
    /// The keys from `offset` on (at most the limit asked for).
    public var items: [Item]
    /// Where `items` starts among the keys in display order.
    public var offset: Int
}

/// A place in the state where a search found its text: the path, and the value there (`nil` for a table).
public struct StateMatch: Sendable, Equatable {
    /// The keys from the root of the state to the place; its last key or its value holds the text.
    public var path: [LuaKey]
    /// The value there; `nil` when it is a table (the text is in its key).
    public var value: LuaValue?
}

// Inspecting the state at any kept point of the history (the devtools): the state moves there, is read, and
// moves back — what the entries in between changed, never the state's size — and no reducer or effect runs.
extension ScriptEngine {
    /// Where the runtime's cursor goes for "just before entry `sequence`": the state its reducer saw.
    func historyIndex(before sequence: UInt64) throws(ScriptFailure) -> Int64 {
        try journal.history.index(before: sequence, newest: journal.sequence)
    }

    /// Runs `body` with the state as it was just after entry `sequence` (or just before, `before`), then
    /// puts the state back; `nil` is where the state is now. Readers are not told (nothing is flushed).
    func withState<T>(at sequence: UInt64?, before: Bool = false, _ body: () throws(LuaError) -> T) throws(ScriptFailure) -> T {
        guard let sequence else {
            do { return try body() } catch { throw ScriptFailure(stage: .reduce, error: error) }
        }
        let index = before ? try historyIndex(before: sequence) : try historyIndex(for: sequence)
        let here = try journal.history.currentIndex(newest: journal.sequence)
        try travel(to: index)
        defer { try? travel(to: here) }
        do {
            return try body()
        } catch {
            throw ScriptFailure(stage: .reduce, error: error)
        }
    }

    func slice(_ path: [LuaKey], offset: Int, limit: Int) throws(LuaError) -> StateSlice? {
        try runtime.slice(path, offset: offset, limit: limit)
    }

    func value(at path: [LuaKey]) throws(LuaError) -> LuaValue {
        try runtime.value(at: path)
    }

    func search(_ text: String, limit: Int) throws(LuaError) -> [StateMatch] {
        try runtime.search(text, limit: limit)
    }

    /// For one entry, in one trip through the history: the values at `paths` just before it (what its changes
    /// replaced), and the props just after it.
    func details(of sequence: UInt64, paths: [[LuaKey]]) throws(ScriptFailure) -> (before: [LuaValue], props: Result<LuaValue, LuaError>) {
        let here = try journal.history.currentIndex(newest: journal.sequence)
        defer { try? travel(to: here) }
        var before: [LuaValue] = []
        if !paths.isEmpty {
            try travel(to: try historyIndex(before: sequence))
            do {
                for path in paths { before.append(try value(at: path)) }
            } catch {
                throw ScriptFailure(stage: .reduce, error: error)
            }
        }
        try travel(to: try historyIndex(for: sequence))
        return (before, Result { () throws(LuaError) in try currentProps() })
    }

}

extension Array where Element == UInt64 {
    /// The position of `value` in this ascending array, if it is there.
    func binarySearch(_ value: UInt64) -> Int? {
        var low = 0, high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low] == value ? low : nil
    }
}

// Questions asked of the whole kept history (the devtools): the state moves forward an entry at a time — what
// each entry changed — and is put back after.
extension ScriptEngine {
    /// The props after each of `sequences` (ascending), or why they could not be computed there.
    func props(along sequences: [UInt64]) throws(ScriptFailure) -> [Result<LuaValue, LuaError>] {
        guard !sequences.isEmpty else { return [] }
        let here = try journal.history.currentIndex(newest: journal.sequence)
        defer { try? travel(to: here) }
        var props: [Result<LuaValue, LuaError>] = []
        props.reserveCapacity(sequences.count)
        for sequence in sequences {
            try travel(to: try historyIndex(for: sequence))
            props.append(Result { () throws(LuaError) in try currentProps() })
        }
        return props
    }

    /// The first kept entry after which `expression` (Lua, reading `state`, as props do: read-only) holds — is
    /// neither nil nor false — going forward from the oldest kept state. `.start` when it already holds before
    /// the oldest kept entry. An expression that fails names itself and its line.
    func firstEntry(where expression: String) throws(ScriptFailure) -> ConditionResult {
        let condition: LuaReference
        do {
            condition = try vm.load("local state = ...\nreturn (\n" + expression + "\n)", chunkName: "=condition")
        } catch {
            throw ScriptFailure(stage: .selector, error: error)
        }
        let id: Int64 = -2
        let here = try journal.history.currentIndex(newest: journal.sequence)
        do {
            try runtime.register(reader: id, condition)
        } catch {
            throw ScriptFailure(stage: .selector, error: error)
        }
        defer {
            runtime.unregister(reader: id)
            try? travel(to: here)
        }
        func holds() throws(ScriptFailure) -> Bool {
            do {
                return try runtime.holds(reader: id)
            } catch {
                runtime.reset()
                throw ScriptFailure(stage: .selector, error: error)
            }
        }
        guard !journal.history.sequences.isEmpty else { return .never(checked: 0) }
        try travel(to: journal.history.firstIndex - 1)
        if try holds() { return .start }
        for (position, sequence) in journal.history.sequences.enumerated() {
            try travel(to: journal.history.firstIndex + Int64(position))
            if try holds() { return .entry(sequence) }
        }
        return .never(checked: journal.history.sequences.count + 1)
    }
}

/// Where a condition on the state first held (`ScriptedStore.firstEntry(where:)`).
public enum ConditionResult: Sendable, Equatable {
    /// It already held before the oldest kept entry.
    case start
    /// It first held just after this entry.
    case entry(UInt64)
    /// It held at none of the `checked` points.
    case never(checked: Int)
}
