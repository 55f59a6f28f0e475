import Foundation
import LuaStoreTestSupport
import Testing

/// Outputs never destroy inputs, and a write cut short leaves what was there before (issue: "Nothing lost").
@Suite struct NothingLostTests {
    static let growing = """
    local luastore = require("luastore")
    local app = {}
    function app.init() return { items = {} } end
    function app.reduce(state, action)
      if action.type == "grow" then
        for i = 1, 200 do state.items[#state.items + 1] = "item number " .. i end
      elseif action.type == "keep" then
        return nil, { luastore.save(action.key, { items = state.items }) }
      end
    end
    function app.props(state) return { n = #state.items } end
    return app
    """

    /// Runs the built `luastore` under a file-size limit of 1 KiB (`ulimit -f 1`).
    static func runLimited(_ arguments: [String], input: String = "") async throws -> ChildProcessResult {
        try await runChildProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", #"ulimit -f 1; exec "$0" "$@""#, CLI.binary.path] + arguments,
                                  input: input, directory: CLI.packageRoot, environment: CLI.environment)
    }

    @Test func anOutputThatIsAnInputIsRefusedBeforeAnythingIsWritten() async throws {
        let folder = try CLI.makeApp(Self.growing)
        defer { try? FileManager.default.removeItem(at: folder) }
        let actions = folder.appendingPathComponent("a.jsonl")
        let text = "{\"type\":\"grow\"}\n{\"type\":\"grow\"}\n"
        try Data(text.utf8).write(to: actions)
        let link = folder.appendingPathComponent("link.jsonl")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: actions)
        let hard = folder.appendingPathComponent("hard.jsonl")
        try FileManager.default.linkItem(at: actions, to: hard)

        for (option, path, said) in [
            ("--record", actions.path, "--record \(actions.path) is the same file as --actions \(actions.path)"),
            ("--state-out", link.path, "--state-out \(link.path) is the same file as --actions \(actions.path)"),
            ("--record", hard.path, "--record \(hard.path) is the same file as --actions \(actions.path)"),
            ("--state-out", folder.appendingPathComponent("app.lua").path, "is the same file as the app's script"),
        ] {
            let run = try await CLI.run(["run", folder.path, "--actions", actions.path, option, path, "--format", "json"])
            #expect(run.status == 2, "\(option) \(path)")
            #expect(run.errors.contains(said), "\(run.errors)")
            #expect(run.output.isEmpty)
            #expect(try String(contentsOf: actions, encoding: .utf8) == text)
        }
        #expect(try String(contentsOf: folder.appendingPathComponent("app.lua"), encoding: .utf8) == Self.growing)
        let out = folder.appendingPathComponent("out.json").path
        let both = try await CLI.run(["run", folder.path, "--actions", actions.path, "--record", out, "--state-out", out])
        #expect(both.status == 2)
        #expect(both.errors.contains("--state-out \(out) is the same file as --record \(out)"), "\(both.errors)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    /// A bundle the run runs, and a plugin bundle the app mounts, are inputs too: an output naming one is refused and
    /// the bundle left whole.
    @Test func theBundleRunAndThePluginsMountedAreInputs() async throws {
        let folder = try CLI.makeApp(Self.growing)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(#"{"name": "keeper", "version": "1.0.0", "luastore": "^1.0"}"#.utf8).write(to: folder.appendingPathComponent("luastore.json"))
        let bundle = folder.deletingLastPathComponent().appendingPathComponent(folder.lastPathComponent + ".lsb")
        defer { try? FileManager.default.removeItem(at: bundle) }
        #expect(try await CLI.run(["pack", folder.path, "-o", bundle.path]).status == 0)
        let packed = try Data(contentsOf: bundle)
        for option in ["--state-out", "--record"] {
            let run = try await CLI.run(["run", bundle.path, "--allow-unsigned", option, bundle.path, "--format", "json"], input: "{\"type\":\"grow\"}\n")
            #expect(run.status == 2, "\(option)")
            #expect(run.errors.contains("\(option) \(bundle.path) is the same file as the app's bundle \(bundle.path)"), "\(run.errors)")
            #expect(try Data(contentsOf: bundle) == packed)
        }
        // (Refused before the app loads: the mounted file need not be a plugin for that.)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("plugins"), withIntermediateDirectories: true)
        let plugin = folder.appendingPathComponent("plugins/p.lsb")
        try Data("a plugin's bundle".utf8).write(to: plugin)
        try Data(#"{"name": "keeper", "version": "1.0.0", "luastore": "^1.0", "mounts": {"p": "plugins/p.lsb"}}"#.utf8)
            .write(to: folder.appendingPathComponent("luastore.json"))
        let mounted = try await CLI.run(["run", folder.path, "--state-out", plugin.path, "--format", "json"], input: "")
        #expect(mounted.status == 2)
        #expect(mounted.errors.contains("--state-out \(plugin.path) is the same file as the app's file \(plugin.path)"), "\(mounted.errors)")
        #expect(try String(contentsOf: plugin, encoding: .utf8) == "a plugin's bundle")
    }

    @Test func aStateWriteCutShortKeepsTheOldFile() async throws {
        let folder = try CLI.makeApp(Self.growing)
        defer { try? FileManager.default.removeItem(at: folder) }
        let stateOut = folder.appendingPathComponent("state.json")
        try Data(#"{"old":1}"#.utf8).write(to: stateOut)
        let run = try await Self.runLimited(["run", folder.path, "--format", "json", "--state-out", stateOut.path], input: "{\"type\":\"grow\"}\n")
        #expect(run.status == 1)
        #expect(run.errors.contains("cannot write the state to \(stateOut.path): file too large"), "\(run.errors)")
        #expect(try String(contentsOf: stateOut, encoding: .utf8) == #"{"old":1}"#)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["app.lua", "state.json"])

        let fits = try await CLI.run(["run", folder.path, "--format", "json", "--state-out", stateOut.path], input: "{\"type\":\"grow\"}\n")
        #expect(fits.status == 0, "\(fits.errors)")
        #expect(try String(contentsOf: stateOut, encoding: .utf8).hasPrefix(#"{"items":["item number 1","#))
    }

    @Test func aRecordingCutShortKeepsTheOldRecording() async throws {
        let folder = try CLI.makeApp(Self.growing)
        defer { try? FileManager.default.removeItem(at: folder) }
        let recording = folder.appendingPathComponent("session.jsonl")
        try Data("old recording\n".utf8).write(to: recording)
        let run = try await Self.runLimited(["run", folder.path, "--format", "json", "--record", recording.path], input: "{\"type\":\"grow\"}\n")
        #expect(run.status == 1)
        #expect(run.errors.contains("cannot write the recording to \(recording.path): file too large"), "\(run.errors)")
        #expect(try String(contentsOf: recording, encoding: .utf8) == "old recording\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["app.lua", "session.jsonl"])
    }

    /// A save that cannot be written says which key and which file, in words; the file it replaces stays whole.
    @Test func saveFailuresAreSaidInWordsAndKeepTheOldFile() async throws {
        let folder = try CLI.makeApp(Self.growing)
        defer { try? FileManager.default.removeItem(at: folder) }
        let data = folder.appendingPathComponent(".data")
        try FileManager.default.createDirectory(at: data.appendingPathComponent("dir.json"), withIntermediateDirectories: true)
        try Data(#"{"old":1}"#.utf8).write(to: data.appendingPathComponent("big.json"))
        let input = """
        {"type":"grow"}
        {"type":"keep","key":"dir"}
        {"type":"keep","key":"big"}

        """
        let run = try await Self.runLimited(["run", folder.path, "--format", "json"], input: input)
        #expect(run.status == 1)
        #expect(run.errors.contains(#"save "dir" failed: \#(data.path)/dir.json: is a directory"#), "\(run.errors)")
        #expect(run.errors.contains(#"save "big" failed: \#(data.path)/big.json: file too large"#), "\(run.errors)")
        #expect(!run.errors.contains("NSCocoaErrorDomain"))
        #expect(try String(contentsOf: data.appendingPathComponent("big.json"), encoding: .utf8) == #"{"old":1}"#)
        #expect(try FileManager.default.contentsOfDirectory(atPath: data.path).sorted() == ["big.json", "dir.json"])
    }

    /// A save aimed at the run's own actions file is refused: the input stays as it was.
    @Test func aSaveNeverReplacesTheActionsFile() async throws {
        let folder = try CLI.makeApp(Self.growing)
        defer { try? FileManager.default.removeItem(at: folder) }
        let data = folder.appendingPathComponent(".data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let actions = data.appendingPathComponent("input.json")
        let text = "{\"type\":\"grow\"}\n{\"type\":\"keep\",\"key\":\"input\"}\n"
        try Data(text.utf8).write(to: actions)
        let run = try await CLI.run(["run", folder.path, "--format", "json", "--actions", actions.path])
        #expect(run.status == 1)
        #expect(run.errors.contains(#"save "input" failed: \#(actions.path) is the same file as \#(actions.path), an input of this run"#), "\(run.errors)")
        #expect(try String(contentsOf: actions, encoding: .utf8) == text)
    }

    /// A line longer than `--max-line-bytes` (64 MiB by default) ends the input with an error naming it: an input
    /// without line breaks ends instead of growing without bound.
    @Test func overlongLinesAreRefusedNamingTheLine() async throws {
        let replay = try await CLI.run(["replay", "samples/counter", "/dev/zero", "--max-line-bytes", "100000"])
        #expect(replay.status == 2)
        #expect(replay.errors == "luastore: cannot read /dev/zero: line 1 is longer than 100000 bytes (the limit of --max-line-bytes)\n")
        let input = "{\"type\":\"increment\"}\n{\"type\":\"increment\",\"pad\":\"\(String(repeating: "a", count: 5000))\"}\n{\"type\":\"increment\"}\n"
        let run = try await CLI.run(["run", "samples/counter", "--format", "json", "--max-line-bytes", "1000"], input: input)
        #expect(run.status == 1)
        #expect(run.outputLines == [#"{"count":0,"label":"0 clicks"}"#, #"{"count":1,"label":"1 click"}"#])
        #expect(run.errors == "luastore: cannot read actions from standard input: line 2 is longer than 1000 bytes (the limit of --max-line-bytes)\n")
        let fits = try await CLI.run(["run", "samples/counter", "--format", "json", "--max-line-bytes", "5100"], input: input)
        #expect(fits.status == 0, "\(fits.errors)")
        #expect(fits.outputLines.count == 4)
    }
}
