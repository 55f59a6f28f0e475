import LuaKit
import LuaStoreTestSupport
import Testing

/// Decoding Lua tables into Swift types and encoding Swift values into Lua.
@Suite struct CodableTests {
    struct Todo: Codable, Equatable {
        var id: Int
        var title: String
        var done: Bool
        var note: String?
    }

    struct State: Codable, Equatable {
        var todos: [Todo]
        var filter: String
        var ratio: Double
    }

    @Test func decodesAStateFromLua() async throws {
        let state = try await withVM { vm throws in
            let make = try vm.load("""
                return {filter = 'all', ratio = 1, todos = {{id = 1, title = 'a', done = false}, {id = 2.0, title = 'b', done = true, note = 'n'}}}
                """, chunkName: "s.lua")
            let reference = try #require(try vm.callForReferences(make, arguments: []).first ?? nil)
            return try vm.decode(State.self, from: reference, root: "state")
        }
        #expect(state == State(todos: [Todo(id: 1, title: "a", done: false), Todo(id: 2, title: "b", done: true, note: "n")], filter: "all", ratio: 1))
    }

    @Test(arguments: [
        ("{id = 1.5, title = 'x', done = true}", "todo.id", "1.5 is not an integer, Int expected"),
        ("{id = -(0/0), title = 'x', done = true}", "todo.id", "nan is not a finite number, Int expected"),
        ("{id = math.huge, title = 'x', done = true}", "todo.id", "inf is not a finite number, Int expected"),
        ("{id = 1e300, title = 'x', done = true}", "todo.id", "1e+300 is out of range for Int"),
        ("{id = 1, title = 7, done = true}", "todo.title", "expected String, found number"),
        ("{id = 1, done = true}", "todo", "missing field 'title'"),
    ])
    func badFieldsAreNamed(source: String, path: String, message: String) async throws {
        let error = try await withVM { vm throws in
            let make = try vm.load("return " + source, chunkName: "t.lua")
            let reference = try #require(try vm.callForReferences(make, arguments: []).first ?? nil)
            return luaError { _ = try vm.decode(Todo.self, from: reference, root: "todo") }
        }
        #expect(error?.kind == .conversion)
        #expect(error?.path == path)
        #expect(error?.message == message)
    }

    @Test func nestedPathsUseLuaIndices() throws {
        let value: LuaValue = ["todos": [["id": 1, "title": "a", "done": true], ["id": 2, "title": "b", "done": "yes"]], "filter": "all", "ratio": 1]
        let error = luaError { _ = try LuaDecoder().decode(State.self, from: value, root: "state") }
        #expect(error?.path == "state.todos[2].done")
    }

    @Test func encodesSwiftValuesForLua() async throws {
        let state = State(todos: [Todo(id: 1, title: "a", done: false, note: nil)], filter: "active", ratio: 0.25)
        let encoded = try LuaEncoder().encode(state)
        #expect(encoded == ["todos": [["id": 1, "title": "a", "done": false]], "filter": "active", "ratio": 0.25])
        let summary = try await withVM { vm throws in
            let reference = try vm.reference(encoding: state)
            let describe = try vm.load("local s = ...\nreturn s.filter .. ':' .. #s.todos .. ':' .. s.todos[1].title", chunkName: "d.lua")
            return try vm.call(describe, arguments: [.reference(reference)])
        }
        #expect(summary == ["active:1:a"])
    }

    @Test func unsignedValuesBeyondInt64AreRefused() {
        let error = luaError { _ = try LuaEncoder().encode(["big": UInt64.max]) }
        #expect(error?.kind == .conversion)
        #expect(error?.message == "18446744073709551615 does not fit in a Lua integer")
        #expect(error?.path == "big")
    }

    @Test func luaValueIsItselfCodable() throws {
        let value: LuaValue = ["a": [1, 2.5, "x"], "b": true]
        #expect(try LuaDecoder().decode(LuaValue.self, from: try LuaEncoder().encode(value)) == value)
    }
}
