import Foundation
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Lua as Lua is keeps replay exact: an app that sets globals as it loads and adds to `string` and `table` records
/// the same bytes run after run, and replays without a divergence; a reducer that writes a global is refused with
/// its line, recorded as a failure, and refused again in the replay.
@Suite struct DeterminismTests {
    static let app = """
        VERSION = "2"                                   -- a global set as the app loads
        function label(parts) return table.concat(parts, "/") end
        function string.split(s, separator)            -- an addition to the string library
          local out = {}
          for piece in (s .. separator):gmatch("(.-)" .. separator:gsub("%p", "%%%0")) do out[#out + 1] = piece end
          return out
        end
        table.count = function(t) local n = 0 for _ in pairs(t) do n = n + 1 end return n end
        local app = {}
        function app.init() return { paths = {}, seen = 0 } end
        function app.reduce(state, action)
          if action.type == "path" then
            local parts = action.text:split(",")
            state.paths[#state.paths + 1] = label(parts) .. "@" .. VERSION
            state.seen = table.count(state.paths)
          elseif action.type == "leak" then
            lastText = action.text
          end
        end
        function app.props(state) return { last = state.paths[#state.paths], seen = state.seen, parts = #(state.paths[1] or ""):split("/") } end
        return app
        """

    static let actions = """
        {"type":"path","text":"a,b,c"}
        {"type":"leak","text":"x"}
        {"type":"path","text":"d,e"}
        {"type":"path","text":"f"}

        """

    /// An app that reads the clock and the environment as it loads, in `init`, in its reducer and in its props:
    /// each session replays exactly (each action gets its recorded time again); with the clock set (`--clock`), three
    /// runs record the same bytes; a replay of a session whose recorded times were changed finds the divergence.
    static let clockApp = """
        local loadedAt = os.time()                      -- read as the app loads
        local app = {}
        function app.init() return { started = os.date("!%Y-%m-%dT%H:%M:%SZ"), region = os.getenv("REGION") or "-", stamps = {} } end
        function app.reduce(state, action)
          if action.type == "stamp" then
            state.stamps[#state.stamps + 1] = { at = os.time(), local_ = os.date("%H:%M"), since = os.clock(), loaded = loadedAt <= os.time() }
          elseif action.type == "quit" then
            os.exit(0)
          end
        end
        function app.props(state) return { n = #state.stamps, now = os.date("!%H:%M:%S"), day = os.date("*t").yday } end
        return app
        """

    @Test func aSessionThatReadsTheClockReplaysExactlyAndTheSetClockRecordsTheSameBytes() async throws {
        let folder = try CLI.makeApp(Self.clockApp)
        defer { try? FileManager.default.removeItem(at: folder) }
        let actions = folder.appendingPathComponent("actions.jsonl")
        try Data(#"{"type":"stamp"}\#n{"type":"quit"}\#n{"type":"stamp"}\#n"#.utf8).write(to: actions)
        // The system's clock: each session replays exactly.
        let live = folder.appendingPathComponent("live.jsonl")
        let run = try await CLI.run(["run", folder.path, "--actions", actions.path, "--format", "json", "--record", live.path, "--env", "REGION=eu"])
        #expect(run.status == 1, "os.exit fails its action: \(run.errors)")
        #expect(run.errors.contains("reduce failed: app.lua:8: os.exit is not available in the sandbox"), "\(run.errors)")
        let replay = try await CLI.run(["replay", folder.path, live.path])
        #expect(replay.status == 0 && replay.output == "replayed 3 actions: every change matches the recording\n", "\(replay.output)\(replay.errors)")
        // The clock set: three runs, the same bytes; the times and the environment are the ones given.
        var recordings: [Data] = []
        for index in 1...3 {
            let recording = folder.appendingPathComponent("set-\(index).jsonl")
            let result = try await CLI.run(["run", folder.path, "--actions", actions.path, "--format", "json", "--record", recording.path,
                                            "--clock", "2026-03-01T09:30:00Z", "--utc-offset", "+02:00", "--env", "REGION=eu"])
            #expect(result.status == 1)
            #expect(result.outputLines.last == #"{"day":60,"n":2,"now":"09:30:00"}"#, "\(result.output)")
            recordings.append(try Data(contentsOf: recording))
        }
        #expect(recordings[0] == recordings[1] && recordings[1] == recordings[2], "three runs recorded the same bytes")
        let lines = String(decoding: recordings[0], as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines[0].contains(#""time":1772357400000,"started":1772357400000,"utcOffset":7200,"environment":{"REGION":"eu"}"#), "\(lines[0])")
        #expect(lines[0].contains(#""state":{"region":"eu","stamps":{},"started":"2026-03-01T09:30:00Z"}"#), "init read the clock and the environment: \(lines[0])")
        #expect(lines[1].contains(#"{"at":1772357400,"loaded":true,"local_":"11:30","since":0.0}"#), "\(lines[1])")
        #expect(!lines[1].contains(#""dt""#), "no time passed: no dt")
        // A recording whose time was changed (its sum made anew) diverges where the time was read.
        var changed = lines
        changed[1] = RecordingLine.withSum(lines[1].replacingOccurrences(of: #"{"seq":1,"#, with: #"{"seq":1,"dt":60000,"#))
        let edited = folder.appendingPathComponent("edited.jsonl")
        try Data((changed.joined(separator: "\n") + "\n").utf8).write(to: edited)
        let diverging = try await CLI.run(["replay", folder.path, edited.path])
        #expect(diverging.status == 1, "\(diverging.output)\(diverging.errors)")
        #expect(diverging.errors.contains("diverges at action 1"), "\(diverging.errors)")
        #expect(diverging.errors.contains("1772357460"), "the time the replay gave it: \(diverging.errors)")
    }

    @Test func recordingsAreTheSameBytesRunAfterRunAndReplayExactly() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let actions = folder.appendingPathComponent("actions.jsonl")
        try Data(Self.actions.utf8).write(to: actions)
        var recordings: [Data] = []
        for run in 1...3 {
            let recording = folder.appendingPathComponent("session-\(run).jsonl")
            let result = try await CLI.run(["run", folder.path, "--actions", actions.path, "--format", "json", "--record", recording.path,
                                            "--clock", "2026-01-01T00:00:00Z"])
            #expect(result.status == 1, "the leaking action fails: \(result.errors)")
            #expect(result.errors.contains("reduce failed: app.lua:17: cannot set global 'lastText' while the store runs"), "\(result.errors)")
            #expect(result.outputLines.last == #"{"last":"f@2","parts":3,"seen":3}"#, "\(result.output)")
            recordings.append(try Data(contentsOf: recording))
            let replay = try await CLI.run(["replay", folder.path, recording.path])
            #expect(replay.status == 0, "\(replay.errors)")
            #expect(replay.output == "replayed 4 actions: every change matches the recording\n", "\(replay.output)")
        }
        #expect(recordings[0] == recordings[1] && recordings[1] == recordings[2], "three runs recorded the same bytes")
        let lines = String(decoding: recordings[0], as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 5)
        #expect(lines[2].contains(#""failure":{"stage":"reduce","message":"cannot set global 'lastText' while the store runs"#), "\(lines[2])")
    }
}
