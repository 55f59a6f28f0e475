import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// `luastore.save` and `load` on a real folder: what is loaded is the very value saved — a float stays a float
/// (Lua 5.4 tells `2.0` from `2`), an integer an integer — written by LuaKit's one JSON writer.
@Suite struct StorageTests {
    static let app = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { loaded = false } end
        function app.reduce(state, action)
          if action.type == "save" then
            return nil, { luastore.save("numbers", { f = 2.0, i = 2, z = -0.0, list = { 1.5, 3 }, text = "a\\"b" }) }
          elseif action.type == "load" then
            return nil, { luastore.load("numbers", "loaded") }
          elseif action.type == "loaded" then
            local v = action.value
            state.loaded = table.concat({ math.type(v.f), math.type(v.i), tostring(1 / v.z), math.type(v.list[1]),
              math.type(v.list[2]), v.text }, " ")
          end
        end
        function app.props(state) return { loaded = state.loaded } end
        return app
        """

    @Test func whatIsLoadedIsWhatWasSaved() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        var options = Recorder().options
        options.storageFolder = folder.url.appendingPathComponent(".data")
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        store.dispatch(["type": "save"])
        let file = folder.url.appendingPathComponent(".data/numbers.json")
        #expect(await eventually { FileManager.default.fileExists(atPath: file.path) })
        #expect(try String(contentsOf: file, encoding: .utf8) == #"{"f":2.0,"i":2,"list":[1.5,3],"text":"a\"b","z":-0.0}"#)
        store.dispatch(["type": "load"])
        #expect(await eventually { (try? await store.state()["loaded"])?.string != nil })
        #expect(try await store.state()["loaded"] == #"float integer -inf float integer a"b"#)
    }

    /// A load reads what every save an earlier action asked for wrote, and saves are written in the order they were
    /// asked for: a store's storage effects take their turns in that order, though its effects run side by side (a
    /// load that overtook the save before it read the value before that).
    @Test func aLoadReadsEverySaveAskedForBeforeIt() async throws {
        let folder = try AppFolder(["app.lua": """
            local luastore = require("luastore")
            local app = {}
            function app.init() return { seen = {} } end
            function app.reduce(state, action)
              if action.type == "put" then return nil, { luastore.save("k" .. action.n % 3, { n = action.n }) }
              elseif action.type == "get" then return nil, { luastore.load("k" .. action.n % 3, "got") }
              elseif action.type == "got" then state.seen[#state.seen + 1] = action.value and action.value.n or 0
              end
            end
            function app.props(state) return { seen = #state.seen } end
            return app
            """])
        defer { folder.remove() }
        var options = Recorder().options
        options.storageFolder = folder.url.appendingPathComponent(".data")
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        let rounds = 150
        for n in 1...rounds {
            store.dispatch(["type": "put", "n": .integer(Int64(n))])
            store.dispatch(["type": "get", "n": .integer(Int64(n))])
        }
        #expect(await eventually(timeout: .seconds(60)) { (try? await store.state()["seen"])?.table?.array.count == rounds })
        let seen = try await store.state()["seen"].table?.array ?? []
        #expect(seen == (1...rounds).map { .integer(Int64($0)) })
        for key in 0..<3 { // (the last save of each key is what its file holds)
            let last = (1...rounds).last { $0 % 3 == key }!
            let text = try String(contentsOf: folder.url.appendingPathComponent(".data/k\(key).json"), encoding: .utf8)
            #expect(text == #"{"n":\#(last)}"#)
        }
    }
}
