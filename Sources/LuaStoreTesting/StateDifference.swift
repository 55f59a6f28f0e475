import LuaKit
import LuaStoreScripting

/// Lua states compared and changed as paths: what `ScriptedTestStore` says when a state is not what a test
/// says — one line per path that differs, written as Lua writes it (`state.todos[1].done`).
enum StateDifference {
    /// Applies a journal change to a converted state.
    static func apply(_ change: StateChange, to state: inout LuaValue) {
        set(change.value ?? .nil, at: change.path[...], in: &state)
    }

    private static func set(_ value: LuaValue, at path: ArraySlice<LuaKey>, in state: inout LuaValue) {
        guard let key = path.first else {
            state = value
            return
        }
        if path.count == 1 {
            state[key] = value
        } else {
            var child = state[key]
            state[key] = .nil // (so that `child` is the only reference, and is changed in place)
            set(value, at: path.dropFirst(), in: &child)
            state[key] = child
        }
    }

    /// The value at `path` (`nil` where a table on the way is missing).
    static func value(at path: [LuaKey], in state: LuaValue) -> LuaValue {
        path.reduce(state) { value, key in value[key] }
    }

    /// The paths whose values differ between `old` and `new`, as deep as both are tables.
    /// (A table where there was none, or none where there was one, counts as an empty table: the paths are
    /// those of its leaves.)
    static func paths(from old: LuaValue, to new: LuaValue, prefix: [LuaKey] = []) -> [[LuaKey]] {
        let left: LuaTable, right: LuaTable
        switch (old, new) {
        case (.table(let a), .table(let b)): (left, right) = (a, b)
        case (.nil, .table(let b)): (left, right) = (LuaTable(), b)
        case (.table(let a), .nil): (left, right) = (a, LuaTable())
        default: return old == new ? [] : [prefix]
        }
        var keys = Set<LuaKey>()
        left.forEachField { key, _ in keys.insert(key) }
        right.forEachField { key, _ in keys.insert(key) }
        for index in 0..<max(left.array.count, right.array.count) { keys.insert(.integer(Int64(index + 1))) }
        return keys.sorted().flatMap { key in paths(from: left[key], to: right[key], prefix: prefix + [key]) }
    }

    /// One line per path that differs: `− state.count = 1` / `+ state.count = 2`.
    static func lines(expected: LuaValue, actual: LuaValue) -> String {
        paths(from: expected, to: actual)
            .map { line($0, expected: value(at: $0, in: expected), actual: value(at: $0, in: actual)) }
            .joined(separator: "\n")
    }

    static func line(_ path: [LuaKey], expected: LuaValue, actual: LuaValue) -> String {
        let name = LuaPath.render(root: "state", keys: path)
        return "− \(name) = \(expected)\n+ \(name) = \(actual)"
    }
}
