import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The standard libraries in a store: a module may add functions to `string`, `table`, `math`, `utf8` and `coroutine`
/// as it loads (method syntax on strings sees `string`'s), and assign a standard field the value it has; replacing
/// or removing a standard function is refused naming it, and so is adding one as the store runs. Each plugin's
/// additions are its own.
struct LibraryAdditionsTests {
    /// A plugin that adds `string.split`, `table.count` and `math.clamp` as it loads, each its own way.
    static func plugin(_ name: String, separator: String) -> String {
        """
        local string = string -- (a library keeps its libraries in locals: its functions then have no `_ENV`)
        function string.split(s)
          local out = {}
          for piece in (s .. "\(separator)"):gmatch("(.-)%\(separator)") do out[#out + 1] = piece end
          return out
        end
        table.count = function(t) local n = 0 for _ in pairs(t) do n = n + 1 end return n .. "\(name)" end
        math.clamp = function(x, low, high) return math.max(low, math.min(high, x)) end
        table.unpack = table.unpack or unpack -- (a polyfill: the value it has)
        local function words(s) return s:split() end -- (method syntax, from a function without `_ENV`)
        return {
          init = function() return { words = "", count = "", keys = "" } end,
          reduce = function(slice, action)
            if action.type == "split" then
              local parts = words(action.text)
              slice.words = #parts .. ":" .. (parts[2] or "") .. ":" .. #(action.text):split()
              slice.count = table.count({ 1, 2, 3 }) .. "/" .. math.clamp(12, 0, 10)
              local keys = {}
              for key in pairs(string) do if key == "split" or key == "find" then keys[#keys + 1] = key end end
              table.sort(keys)
              slice.keys = table.concat(keys, ",") .. "," .. tostring(rawget(string, "split") ~= nil)
                .. "," .. tostring(next(table) ~= nil)
            elseif action.type == "replace" then
              string.find = function() end
            elseif action.type == "remove" then
              table.insert = nil
            elseif action.type == "add" then
              string.shout = string.upper
            elseif action.type == "again" then
              string.split = nil
            end
          end,
        }
        """
    }

    static func folder() throws -> AppFolder {
        try AppFolder([
            "app.lua": """
                return { init = function() return {} end,
                         props = function(state) return { a = state.a, b = state.b, host = tostring(string.split) } end }
                """,
            "luastore.json": #"{"name": "host", "version": "1.0.0", "luastore": "^1.0", "mounts": {"a": "plugins/a", "b": "plugins/b"}}"#,
            "plugins/a/luastore.json": #"{"name": "a", "version": "1.0.0", "luastore": "^1.0"}"#,
            "plugins/a/app.lua": plugin("a", separator: ","),
            "plugins/b/luastore.json": #"{"name": "b", "version": "1.0.0", "luastore": "^1.0"}"#,
            "plugins/b/app.lua": plugin("b", separator: ";"),
        ])
    }

    @Test func eachPluginSeesItsOwnAdditions() async throws {
        let folder = try Self.folder()
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(await store.send(["type": "split", "text": "x,y;z"]).failure == nil)
        let props = try await store.props()
        #expect(props["a"] == ["words": "2:y;z:2", "count": "3a/10", "keys": "find,split,true,true"], "\(props)")
        #expect(props["b"] == ["words": "2:z:2", "count": "3b/10", "keys": "find,split,true,true"], "\(props)")
        #expect(props["host"] == "nil", "the app's own namespace sees neither plugin's additions")
    }

    /// Replacing or removing a standard function is refused naming it and the line, and so is changing the
    /// libraries as the store runs; each refused action changes nothing, and the functions work on.
    @Test func replacingAStandardFunctionOrAddingAsTheStoreRunsIsRefused() async throws {
        let folder = try Self.folder()
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        for (type, message, line) in [
            ("replace", "cannot replace string.find: Lua's standard functions stay as they are in a store", 24),
            ("remove", "cannot remove table.insert: Lua's standard functions stay as they are in a store", 26),
            ("add", "cannot set string.shout while the store runs", 28),
            ("again", "cannot set string.split while the store runs", 30),
        ] {
            let failure = await store.send(["type": .string(type)]).failure
            #expect(failure?.error.message.hasPrefix(message) == true, "\(type): \(String(describing: failure))")
            #expect(["plugins/a/app.lua:\(line)", "plugins/b/app.lua:\(line)"].contains(failure?.error.location),
                    "\(type): \(String(describing: failure?.error))")
        }
        #expect(await store.send(["type": "split", "text": "p,q"]).failure == nil)
        #expect(try await store.props()["a"]["words"] == "2:q:2")
    }
}
