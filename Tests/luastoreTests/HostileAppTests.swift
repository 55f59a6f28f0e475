import Foundation
import LuaStoreTestSupport
import Testing

/// Apps that do what they should not, run through the built binary: each is refused or reported in words naming
/// the script's file and line, and nothing else is lost or changed.
@Suite struct HostileAppTests {
    /// Props that fail on one state are that state's failure: every later state still gets its props.
    @Test func propsFailingOnTheInitialStateDoNotSilenceLaterStates() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action) if action.type == "increment" then state.count = state.count + 1 end end
            function app.props(state)
              if state.count == 0 or state.count == 2 then error("no props at " .. state.count) end
              return { count = state.count }
            end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let run = try await CLI.run(["run", app.path, "--format", "json"], input: String(repeating: "{\"type\":\"increment\"}\n", count: 3))
        #expect(run.status == 1)
        #expect(run.outputLines == [#"{"count":1}"#, #"{"count":3}"#])
        #expect(run.errors.contains("props failed: app.lua:5: no props at 0"), "\(run.errors)")
        #expect(run.errors.contains("props failed: app.lua:5: no props at 2"), "\(run.errors)")
    }
}
