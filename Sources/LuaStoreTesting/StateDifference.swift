import LuaKit
import LuaStoreScripting

/// Lua states compared as paths: what `ScriptedTestStore` says when a state is not what a test
/// says — a pair of lines per path that differs, written as Lua writes it (`state.todos[1].done`).
enum StateDifference {
    /// One pair of lines per place that differs (`JournalComparison`'s walk): `− state.count = 1` / `+ state.count = 2`.
    static func lines(expected: LuaValue, actual: LuaValue) -> String {
        JournalComparison.differences(expected, actual, path: "state")
            .map { "− \($0.path) = \($0.then)\n+ \($0.path) = \($0.now)" }
            .joined(separator: "\n")
    }
}
