import Foundation
import LuaStoreTestSupport
import Testing

/// `luastore run --lua-path`: modules from folders outside the app the user shares, as stock Lua takes them.
@Suite struct ModulePathTests {
    @Test func appsRequireModulesFromTheModulePath() async throws {
        let app = try CLI.makeApp("""
            local shared = require("shared.counting")
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action) state.count = shared.next(state.count) end
            function app.props(state) return { count = state.count } end
            return app
            """)
        let library = try CLI.makeApp("return {}")
        defer {
            try? FileManager.default.removeItem(at: app)
            try? FileManager.default.removeItem(at: library)
        }
        try FileManager.default.createDirectory(at: library.appendingPathComponent("shared"), withIntermediateDirectories: true)
        try Data("return { next = function(n) return n + 10 end }".utf8).write(to: library.appendingPathComponent("shared/counting.lua"))
        let run = try await CLI.run(["run", app.path, "--format", "json", "--lua-path", library.path + "/?.lua"], input: "{\"type\":\"x\"}\n")
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.outputLines == [#"{"count":0}"#, #"{"count":10}"#])
        let check = try await CLI.run(["check", app.path, "--lua-path", library.path + "/?.lua"])
        #expect(check.status == 0, "\(check.errors)")
        let missing = try await CLI.run(["run", app.path, "--format", "json", "--lua-path", "/nonexistent/?.lua"], input: "")
        #expect(missing.status == 2)
        #expect(missing.errors.contains("module 'shared.counting' not found:"), "\(missing.errors)")
        #expect(missing.errors.contains("\tno file '/nonexistent/shared/counting.lua'"), "\(missing.errors)")
    }
}
