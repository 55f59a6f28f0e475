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
