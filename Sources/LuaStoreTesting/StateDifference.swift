import LuaKit
import LuaStoreScripting

/// Lua states changed and compared as paths: what `ScriptedTestStore` says when a state is not what a test
/// says — a pair of lines per path that differs, written as Lua writes it (`state.todos[1].done`).
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

    /// One pair of lines per place that differs (`JournalComparison`'s walk): `− state.count = 1` / `+ state.count = 2`.
    static func lines(expected: LuaValue, actual: LuaValue) -> String {
        JournalComparison.differences(expected, actual, path: "state")
            .map { "− \($0.path) = \($0.then)\n+ \($0.path) = \($0.now)" }
            .joined(separator: "\n")
    }
}
