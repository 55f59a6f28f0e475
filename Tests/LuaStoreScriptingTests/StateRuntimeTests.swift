import LuaKit
@testable import LuaStoreScripting
import Testing

/// The state runtime directly: proxies, the journal, identity, read/write tracking.
@Suite struct StateRuntimeTests {
    static let thread = LuaThread(name: "StateRuntimeTests")

    /// A VM with the runtime loaded; `body` gets the VM and the runtime's module table.
    func withRuntime(_ body: (LuaVM, LuaReference) throws -> Void) async throws {
        try await withTaskExecutorPreference(Self.thread) { () throws -> Void in
            let vm = try LuaVM()
            let chunk = try vm.loadTrusted(StateRuntime.source, chunkName: StateRuntime.chunkName)
            let runtime = try #require(try vm.callForReferences(chunk, arguments: []).first ?? nil)
            try body(vm, runtime)
        }
    }

    func function(_ vm: LuaVM, _ runtime: LuaReference, _ name: String) throws -> LuaReference {
        try #require(try vm.field(.string(name), of: runtime))
    }

    @Test func untouchedSubtreesKeepTheirIdentity() async throws {
        try await withRuntime { vm, runtime in
            let make = try vm.load("""
                local items = {}
                for i = 1, 1000 do items[i] = {id = i, done = false} end
                return {items = items, settings = {theme = 'dark'}}
                """, chunkName: "state.lua")
            let initial = try #require(try vm.callForReferences(make, arguments: []).first ?? nil)
            try vm.call(function(vm, runtime, "setState"), arguments: [.reference(initial)])
            let state = try #require(try vm.callForReferences(function(vm, runtime, "state"), arguments: []).first ?? nil)
            let items = try #require(try vm.field("items", of: state))
            let settings = try #require(try vm.field("settings", of: state))
            let item500 = try #require(try vm.field(500, of: items))
            let toggle = try vm.load("return function(state, action) local item = state.items[action.id] item.done = not item.done end", chunkName: "app.lua")
            let reduce = try #require(try vm.callForReferences(toggle, arguments: []).first ?? nil)
            try vm.call(function(vm, runtime, "reduce"), arguments: [.reference(reduce), .value(["type": "toggle", "id": 7])])
            let after = try #require(try vm.callForReferences(function(vm, runtime, "state"), arguments: []).first ?? nil)
            #expect(vm.isSame(state, after), "mutated in place: the root is the same table")
            #expect(vm.isSame(items, try #require(try vm.field("items", of: after))))
            #expect(vm.isSame(settings, try #require(try vm.field("settings", of: after))))
            #expect(vm.isSame(item500, try #require(try vm.field(500, of: items))))
            #expect(try vm.value(of: try #require(try vm.field(7, of: items))) == ["id": 7, "done": true])
        }
    }

    @Test func proxiesBehaveLikeTablesAndRollBack() async throws {
        try await withRuntime { vm, runtime in
            try vm.call(function(vm, runtime, "setState"), arguments: [.value(["list": [3, 1, 2], "map": ["a": 1], "tags": ["x"]])])
            let before = try vm.call(function(vm, runtime, "state"))
            let script = try vm.load("""
                return function(state)
                  table.insert(state.list, 4)
                  table.sort(state.list)
                  table.remove(state.list, 1)
                  local keys = {}
                  for k in pairs(state.map) do keys[#keys + 1] = k end
                  state.map.b = #keys + #state.list
                  state.copy = { inner = state.tags, n = #state.tags }
                  state.tags[1] = nil
                  state.map[state.tags] = 'proxy key'
                  error('undo all of it')
                end
                """, chunkName: "app.lua")
            let reduce = try #require(try vm.callForReferences(script, arguments: []).first ?? nil)
            let failure = luaError { try vm.call(function(vm, runtime, "reduce"), arguments: [.reference(reduce), .value(["type": "x"])]) }
            #expect(failure?.message == "undo all of it")
            #expect(failure?.location == "app.lua:11")
            try vm.call(function(vm, runtime, "rollback"))
            #expect(try vm.call(function(vm, runtime, "state")) == before)
            let succeed = try vm.load("""
                return function(state)
                  table.insert(state.list, 4)
                  table.sort(state.list, function(a, b) return a > b end)
                  state.copy = { inner = state.tags, n = #state.tags }
                end
                """, chunkName: "app.lua")
            let reduceAgain = try #require(try vm.callForReferences(succeed, arguments: []).first ?? nil)
            try vm.call(function(vm, runtime, "reduce"), arguments: [.reference(reduceAgain), .value(["type": "x"])])
            #expect(try vm.call(function(vm, runtime, "state")) == [["list": [4, 3, 2, 1], "map": ["a": 1], "tags": ["x"], "copy": ["inner": ["x"], "n": 1]]])
        }
    }

    @Test func stateTablesCannotBeKeptOrWrittenByReaders() async throws {
        try await withRuntime { vm, runtime in
            try vm.call(function(vm, runtime, "setState"), arguments: [.value(["count": 1])])
            let keep = try vm.load("local kept\nreturn function(state) kept = state end, function() return kept.count end", chunkName: "app.lua")
            let functions = try vm.callForReferences(keep, arguments: [])
            try vm.call(function(vm, runtime, "reduce"), arguments: [.reference(functions[0]!), .value(["type": "x"])])
            let late = luaError { try vm.call(functions[1]!) }
            #expect(late?.message == "state tables can be used only while reduce, props, a selector or subscriptions runs")
            let writer = try vm.load("return function(state) state.count = 2 end", chunkName: "props.lua")
            let props = try #require(try vm.callForReferences(writer, arguments: []).first ?? nil)
            try vm.call(function(vm, runtime, "register"), arguments: [.value(1), .reference(props)])
            let write = luaError { try vm.call(function(vm, runtime, "evaluate"), arguments: [.value(1)]) }
            #expect(write?.message == "props, selectors and subscriptions cannot change the state")
            #expect(write?.location == "props.lua:1")
        }
    }

    @Test func readersRunAgainOnlyWhenTheirInputsChange() async throws {
        try await withRuntime { vm, runtime in
            let make = try vm.load("local items = {} for i = 1, 100 do items[i] = {done = false} end return {items = items, title = 't'}", chunkName: "s.lua")
            try vm.call(function(vm, runtime, "setState"), arguments: [.reference(try #require(try vm.callForReferences(make, arguments: []).first ?? nil))])
            let path = function
            for index in 1...100 {
                let selector = try #require(try vm.callForReferences(path(vm, runtime, "path"), arguments: [.value("items"), .value(.integer(Int64(index)))]).first ?? nil)
                try vm.call(function(vm, runtime, "register"), arguments: [.value(.integer(Int64(index))), .reference(selector)])
                try vm.call(function(vm, runtime, "evaluate"), arguments: [.value(.integer(Int64(index)))])
            }
            let count = try vm.load("return function(state) return #state.items end", chunkName: "count.lua")
            try vm.call(function(vm, runtime, "register"), arguments: [.value(1000), .reference(try #require(try vm.callForReferences(count, arguments: []).first ?? nil))])
            try vm.call(function(vm, runtime, "evaluate"), arguments: [.value(1000)])
            try vm.call(function(vm, runtime, "flush"), arguments: [.value(false)])
            let toggle = try vm.load("return function(state) state.items[42].done = true end", chunkName: "app.lua")
            try vm.call(function(vm, runtime, "reduce"), arguments: [.reference(try #require(try vm.callForReferences(toggle, arguments: []).first ?? nil)), .value(["type": "t"])])
            let ran = try vm.call(function(vm, runtime, "flush"), arguments: [.value(false)])
            #expect(ran.first == [42])
            let append = try vm.load("return function(state) state.items[101] = {done = true}; state.title = 'u' end", chunkName: "app.lua")
            try vm.call(function(vm, runtime, "reduce"), arguments: [.reference(try #require(try vm.callForReferences(append, arguments: []).first ?? nil)), .value(["type": "t"])])
            #expect(try vm.call(function(vm, runtime, "flush"), arguments: [.value(false)]).first == [1000], "only the length reader: no item changed")
        }
    }
}

/// The error `body` throws, which must be a `LuaError`.
func luaError(_ body: () throws -> Void) -> LuaError? {
    do {
        try body()
        return nil
    } catch let error as LuaError {
        return error
    } catch {
        Issue.record("expected a LuaError, got \(error)")
        return nil
    }
}
