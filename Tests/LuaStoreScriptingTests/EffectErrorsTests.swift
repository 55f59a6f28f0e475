import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Effects a script describes wrongly are refused at its line: a constructor of the `luastore` module called with
/// a bad field, at the line of the call; a command or list the reducer returned that is not one, at the line of
/// that reducer's `function` (it is checked once the reducer has returned). The action is undone either way.
struct EffectErrorsTests {
    /// A store of `folder`'s app that reports nothing, with time to spare for each call.
    static func store(_ folder: AppFolder) async throws -> ScriptedStore {
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.limits.timeBudget = .seconds(5)
        return try await ScriptedStore(app: folder.url, options: options)
    }

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
        let store = try await Self.store(folder)
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

    /// A wait the store cannot keep — NaN, infinite, 1e300 or 1e20 seconds, more than a year — and a save of a value
    /// JSON cannot hold are refused at the reducer, by the constructors and in a command the script wrote by hand,
    /// the action undone; they were accepted, and the store crashed converting the wait (every acknowledged action
    /// of a `batch` durable store lost) or failed the save after the action committed.
    @Test func waitsAndSavesTheStoreCannotKeepAreRefusedAtTheReducer() async throws {
        let folder = try AppFolder(["app.lua": """
            local luastore = require("luastore")
            local app = {}
            function app.init() return { n = 0 } end
            local odd = { nan = 0/0, inf = math.huge, huge = 1e300, e20 = 1e20, year = 31536001 }
            function app.reduce(state, action)
              state.n = state.n + 1
              local seconds = odd[action.size]
              if action.type == "delay" then return nil, { luastore.delay(seconds, { type = "x" }) }
              elseif action.type == "timer" then return nil, { luastore.timer(seconds, { type = "x" }) }
              elseif action.type == "http" then return nil, { luastore.http { url = "u", success = "s", failure = "f", timeout = seconds } }
              elseif action.type == "handdelay" then return nil, { { kind = "delay", seconds = seconds, action = { type = "x" } } }
              elseif action.type == "handneg" then return nil, { { kind = "delay", seconds = -1, action = { type = "x" } } }
              elseif action.type == "handtimer" then return nil, { { kind = "timer", every = seconds, action = { type = "x" } } }
              elseif action.type == "handhttp" then return nil, { { kind = "http", url = "u", success = "s", failure = "f", timeout = seconds } }
              elseif action.type == "savenan" then return nil, { luastore.save("k", { list = { 1, 0/0 }, ok = true }) }
              end
            end
            function app.props(state) return { n = state.n } end
            return app
            """])
        defer { folder.remove() }
        let store = try await Self.store(folder)
        defer { store.shutdown() }
        for size in ["nan", "inf", "huge", "e20", "year"] {
            let shown = size == "nan" ? "NaN" : size == "inf" ? "inf" : size == "huge" ? "1e+300" : size == "e20" ? "1e+20" : "31536001"
            for (type, field, location) in [("delay", "'seconds'", "app.lua:8"), ("timer", "'seconds'", "app.lua:9"),
                                            ("http", "'timeout'", "app.lua:10"), ("handdelay", "field 'seconds'", "app.lua:5"),
                                            ("handtimer", "field 'every'", "app.lua:5"), ("handhttp", "field 'timeout'", "app.lua:5")] {
                let failure = await store.send(["type": .string(type), "size": .string(size)]).failure
                #expect(failure?.error.location == location, "\(type) \(size): \(String(describing: failure))")
                #expect(failure?.error.message.contains("\(field) must be a number of seconds up to 31536000 (a year), not \(shown)") == true,
                        "\(type) \(size): \(String(describing: failure))")
            }
        }
        let negative = await store.send(["type": "handneg"]).failure
        #expect(negative?.error.message == "command #1 (delay): field 'seconds' must not be negative", "\(String(describing: negative))")
        let save = await store.send(["type": "savenan"]).failure
        #expect(save?.error.message == "command #1 (save): value.list[2] is not a finite number, which JSON cannot hold", "\(String(describing: save))")
        #expect(try await store.props() == ["n": 0], "every action was undone")
    }
}
