import Foundation
import LuaStoreTestSupport
import Testing

/// Manifests through the built binary: `--version` names the scripting API; `run`, `check` and `test` refuse an
/// app whose manifest needs another API or is not valid, in words, before any of its code runs.
@Suite struct ManifestCLITests {
    static let app = """
        local app = {}
        function app.init() print("init ran") return { count = 0 } end
        function app.reduce(state, action) state.count = state.count + 1 end
        function app.props(state) return { count = state.count } end
        return app
        """

    func folder(manifest: String) throws -> URL {
        let folder = try CLI.makeApp(Self.app)
        try Data(manifest.utf8).write(to: folder.appendingPathComponent("luastore.json"))
        try Data("describe('app', function() it('loads', function() assert.is_true(true) end) end)\n".utf8)
            .write(to: folder.appendingPathComponent("app_spec.lua"))
        return folder
    }

    @Test func theVersionNamesTheScriptingAPI() async throws {
        let version = try await CLI.run(["--version"])
        #expect(version.status == 0)
        #expect(version.output == "luastore, scripting API 1.0.0 (what an app's luastore.json names in its \"luastore\" range)\n")
    }

    @Test func appsNeedingAnotherAPIOrWithABadManifestAreRefused() async throws {
        let future = try folder(manifest: #"{"name": "future", "version": "2.0.0", "luastore": ">=2.0.0"}"#)
        defer { try? FileManager.default.removeItem(at: future) }
        let said = "luastore.json 'future' needs the scripting API >=2.0.0, and this host has 1.0.0 (run a luastore whose API is in that range)"
        // (No input: the run is refused before it reads any, and writing to it could raise SIGPIPE here.)
        let run = try await CLI.run(["run", future.path, "--format", "json"], input: "")
        #expect(run.status == 2)
        #expect(run.errors == "luastore: cannot load \(future.path): \(said) (load)\n", "\(run.errors)")
        #expect(!run.output.contains("init ran") && !run.errors.contains("init ran"), "no code of it ran")
        let check = try await CLI.run(["check", future.path])
        #expect(check.status == 1)
        #expect(check.errors.contains(said), "\(check.errors)")
        let test = try await CLI.run(["test", future.path])
        #expect(test.status == 2)
        #expect(test.errors == "luastore: cannot test \(future.path): \(said)\n", "\(test.errors)")

        let typo = try folder(manifest: #"{"name": "typo", "version": "1.0.0", "luastore": "^1.0", "capabilites": {}}"#)
        defer { try? FileManager.default.removeItem(at: typo) }
        let checked = try await CLI.run(["check", typo.path])
        #expect(checked.status == 1)
        #expect(checked.errors.contains("luastore.json has an unknown field 'capabilites'"), "\(checked.errors)")

        let fine = try folder(manifest: #"{"name": "fine", "version": "1.0.0", "luastore": "^1.0"}"#)
        defer { try? FileManager.default.removeItem(at: fine) }
        let ran = try await CLI.run(["run", fine.path, "--format", "json"], input: "{\"type\":\"add\"}\n")
        #expect(ran.status == 0, "\(ran.errors)")
        #expect(ran.outputLines.last == #"{"count":1}"#)
        let tested = try await CLI.run(["test", fine.path])
        #expect(tested.status == 0, "\(tested.output) \(tested.errors)")
    }
}

/// Mounted plugins through the built binary: a folder and a signed bundle mounted under two keys, each writing its
/// own slice; a write to the other's slice refused, naming it; a bundle signed by a key not trusted refused
/// before any code runs.
@Suite struct MountCLITests {
    static let host = """
        local app = {}
        function app.init() return {} end
        function app.props(state) return { notes = #state.notes.list, count = state.counter.count } end
        return app
        """

    @Test func aFolderAndABundleAreMountedAndKeptApart() async throws {
        let root = try CLI.makeApp(Self.host)
        defer { try? FileManager.default.removeItem(at: root) }
        func write(_ path: String, _ text: String) throws {
            let file = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: file)
        }
        try write("luastore.json", """
            { "name": "board", "version": "1.0.0", "luastore": "^1.0",
              "mounts": { "notes": { "path": "plugins/notes", "reads": ["counter"] }, "counter": "plugins/counter.lsb" } }
            """)
        try write("plugins/notes/luastore.json", #"{"name": "notes", "version": "1.0.0", "luastore": "^1.0"}"#)
        try write("plugins/notes/app.lua", """
            local notes = {}
            function notes.init() return { list = {} } end
            function notes.reduce(slice, action, reads)
              if action.type == "note" then slice.list[#slice.list + 1] = action.text .. "@" .. reads.counter.count end
              if action.type == "cheat" then reads.counter.count = 100 end
            end
            return notes
            """)
        // The counter plugin travels as a signed bundle.
        let source = try CLI.makeApp("""
            local counter = {}
            function counter.init() return { count = 0 } end
            function counter.reduce(slice, action) if action.type == "increment" then slice.count = slice.count + 1 end end
            return counter
            """)
        defer { try? FileManager.default.removeItem(at: source) }
        try Data(#"{"name": "counter", "version": "1.0.0", "luastore": "^1.0"}"#.utf8).write(to: source.appendingPathComponent("luastore.json"))
        let keys = root.appendingPathComponent("keys/me").path, stranger = root.appendingPathComponent("keys/stranger").path
        try FileManager.default.createDirectory(at: root.appendingPathComponent("keys"), withIntermediateDirectories: true)
        #expect(try await CLI.run(["keygen", keys]).status == 0)
        #expect(try await CLI.run(["keygen", stranger]).status == 0)
        let bundle = root.appendingPathComponent("plugins/counter.lsb").path
        let packed = try await CLI.run(["pack", source.path, "-o", bundle, "--key", keys + ".key"])
        #expect(packed.status == 0, "\(packed.errors)")

        let input = ["increment", "note", "increment", "cheat", "note"].map { #"{"type":"\#($0)","text":"n"}"# }.joined(separator: "\n") + "\n"
        let state = root.appendingPathComponent("state.json").path
        let run = try await CLI.run(["run", root.path, "--trust", keys + ".pub", "--format", "json", "--state-out", state], input: input)
        #expect(run.status == 1, "the cheat failed: \(run.errors)")
        #expect(run.errors.contains("plugins/notes/app.lua:5: cannot write counter.count: plugin 'notes' reads the slice 'counter', which only plugin 'counter' writes"),
                "\(run.errors)")
        #expect(run.outputLines.last == #"{"count":2,"notes":2}"#, "\(run.output)")
        let saved = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: state))) as? [String: Any]
        #expect((saved?["notes"] as? [String: Any])?["list"] as? [String] == ["n@1", "n@2"], "\(String(describing: saved))")
        #expect((saved?["counter"] as? [String: Any])?["count"] as? Int == 2)

        let untrusted = try await CLI.run(["run", root.path, "--trust", stranger + ".pub", "--format", "json"], input: "")
        #expect(untrusted.status == 2, "\(untrusted.errors)")
        #expect(untrusted.errors.contains("mounts.counter: plugins/counter.lsb:"), "\(untrusted.errors)")
        #expect(untrusted.errors.contains("not trusted") || untrusted.errors.contains("no key"), "\(untrusted.errors)")
        let check = try await CLI.run(["check", root.path, "--trust", keys + ".pub"])
        #expect(check.status == 0, "\(check.errors)")
    }
}
