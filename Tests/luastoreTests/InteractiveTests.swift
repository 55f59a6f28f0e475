import Foundation
import LuaStoreTestSupport
import Testing

/// The interactive mode, driven through a real terminal (tmux, which `scripts/bootstrap` installs: without it
/// this test fails and says so, rather than being skipped quietly), with a hot reload.
@Suite struct InteractiveTests {
    @discardableResult
    func tmux(_ arguments: [String]) async throws -> String {
        // (60 s: the first command starts tmux's server, which took more than 20 s once beside busy loops and the
        // rest of the suite.)
        try await runChildProcess(URL(fileURLWithPath: "/usr/bin/tmux"), arguments, environment: CLI.environment, timeout: .seconds(60)).output
    }

    func screen(_ session: String) async throws -> String {
        try await tmux(["capture-pane", "-p", "-t", session])
    }

    func waitForScreen(_ session: String, containing text: String) async throws -> Bool {
        for _ in 0..<200 {
            if try await screen(session).contains(text) { return true }
            try await Task.sleep(for: .milliseconds(25))
        }
        return false
    }

    @Test func typedActionsAndAHotReload() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"),
                     "tmux is required for this test of the interactive mode: run scripts/bootstrap, or apt-get install tmux")
        let app = try CLI.copySample("counter")
        let session = "luastore-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(at: app) }
        try await tmux(["new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                        "\(CLI.binary.path) run \(app.path) --watch; sleep 5"])
        do {
            try await drive(session, app: app)
        } catch {
            _ = try? await tmux(["kill-session", "-t", session])
            throw error
        }
        try await tmux(["kill-session", "-t", session])
    }

    func drive(_ session: String, app: URL) async throws {
        #expect(try await waitForScreen(session, containing: "label: 0 clicks"))
        try await tmux(["send-keys", "-t", session, "increment by=2", "Enter"])
        #expect(try await waitForScreen(session, containing: "label: 2 clicks"))
        try await tmux(["send-keys", "-t", session, "{\"type\": \"increment\"}", "Enter"])
        #expect(try await waitForScreen(session, containing: "label: 3 clicks"))
        try await tmux(["send-keys", "-t", session, "what is this", "Enter"])
        #expect(try await waitForScreen(session, containing: "'is' is not key=value"))
        // (A line that is JSON but not an object is not taken as an action type: `[1]` was the action `{"type": "[1]"}`.)
        try await tmux(["send-keys", "-t", session, "[1]", "Enter"])
        #expect(try await waitForScreen(session, containing: "not a JSON array"))
        try await tmux(["send-keys", "-t", session, "null", "Enter"])
        #expect(try await waitForScreen(session, containing: "not JSON null"))
        let source = try String(contentsOf: app.appendingPathComponent("app.lua"), encoding: .utf8)
        try Data(source.replacingOccurrences(of: "\" clicks\"", with: "\" taps\"").utf8).write(to: app.appendingPathComponent("app.lua"))
        #expect(try await waitForScreen(session, containing: "label: 3 taps"))
        #expect(try await waitForScreen(session, containing: "luastore: reloaded"))
        try Data("return {".utf8).write(to: app.appendingPathComponent("app.lua"))
        #expect(try await waitForScreen(session, containing: "reload failed, still running the previous version: app.lua:1:"))
        try await tmux(["send-keys", "-t", session, "increment", "Enter"])
        #expect(try await waitForScreen(session, containing: "label: 4 taps"))
    }
}
