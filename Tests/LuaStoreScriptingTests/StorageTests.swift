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
}
