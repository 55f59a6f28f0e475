import Foundation
import LuaKit
import LuaStoreContract
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Swift types from a contract (`luastore swift-types`): `Generated/TodosContract.swift` is what the generator
/// writes for `samples/todos` — compiled with these tests, so the types are Swift the compiler takes — and each of
/// its actions is one the app declares and its reducer reads; its props decode.
@Suite struct SwiftTypesTests {
    static let generated = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Generated/TodosContract.swift")

    @Test func theCompiledFileIsWhatTheGeneratorWritesForTheSample() throws {
        let contract = AppContract.read(app: CLI.packageRoot.appendingPathComponent("samples/todos")).contract
        let text = try SwiftTypes.generate(contract, prefix: "Todos", source: "samples/todos")
        #expect(text == (try String(contentsOf: Self.generated, encoding: .utf8)),
                "samples/todos' contract changed: run `luastore swift-types samples/todos --prefix Todos -o \(Self.generated.path)`")
    }

    /// Every case of the generated action enum is declared (none is refused as undeclared) and does what the
    /// reducer does with it; the props decode as the generated struct.
    @Test func generatedActionsReachTheReducerAndPropsDecode() async throws {
        let folder = try CLI.copySample("todos")
        defer { try? FileManager.default.removeItem(at: folder) }
        var options = Recorder().options
        options.storageFolder = folder.appendingPathComponent(".data")
        let store = try await ScriptedStore(app: folder, options: options)
        defer { store.shutdown() }
        let actions: [TodosAction] = [
            .appStarted, .todosLoaded(key: "todos"), .todoAdded(title: "milk"), .todoAdded(title: "eggs"), .todoToggled(id: 1),
            .todoRenamed(id: 2, title: "bread"), .draftEdited(text: "x"), .filterChanged(filter: "active"), .completedCleared,
            .todoRemoved(id: 2), .filterChanged(filter: "all"),
            .todosLoaded(key: "todos", value: TodosSaved(todos: [TodosTodo(id: 7, title: "saved", done: false)], nextId: 8)),
        ]
        for action in actions {
            let outcome = await store.send(action)
            #expect(outcome.entry != nil, "\(action): \(outcome)")
        }
        let props = try await store.decodedProps()
        #expect(props == TodosProps(filter: .all, items: [TodosTodo(id: 7, title: "saved", done: false)], left: "1 item left", canClear: false))
    }

    @Test func whatHasNoSwiftTypeIsSaidInWords() throws {
        let mixed = try AppFolder(["app.lua": """
            ---@class A
            ---@field x string|integer
            local app = {}
            function app.init() return {} end
            ---@return A
            function app.props() return { x = "a" } end
            function app.reduce() end
            return app
            """])
        defer { mixed.remove() }
        #expect(throws: SwiftTypes.Unsupported.self) { try SwiftTypes.generate(AppContract.read(app: mixed.url).contract, source: "mixed") }
        do {
            _ = try SwiftTypes.generate(AppContract.read(app: mixed.url).contract, source: "mixed")
        } catch {
            #expect(error.description == "field x of A is string|integer: a union that is not of string literals has no Swift type here")
        }
        let plain = try AppFolder(["app.lua": "return { init = function() return {} end, reduce = function() end, props = function() return {} end }"])
        defer { plain.remove() }
        do {
            _ = try SwiftTypes.generate(AppContract.read(app: plain.url).contract, source: "plain")
            Issue.record("an app without a contract has no types")
        } catch {
            #expect(error.description == "plain declares no contract (docs/contracts.md)")
        }
    }
}
