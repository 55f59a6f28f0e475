import Foundation
import LuaStoreTestSupport
import LuaStoreConcurrency
import Testing

/// `run --actions`: input read in blocks and dispatched without waiting for each action, yet every failure still
/// names its own line, output keeps the actions' order, and a slow pipe sees each action's props as it comes.
@Suite struct PipelinedInputTests {
    static let stock = """
    local app = {}
    function app.init() return { left = 2, seen = 0 } end
    function app.reduce(state, action)
      state.seen = state.seen + 1
      if action.type == "take" then
        if state.left == 0 then error("none left") end
        state.left = state.left - 1
      end
    end
    function app.props(state) return { left = state.left } end
    return app
    """

    /// Equal actions fail or not depending on the state: each failure names its line, also far beyond the
    /// run's window of actions in flight, and malformed lines come in their place among them.
    @Test func failuresNameTheirLineAmongEqualActionsAndManyLines() async throws {
        let app = try CLI.makeApp(Self.stock)
        defer { try? FileManager.default.removeItem(at: app) }
        var lines = Array(repeating: #"{"type":"wait"}"#, count: 20_000)
        for number in [3, 5, 7, 18_001] { lines[number - 1] = #"{"type":"take"}"# }
        lines[16_999] = #"{"type":"#
        lines[17_999] = "" // blank: skipped, still counted
        let actions = app.appendingPathComponent("actions.jsonl")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: actions)
        let stateOut = app.appendingPathComponent("state.json")
        let run = try await CLI.run(["run", app.path, "--actions", actions.path, "--format", "json", "--state-out", stateOut.path])
        #expect(run.status == 1)
        #expect(run.outputLines == [#"{"left":2}"#, #"{"left":1}"#, #"{"left":0}"#])
        #expect(run.errors.split(separator: "\n").map(String.init) == [
            "luastore: reduce failed: app.lua:6: none left (line 7)",
            "luastore: line 17000: not valid JSON: a value was expected at column 9",
            "luastore: reduce failed: app.lua:6: none left (line 18001)",
        ])
        // Every action was reduced but the malformed and the blank line; failed ones changed nothing.
        #expect(try String(contentsOf: stateOut, encoding: .utf8) == "{\"left\":0,\"seen\":19996}\n")
    }

    /// Props lines follow the actions' order through a long file whose props change on every action.
    @Test func everyActionsPropsArePrintedInOrder() async throws {
        let input = (0..<6_000).map { _ in #"{"type":"increment"}"# }.joined(separator: "\n")
        let run = try await CLI.run(["run", "samples/counter", "--format", "json"], input: input)
        #expect(run.status == 0, "\(run.errors)")
        let counts = run.outputLines.map { line in
            line.split(separator: ",").first.flatMap { Int($0.dropFirst(#"{"count":"#.count)) } ?? -1
        }
        #expect(counts == Array(0...6_000))
    }

    /// A pipe that delivers one action at a time sees each action's props before it sends the next: output is
    /// not held back while the run waits for input.
    @Test func aSlowPipeSeesEachActionsPropsBeforeTheNext() async throws {
        let (process, input, output, received) = try Self.start(["run", "samples/counter", "--format", "json", "--actions", "-"],
                                                                errors: FileHandle.nullDevice)
        defer {
            output.fileHandleForReading.readabilityHandler = nil
            if process.isRunning { process.terminate() }
        }
        func waitFor(_ text: String) async throws -> Bool {
            for _ in 0..<400 { // 10 s at most
                if received.withLock({ $0.contains(text) }) { return true }
                try await Task.sleep(for: .milliseconds(25))
            }
            return false
        }
        #expect(try await waitFor(#"{"count":0,"label":"0 clicks"}"#))
        for count in 1...3 {
            input.fileHandleForWriting.write(Data("{\"type\":\"increment\"}\n".utf8))
            #expect(try await waitFor(#"{"count":\#(count),"#), "props of action \(count) before the next is sent")
        }
        try input.fileHandleForWriting.close()
        // (At most 60 s: beside busy loops and the suite's servers, the process is one of many.)
        for _ in 0..<2_400 where process.isRunning { try await Task.sleep(for: .milliseconds(25)) }
        #expect(!process.isRunning, "luastore run did not end within 60 s of its input's end")
        if !process.isRunning { #expect(process.terminationStatus == 0) } // (read while running, it traps)
    }
    /// SIGTERM (or SIGINT) while the input is still open ends the input there: the actions read are reduced, the
    /// recording is put in place over the old one (and replays), the state file is written, and the run says so and
    /// exits 128 + the signal, as a shell reports it — rather than dying with its files half written.
    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalEndsTheInputAndTheRunFinishesItsFiles(signal: Int32) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-signal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let recording = folder.appendingPathComponent("session.jsonl"), stateOut = folder.appendingPathComponent("state.json")
        try Data("an older recording\n".utf8).write(to: recording)
        let errors = Pipe()
        let (process, input, output, received) = try Self.start(
            ["run", "samples/counter", "--format", "json", "--record", recording.path, "--state-out", stateOut.path,
             "--persist", folder.appendingPathComponent("counter.db").path], errors: errors)
        defer {
            output.fileHandleForReading.readabilityHandler = nil
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        input.fileHandleForWriting.write(Data(String(repeating: "{\"type\":\"increment\"}\n", count: 3).utf8))
        for _ in 0..<2_400 where !received.withLock({ $0.contains(#"{"count":3,"#) }) { try await Task.sleep(for: .milliseconds(25)) }
        #expect(received.withLock { $0.contains(#"{"count":3,"#) }, "the three actions' props within 60 s")
        kill(process.processIdentifier, signal) // (the input stays open: only the signal ends the run)
        for _ in 0..<2_400 where process.isRunning { try await Task.sleep(for: .milliseconds(25)) }
        #expect(!process.isRunning, "luastore run did not end within 60 s of the signal")
        guard !process.isRunning else { return }
        #expect(process.terminationStatus == 128 + signal)
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(said.contains("interrupted (\(signal == SIGTERM ? "SIGTERM" : "SIGINT")): no more actions are read"), "\(said)")
        #expect(try String(contentsOf: stateOut, encoding: .utf8).contains(#""count":3"#))
        let replay = try await CLI.run(["replay", "samples/counter", recording.path])
        #expect(replay.status == 0, "\(replay.errors)")
        #expect(replay.output.contains("replayed 3 actions"), "\(replay.output)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).allSatisfy { !$0.hasPrefix(".") }, "no partial file left")
    }

    /// `luastore` with `arguments`, from the package's folder, its standard input a pipe the test writes and its
    /// output gathered as it comes (the caller ends the process and the handler).
    static func start(_ arguments: [String], errors: Any) throws -> (Process, Pipe, Pipe, Protected<String>) {
        let process = Process()
        process.executableURL = CLI.binary
        process.environment = ProcessInfo.processInfo.environment.merging(CLI.environment) { $1 }
        process.arguments = arguments
        process.currentDirectoryURL = CLI.packageRoot
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        let received = Protected("")
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            received.withLock { $0 += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
        return (process, input, output, received)
    }
}
