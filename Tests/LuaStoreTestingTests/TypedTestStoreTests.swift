import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTesting
import LuaStoreTestSupport
import Testing

/// The test store on samples/todos's generated types: the LuaStoreSwiftTypes plugin writes `TodosAction`, `TodosState`
/// and the typed `send`/`receive` into this target at each build (`luastore-types.json`), and each step is written
/// on them — TCA's way — with the checks as strict as on `LuaValue`.
@Suite struct TypedTestStoreTests {
    static let todos = CLI.packageRoot.appendingPathComponent("samples/todos")
    static let saved = TodosSaved(todos: [TodosTodo(id: 1, title: "milk", done: false)], nextId: 2)

    /// The storage stand-ins: `load` answers what was saved before; `save` keeps nothing.
    static let storage: [String: @Sendable (ScriptEffect) async throws -> [LuaValue]] = [
        "load": { _ in [TodosAction.todosLoaded(key: "todos", value: saved).luaValue] },
        "save": { _ in [] },
    ]

    static func saving(_ todos: [TodosTodo], nextId: Int) -> LuaValue {
        ["kind": "save", "key": "todos", "value": TodosSaved(todos: todos, nextId: nextId).luaValue]
    }

    @Test func stepsAreWrittenOnTheGeneratedTypes() async throws {
        let store = try await ScriptedTestStore(app: Self.todos, effects: Self.storage)
        try await store.send(.appStarted, commands: [["kind": "load", "key": "todos", "success": "todosLoaded"]])
        // (A bound no loaded machine reaches: the action comes as soon as the effect's task runs.)
        try await store.receive(.todosLoaded(key: "todos", value: Self.saved), timeout: .seconds(60)) {
            $0.loaded = true
            $0.todos = Self.saved.todos
            $0.nextId = 2
        }
        let bread = TodosTodo(id: 2, title: "bread", done: false)
        try await store.send(.todoAdded(title: "bread"), commands: [Self.saving([Self.saved.todos[0], bread], nextId: 3)]) {
            $0.todos.append(bread)
            $0.nextId = 3
        }
        try await store.send(.filterChanged(filter: "done")) { $0.filter = .done }
        #expect(try store.decodedState().todos.map(\.title) == ["milk", "bread"])
        #expect(try await store.store.decodedProps().items.isEmpty) // (nothing done yet)
        try await store.finish(timeout: .seconds(60))
    }

    @Test func aWrongTypedUpdateFailsNamingThePath() async throws {
        let store = try await ScriptedTestStore(app: Self.todos, effects: Self.storage)
        let failure = await #expect(throws: TestStoreFailure.self) {
            try await store.send(.filterChanged(filter: "active")) { $0.filter = .done }
        }
        #expect(failure?.description.contains("state.filter") == true, "\(failure.map { "\($0)" } ?? "")")
        #expect(failure?.description.contains("\"done\"") == true)
    }

    /// An update on the typed state writes back only what it changed: fields the class does not declare, which
    /// a reducer may keep beside the declared ones, stay as they are.
    @Test func aTypedUpdateKeepsWhatTheTypeDoesNotDeclare() throws {
        var state: LuaValue = ["todos": [], "nextId": 1, "filter": "all", "loaded": false, "draft": "half a word"]
        try ScriptedTestStore.typed(TodosState.self) { $0.nextId = 7 }(&state)
        #expect(state == ["todos": [], "nextId": 7, "filter": "all", "loaded": false, "draft": "half a word"])
    }

    @Test func anUndeclaredActionFailsItsTypedStep() async throws {
        let store = try await ScriptedTestStore(app: Self.todos, effects: Self.storage)
        let failure = try await store.sendFailing(["type": "todoAdded", "title": 3])
        #expect(failure.stage == .undeclared)
        #expect(failure.error.message == "action.title is 3, not string")
        try await store.finish(timeout: .seconds(60))
    }
}
