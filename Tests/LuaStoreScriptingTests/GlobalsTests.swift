import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// A scripted store's globals: Lua's as its modules load (helpers defined at the top of `app.lua`, a module that
/// sets a global, a `require` inside a reducer), refused as the store runs — each refusal names its line and
/// undoes its action — and each plugin's its own.
struct GlobalsTests {
    static let app = """
        local app = {}
        function label(n) return "n=" .. n end -- a global helper, as a newcomer writes it
        VERSION = "1"
        function app.init() return { n = 0, text = label(0) } end
        function app.reduce(state, action)
          if action.type == "add" then
            state.n = state.n + 1
            state.text = label(state.n)
          elseif action.type == "leak" then
            state.n = state.n + 100
            lastAction = action.type
          elseif action.type == "redefine" then
            state.n = state.n + 100
            label = nil
          elseif action.type == "late" then
            local helper = require("helper")
            state.text = helper.describe(state.n) .. " " .. tostring(helperLoaded)
          end
        end
        function app.props(state) return { n = state.n, text = state.text, version = VERSION } end
        return app
        """

    @Test func globalsAreSetAsModulesLoadAndRefusedAsTheStoreRuns() async throws {
        let folder = try AppFolder([
            "app.lua": Self.app,
            "helper.lua": "helperLoaded = true\nreturn { describe = function(n) return 'helped ' .. n end }",
        ])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(try await store.props() == ["n": 0, "text": "n=0", "version": "1"])
        #expect(await store.send(["type": "add"]).failure == nil)
        for (type, line, name) in [("leak", 11, "lastAction"), ("redefine", 14, "label")] {
            let failure = await store.send(["type": .string(type)]).failure
            #expect(failure?.stage == .reduce)
            #expect(failure?.error.message.hasPrefix("cannot set global '\(name)' while the store runs") == true, "\(String(describing: failure))")
            #expect(failure?.error.location == "app.lua:\(line)", "\(String(describing: failure?.error))")
        }
        #expect(await store.send(["type": "late"]).failure == nil, "a module a reducer requires sets its globals as it loads")
        #expect(await store.send(["type": "add"]).failure == nil, "the refused actions changed nothing: label is still there")
        #expect(try await store.props() == ["n": 2, "text": "n=2", "version": "1"])
        let state = try await store.state()
        #expect(state["n"] == 2)
    }

    /// `init` runs after the lock: a store resumed from a snapshot skips it, so a global it set would be gone.
    @Test func initMayNotSetGlobals() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init()
              started = true
              return {}
            end
            function app.reduce(state, action) end
            function app.props(state) return {} end
            return app
            """])
        defer { folder.remove() }
        do {
            let store = try await ScriptedStore(app: folder.url)
            store.shutdown()
            Issue.record("the store loaded")
        } catch {
            let failure = error
            #expect(failure.stage == .initialize)
            #expect(failure.error.message.hasPrefix("cannot set global 'started' while the store runs"), "\(failure)")
            #expect(failure.error.location == "app.lua:3")
        }
    }

    /// Two mounted plugins each have their own globals, of the same name; the app's are its own too.
    @Test func eachPluginHasItsOwnGlobals() async throws {
        func plugin(_ name: String) -> String {
            """
            NAME = "\(name)"
            function describe() return NAME end
            return {
              init = function() return { seen = "" } end,
              reduce = function(slice, action) slice.seen = describe() end,
            }
            """
        }
        let folder = try AppFolder([
            "app.lua": """
                NAME = "host"
                return { init = function() return {} end,
                         props = function(state) return { a = state.a.seen, b = state.b.seen, host = NAME } end }
                """,
            "luastore.json": #"{"name": "host", "version": "1.0.0", "luastore": "^1.0", "mounts": {"a": "plugins/a", "b": "plugins/b"}}"#,
            "plugins/a/luastore.json": #"{"name": "a", "version": "1.0.0", "luastore": "^1.0"}"#, "plugins/a/app.lua": plugin("a"),
            "plugins/b/luastore.json": #"{"name": "b", "version": "1.0.0", "luastore": "^1.0"}"#, "plugins/b/app.lua": plugin("b"),
        ])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(await store.send(["type": "go"]).failure == nil)
        #expect(try await store.props() == ["a": "a", "b": "b", "host": "host"])
    }
}

extension GlobalsTests {
    /// An app (or a plugin) may ask for strict globals in its manifest: a function reading a global nobody set fails
    /// naming it and its line, and its action is undone; the top level still declares. A value that is not a
    /// boolean is refused as the manifest is read.
    @Test func aManifestMayAskForStrictGlobals() async throws {
        let folder = try AppFolder([
            "app.lua": """
                local app = {}
                step = 1 -- (the top level declares)
                function app.init() return { n = 0 } end
                function app.reduce(state, action) state.n = state.n + (action.type == "typo" and totl or step) end
                function app.props(state) return { n = state.n } end
                return app
                """,
            "luastore.json": #"{"name": "strict", "version": "1.0.0", "luastore": "^1.0", "strictGlobals": true}"#,
        ])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(await store.send(["type": "add"]).failure == nil)
        let failure = await store.send(["type": "typo"]).failure
        #expect(failure?.error.message == "undeclared global 'totl'", "\(String(describing: failure))")
        #expect(failure?.error.location == "app.lua:4")
        #expect(try await store.props() == ["n": 1])

        try Data(#"{"name": "strict", "version": "1.0.0", "luastore": "^1.0", "strictGlobals": "yes"}"#.utf8)
            .write(to: folder.url.appendingPathComponent("luastore.json"))
        #expect(throws: ManifestFailure("'strictGlobals' must be true or false")) { try AppManifest.load(folder: folder.url) }
    }
}
