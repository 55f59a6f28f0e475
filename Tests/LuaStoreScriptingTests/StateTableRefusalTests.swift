import Foundation
import LuaKit
import LuaStoreCore
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// What a state table refuses: being kept past its call, written by a reader, given a metatable.
@Suite(.tags(.concurrency)) struct StateTableRefusalTests: StateRuntimeHarness {
    /// A value refused for what it holds is refused in the same words in every VM — which of two places a shared
    /// table is named at, which of two bad values —, though the tables' hash order differs from VM to VM (a
    /// recording's replay compares the words): the refusal is found again walking the keys in their order.
    @Test func aRefusedValueIsNamedTheSameInEveryVM() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { n = 0, list = { 1 }, m = {} } end
            function app.reduce(state, action)
              local t = {}
              if action.type == "shared" then state.m = { a = t, b = t, c = t, d = t, e = t, f = t }
              elseif action.type == "alias" then return { n = 1, list = state.list, list2 = state.list, list3 = state.list }
              elseif action.type == "bad" then state.m = { k1 = print, k2 = 0/0, k3 = print, k4 = io.write, k5 = 0/0 }
              end
            end
            function app.props(state) return { n = state.n } end
            return app
            """])
        defer { folder.remove() }
        var messages: [String: Set<String>] = [:]
        for _ in 0..<8 {
            let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
            for kind in ["shared", "alias", "bad"] {
                let failure = await store.send(["type": .string(kind)]).failure
                messages[kind, default: []].insert(failure?.error.description ?? "none")
            }
            #expect(try await store.state() == ["n": 0, "list": [1], "m": [:]])
            store.shutdown()
        }
        #expect(messages["shared"] == ["app.lua:5: state.m.b: the same table is in two places of the value stored (the state is a tree: store a copy)"])
        #expect(messages["alias"] == ["app.lua:3: the state reduce returned: state.list2: the same table is in two places of the value stored (the state is a tree: store a copy)"])
        #expect(messages["bad"]?.count == 1 && messages["bad"]?.first?.contains("state.m.k1: a function cannot be stored") == true,
                "\(messages["bad"] ?? [])")
    }

    @Test func stateTablesCannotBeKeptOrWrittenByReaders() async throws {
        try await withRuntime { vm, runtime in
            try vm.call(function(vm, runtime, "setState"), arguments: [.value(["count": 1])])
            let keep = try vm.load("local kept\nreturn function(state) kept = state end, function() return kept.count end", chunkName: "app.lua")
            let functions = try vm.callForReferences(keep, arguments: [])
            try reduceOne(vm, runtime, .reference(functions[0]!), .value(["type": "x"]))
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

    /// A state table kept from one call and used in a later one is refused with an error that says so — after
    /// the proxy caches were emptied (600 proxies made) as before it (below: one item, still cached).
    @Test func stateTablesKeptAcrossCallsAreRefused() async throws {
        try await withRuntime { vm, runtime in
            let make = try vm.load("local items = {} for i = 1, 600 do items[i] = {n = i} end return {items = items}", chunkName: "s.lua")
            try vm.call(function(vm, runtime, "setState"), arguments: [.reference(try #require(try vm.callForReferences(make, arguments: []).first ?? nil))])
            let functions = try vm.callForReferences(try vm.load("""
                local kept
                return function(state) kept = state.items[1] end,
                       function(state) for i = 1, 600 do local _ = state.items[i].n end end,
                       function(state) state.seen = kept.n end
                """, chunkName: "app.lua"), arguments: [])
            for index in 0...1 {
                try reduceOne(vm, runtime, .reference(try #require(functions[index])), .value(["type": "x"]))
            }
            let error = luaError {
                try reduceOne(vm, runtime, .reference(try #require(functions[2])), .value(["type": "x"]))
            }
            #expect(error?.message == "a state table kept from an earlier call was used: state tables (those a function received, and those it stored) can be used only during that call")
            #expect(error?.location == "app.lua:4")
            try vm.call(function(vm, runtime, "rollback"))
        }
    }

    /// Whatever the caches hold: a proxy kept in an upvalue is refused in the next call (a reducer's, or a
    /// reader's), every time, so a session and its replay (whose caches are emptied at other moments) agree.
    @Test func aKeptProxyIsRefusedEvenWhileCached() async throws {
        try await withRuntime { vm, runtime in
            try vm.call(function(vm, runtime, "setState"), arguments: [.value(["items": [["n": 1]]])])
            let functions = try vm.callForReferences(try vm.load("""
                local kept
                return function(state) kept = state.items[1] end,
                       function(state) kept.n = 5 end,
                       function(state) return { n = kept.n } end
                """, chunkName: "app.lua"), arguments: [])
            try reduceOne(vm, runtime, .reference(try #require(functions[0])), .value(["type": "x"]))
            let write = luaError {
                try reduceOne(vm, runtime, .reference(try #require(functions[1])), .value(["type": "x"]))
            }
            #expect(write?.location == "app.lua:3")
            #expect(write?.message.hasPrefix("a state table kept from an earlier call was used") == true)
            try vm.call(function(vm, runtime, "rollback"))
            try vm.call(function(vm, runtime, "register"), arguments: [.value(1), .reference(try #require(functions[2]))])
            let read = luaError { try vm.call(function(vm, runtime, "evaluate"), arguments: [.value(1)]) }
            #expect(read?.location == "app.lua:4")
            #expect(try vm.value(of: try #require(try vm.callForReferences(function(vm, runtime, "state"), arguments: []).first ?? nil))
                == ["items": [["n": 1]]])
        }
    }

    @Test func stateTablesAreRefusedMetatables() async throws {
        try await withRuntime { vm, runtime in
            try vm.call(function(vm, runtime, "setState"), arguments: [.value(["items": []])])
            let before = try vm.call(function(vm, runtime, "state"))
            let script = try vm.load("""
                return function(state)
                  state.items[1] = setmetatable({}, { __index = { hidden = true } })
                end
                """, chunkName: "app.lua")
            let reduce = try #require(try vm.callForReferences(script, arguments: []).first ?? nil)
            let failure = luaError { try reduceOne(vm, runtime, .reference(reduce), .value(["type": "x"])) }
            #expect(failure?.message == "state.items[1]: a table with a metatable cannot be stored in the state (the state holds only data: UTF-8 strings, booleans, finite numbers and tables of those)")
            #expect(failure?.location == "app.lua:2")
            try vm.call(function(vm, runtime, "rollback"))
            #expect(try vm.call(function(vm, runtime, "state")) == before)
        }
    }
}
