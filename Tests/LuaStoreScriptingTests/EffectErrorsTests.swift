import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Effects a script describes wrongly are refused at its line: a constructor of the `luastore` module called with
/// a bad field, at the line of the call; a command or list the reducer returned that is not one, at the line of
/// that reducer's `function` (it is checked once the reducer has returned). The action is undone either way.
struct EffectErrorsTests {
    @Test func badEffectsAreRefusedAtTheScriptsLine() async throws {
        let folder = try AppFolder(["app.lua": """
            local luastore = require("luastore")
            local app = {}
            function app.init() return { n = 0 } end

            function app.reduce(state, action)
              state.n = state.n + 1
              if action.type == "http" then return nil, { luastore.http { url = "http://127.0.0.1:1/", success = "ok" } }
              elseif action.type == "delay" then return nil, { luastore.delay(1, { type = 5 }) }
              elseif action.type == "save" then return nil, { luastore.save("a b", 1) }
              elseif action.type == "timeout" then return nil, { luastore.http { url = "u", success = "s", failure = "f", timeout = -1 } }
              elseif action.type == "handmade" then return nil, { { kind = "http", url = 5 } }
              elseif action.type == "notlist" then return nil, { a = 1 }
              end
            end
            function app.props(state) return { n = state.n } end
            return app
            """])
        defer { folder.remove() }
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.limits.timeBudget = .seconds(5)
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        for (type, location, message) in [
            ("http", "app.lua:7", "luastore.http: 'failure' is required (a string)"),
            ("delay", "app.lua:8", "luastore.delay: 'action.type' must be a string (got number)"),
            ("save", "app.lua:9", "luastore.save: 'key' may hold only letters, digits, '_' and '-'"),
            ("timeout", "app.lua:10", "luastore.http: 'timeout' must be positive"),
            ("handmade", "app.lua:5", "command #1 (http): field 'url' must be a string (got number)"),
            ("notlist", "app.lua:5", "reduce's second result must be a list of commands"),
        ] {
            let failure = await store.send(["type": .string(type)]).failure
            #expect(failure?.error.location == location, "\(type): \(String(describing: failure))")
            #expect(failure?.error.message.hasPrefix(message) == true, "\(type): \(String(describing: failure))")
        }
        #expect(try await store.props() == ["n": 0], "every action was undone")
    }
}
