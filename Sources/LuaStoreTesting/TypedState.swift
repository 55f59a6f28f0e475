import LuaKit

extension ScriptedTestStore {
    /// An update of the state written on a declared Swift type (the `State` struct `luastore swift-types` writes)
    /// instead of on `LuaValue`: the state is decoded, `update` changes it, and what it changed is written back —
    /// top-level fields the update left alone, and fields the type does not declare, stay as they were.
    ///
    /// ```swift
    /// try await test.send(["type": "todoAdded", "title": "milk"], ScriptedTestStore.typed(TodosState.self) {
    ///     $0.todos.append(TodosTodo(id: 1, title: "milk", done: false))
    ///     $0.nextId = 2
    /// })
    /// ```
    ///
    /// The generated `send(_:)`, `sendFailing(_:)` and `receive(_:)` taking the app's action enum use it.
    public static func typed<State: Codable>(_ type: State.Type = State.self, _ update: @escaping (inout State) throws -> Void)
        -> (inout LuaValue) throws -> Void {
        return { state in
            let before = try LuaDecoder().decode(State.self, from: state, root: "state")
            var after = before
            try update(&after)
            let (old, new) = (try LuaEncoder().encode(before), try LuaEncoder().encode(after))
            guard let oldFields = old.table?.fields, let newFields = new.table?.fields else {
                state = new // (a state that is not a table of fields: the whole of it)
                return
            }
            for key in Set(oldFields.keys).union(newFields.keys) where oldFields[key] != newFields[key] {
                state[key] = newFields[key] ?? .nil
            }
        }
    }
}
