import LuaKit

/// Where what was recorded and what happens now differ: `luastore replay`, and the devtools' replay and import,
/// compare with these. Costs what the compared changes (or values) hold, never the state's size.
public enum JournalComparison {
    /// One place that differs: its path (`state.todos[3].done`), the value then and now (`nil` where absent).
    public struct Difference: Sendable, Equatable {
        /// Where, as Lua writes it (`state.todos[3].done`).
        public var path: String
        /// The value then: recorded, or the first of the two compared.
        public var then: LuaValue
        /// The value now: replayed, or the second of the two compared.
        public var now: LuaValue

        /// The place `path`, with its value `then` and `now`.
        public init(path: String, then: LuaValue, now: LuaValue) {
            self.path = path
            self.then = then
            self.now = now
        }
    }

    /// The paths whose new value differs between two change lists, in path order, at most `limit`; a path one side
    /// did not change shows as "(unchanged)" on that side.
    public static func differences(_ then: [StateChange], _ now: [StateChange], limit: Int = 50) -> [Difference] {
        if then == now { return [] } // (the same order: both as the barrier wrote them)
        var before: [[LuaKey]: LuaValue] = [:]
        for change in then { before[change.path] = change.value ?? .nil }
        var after: [[LuaKey]: LuaValue] = [:]
        for change in now { after[change.path] = change.value ?? .nil }
        var differences: [Difference] = []
        for path in Set(before.keys).union(after.keys).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let was = before[path], value = after[path]
            guard was != value else { continue }
            differences.append(Difference(path: LuaPath.render(root: "state", keys: path), then: was ?? "(unchanged)",
                                          now: value ?? "(unchanged)"))
            if differences.count == limit { break }
        }
        return differences
    }

    /// Where two values differ, depth first in key order, at most `limit` places: a leaf (or a table) whose value
    /// differs; tables that differ only as wholes are that one place.
    public static func differences(_ a: LuaValue, _ b: LuaValue, path: String, limit: Int = 50) -> [Difference] {
        var differences: [Difference] = []
        walk(a, b, path: path, limit: limit, into: &differences)
        return differences
    }

    private static func walk(_ a: LuaValue, _ b: LuaValue, path: String, limit: Int, into differences: inout [Difference]) {
        guard differences.count < limit, a != b else { return }
        guard let left = a.table, let right = b.table else {
            differences.append(Difference(path: path, then: a, now: b))
            return
        }
        let found = differences.count
        var keys = Set(left.fields.keys).union(right.fields.keys)
        for index in 0..<max(left.array.count, right.array.count) { keys.insert(.integer(Int64(index + 1))) }
        for key in keys.sorted() { walk(left[key], right[key], path: path + LuaPath.render(key), limit: limit, into: &differences) }
        if differences.count == found { differences.append(Difference(path: path, then: a, now: b)) }
    }
}
