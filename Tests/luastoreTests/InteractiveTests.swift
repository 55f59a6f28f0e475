import Foundation
import Testing

/// The interactive mode, driven through a real terminal (tmux), with a hot reload.
@Suite(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux")))
struct InteractiveTests {
    func tmux(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/tmux")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = Pipe()
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func screen(_ session: String) throws -> String {
        try tmux(["capture-pane", "-p", "-t", session])
    }

    func waitForScreen(_ session: String, containing text: String) async throws -> Bool {
        for _ in 0..<200 {
            if try screen(session).contains(text) { return true }
            try await Task.sleep(for: .milliseconds(25))
        }
        return false
    }

    @Test func typedActionsAndAHotReload() async throws {
        let app = try CLI.copySample("counter")
        let session = "luastore-\(UUID().uuidString.prefix(8))"
        defer {
            _ = try? tmux(["kill-session", "-t", session])
            try? FileManager.default.removeItem(at: app)
        }
        _ = try tmux(["new-session", "-d", "-s", session, "-x", "120", "-y", "40",
                      "\(CLI.binary.path) run \(app.path) --watch; sleep 5"])
        #expect(try await waitForScreen(session, containing: "label: 0 clicks"))
        _ = try tmux(["send-keys", "-t", session, "increment by=2", "Enter"])
        #expect(try await waitForScreen(session, containing: "label: 2 clicks"))
        _ = try tmux(["send-keys", "-t", session, "{\"type\": \"increment\"}", "Enter"])
        #expect(try await waitForScreen(session, containing: "label: 3 clicks"))
        _ = try tmux(["send-keys", "-t", session, "what is this", "Enter"])
        #expect(try await waitForScreen(session, containing: "'is' is not key=value"))
        let source = try String(contentsOf: app.appendingPathComponent("app.lua"), encoding: .utf8)
        try Data(source.replacingOccurrences(of: "\" clicks\"", with: "\" taps\"").utf8).write(to: app.appendingPathComponent("app.lua"))
        #expect(try await waitForScreen(session, containing: "label: 3 taps"))
        #expect(try await waitForScreen(session, containing: "luastore: reloaded"))
        try Data("return {".utf8).write(to: app.appendingPathComponent("app.lua"))
        #expect(try await waitForScreen(session, containing: "reload failed, still running the previous version: app.lua:1:"))
        _ = try tmux(["send-keys", "-t", session, "increment", "Enter"])
        #expect(try await waitForScreen(session, containing: "label: 4 taps"))
    }
}
