import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// No script ever holds a real table of the state, whatever it keeps: not from the props, subscriptions or commands
/// it returned (the host strips the proxies out of a copy, never out of the script's own tables), not from a write
/// that was refused (the value is left as it was, and nothing of it is recorded as being in the state). A table
/// kept so is a proxy, refused in any later call; the state and its journal stay exact.
@Suite struct KeptTablesTests {
    static let app = """
        local luastore = require("luastore")
        local app = {}
        local keptProps, keptCommand, planted
        function app.init() return { items = { { title = "a", done = false } }, n = 0 } end
        function app.reduce(state, action)
          local kind = action.type
          if kind == "fail" then error("on purpose")
          elseif kind == "bump" then state.n = state.n + 1
          elseif kind == "pokeProps" then keptProps.items[1].done = true
          elseif kind == "readProps" then state.n = #keptProps.items
          elseif kind == "copyProps" then state.copy = keptProps.items
          elseif kind == "pokeCommand" then keptCommand.items[1].title = "b"
          elseif kind == "plant" then
            planted = {}
            local refused = pcall(function() state.x = { planted, print } end)
            local swapped = pcall(function() state.z = { state.items, print } end)
            state.y = planted
            state.n = (refused or swapped) and -1 or 1
          elseif kind == "pokePlanted" then planted.sneaky = true
          end
        end
        function app.props(state)
          keptProps = { items = state.items, n = state.n }
          return keptProps
        end
        function app.subscriptions(state)
          keptCommand = { type = "tick", items = state.items }
          return { tick = luastore.timer(3600000, keptCommand) }
        end
        return app
        """

    static let stale = "a state table kept from an earlier call was used"

    /// Each kept table is refused where it is used (the script's line), the action rolled back; the actions
    /// around it keep theirs — whether the proxy caches were renewed since (after a failed action) or not.
    @Test(arguments: [false, true]) func keptTablesAreRefusedAndTheStateStaysExact(renewFirst: Bool) async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        defer { store.shutdown() }
        recorder.observe(store) // (props run for an observer)
        _ = await store.send(["type": "bump"])
        let initial = try await store.state()
        for (kind, line) in [("pokeProps", 9), ("readProps", 10), ("copyProps", 11), ("pokeCommand", 12)] {
            if renewFirst { #expect(await store.send(["type": "fail"]).failure != nil) }
            let outcome = await store.send(["type": .string(kind)])
            let failure = try #require(outcome.failure, "\(kind) was applied: \(outcome)")
            // (Stored, a kept table is refused as the write is checked: one that is not this call's to store.)
            let expected = kind == "copyProps" ? "state.copy: cannot store a table read through `reads` (another's slice, read-only) or kept from an earlier call" : Self.stale
            #expect(failure.error.message.hasPrefix(expected), "\(kind): \(failure.error.message)")
            #expect(failure.error.location == "app.lua:\(line)", "\(kind)")
            #expect(try await store.state() == initial, "\(kind) left the state as it was")
        }
        #expect(await store.send(["type": "bump"]).entry != nil)
        #expect(try await store.state()["n"] == 2)
        #expect(try await store.state()["items"] == [["title": "a", "done": false]])
    }

    /// A value whose write was refused is left as the script made it — the proxy in it still a proxy — and a table
    /// in it, stored afterwards, is claimed as any new table is: the script's reference to it is refused later.
    @Test func aRefusedValueLeavesNothingBehind() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let planted = await store.send(["type": "plant"])
        #expect(planted.entry != nil, "\(planted)")
        #expect(try await store.state()["n"] == 1, "both writes were refused")
        #expect(try await store.state()["y"] == .table(LuaTable()))
        let poke = await store.send(["type": "pokePlanted"])
        #expect(poke.failure?.error.message.hasPrefix(Self.stale) == true, "\(poke)")
        #expect(try await store.state()["y"] == .table(LuaTable()))
        #expect(try await store.state()["items"] == [["title": "a", "done": false]])
    }
}
