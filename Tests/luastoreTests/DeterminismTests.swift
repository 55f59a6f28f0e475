import Foundation
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

    @Test func recordingsAreTheSameBytesRunAfterRunAndReplayExactly() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let actions = folder.appendingPathComponent("actions.jsonl")
        try Data(Self.actions.utf8).write(to: actions)
        var recordings: [Data] = []
        for run in 1...3 {
            let recording = folder.appendingPathComponent("session-\(run).jsonl")
            let result = try await CLI.run(["run", folder.path, "--actions", actions.path, "--format", "json", "--record", recording.path])
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
