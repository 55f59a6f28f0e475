import Foundation
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// `run --record` and `replay` end to end, with the built binary: recordings are lossless, written like any
/// Unix tool's output, and every failure to write is an error in words.
@Suite struct RecordingTests {
    static let app = """
        local app = {}
        function app.init() return { flags = {}, marks = {}, ratio = 1, items = {} } end
        function app.reduce(state, action)
          if action.type == "flag" then state.flags[true] = "yes"; state.marks[5] = true; state.ratio = 1.0
          elseif action.type == "add" then state.items[#state.items + 1] = { title = action.title, tags = {} }
          elseif action.type == "remove" then table.remove(state.items, 1)
          elseif action.type == "callback" then state.callback = function() end
          end
        end
        function app.props(state) return { count = #state.items } end
        return app
        """

    static let actions = """
        {"type":"flag"}
        {"type":"add","title":"a"}
        {"type":"add","title":"b"}
        {"type":"callback"}
        {"type":"remove"}

        """

    func makeApp(_ source: String = app) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-rec-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(source.utf8).write(to: folder.appendingPathComponent("app.lua"))
        try Data(Self.actions.utf8).write(to: folder.appendingPathComponent("actions.jsonl"))
        return folder
    }

    @Test func aSessionRoundTripsAndReplaysAgainstUnchangedScripts() async throws {
        let folder = try makeApp()
        defer { try? FileManager.default.removeItem(at: folder) }
        let recording = folder.appendingPathComponent("session.jsonl").path
        let run = try await CLI.run(["run", folder.path, "--actions", folder.appendingPathComponent("actions.jsonl").path,
                                     "--format", "json", "--record", recording, "--state-out", folder.appendingPathComponent("state.json").path])
        // The reducer storing a function is refused with its line; the run goes on and exits 1.
        #expect(run.status == 1)
        #expect(run.errors.contains("reduce failed: app.lua:7: state.callback: a function cannot be stored in the state"), "\(run.errors)")
        let lines = try String(contentsOfFile: recording, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == 6, "\(lines)")
        #expect(lines[0].hasPrefix(#"{"format":"luastore-recording","version":6,"app":""#))
        #expect(lines[0].contains(#""state":{"flags":{},"items":{},"marks":{},"ratio":1}"#), "\(lines[0])")
        #expect(lines[1].contains(#""changes":[[["flags",true],"yes"],[["marks",5],true],[["ratio"],1.0]]"#), "\(lines[1])")
        #expect(lines[2].contains(#"[["items",1],{"tags":{},"title":"a"}]"#), "\(lines[2])")
        #expect(lines[4].contains(#""failure":{"stage":"reduce","message":"state.callback: a function cannot be stored in the state"#), "\(lines[4])")
        #expect(lines[4].contains(#""location":"app.lua:7""#), "\(lines[4])")
        #expect(lines[5].contains(#""changes":[[["items",1],{"tags":{},"title":"b"}],[["items",2]]]"#), "\(lines[5])")
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("state.json").path), "the state is written despite the failure")

        let replay = try await CLI.run(["replay", folder.path, recording])
        #expect(replay.status == 0, "\(replay.errors)")
        #expect(replay.output == "replayed 5 actions: every change matches the recording\n")
        #expect(!replay.errors.contains("note:"), "the same scripts: nothing to note (\(replay.errors))")
        let until = try await CLI.run(["replay", folder.path, recording, "--until", "2", "--json"])
        #expect(until.output == #"{"matches":true,"replayed":2}"# + "\n", "\(until.output)")

        // The scripts change: the first action whose changes differ is named, with the path and both values.
        try Data(Self.app.replacingOccurrences(of: "state.marks[5] = true", with: "state.marks[5] = false").utf8)
            .write(to: folder.appendingPathComponent("app.lua"))
        let diverged = try await CLI.run(["replay", folder.path, recording])
        #expect(diverged.status == 1)
        #expect(diverged.errors.contains(#"diverges at action 1: {"type":"flag"}"#), "\(diverged.errors)")
        // (Replayed with other scripts than the recording's, as asked, and said so: the app it was recorded by, both digests.)
        #expect(diverged.errors.contains("note: \(recording) was recorded with other scripts (the app '\(folder.lastPathComponent)', scripts "),
                "\(diverged.errors)")
        #expect(diverged.errors.contains("it is replayed with \(folder.path)'s as they are now (scripts "), "\(diverged.errors)")
        #expect(diverged.errors.contains("state.marks[5]: recorded true, now false"), "\(diverged.errors)")
        let json = try await CLI.run(["replay", folder.path, recording, "--json"])
        #expect(json.output.contains(#""divergence":{"action":{"type":"flag"},"now":"false","path":"state.marks[5]","recorded":"true","sequence":1}"#), "\(json.output)")
    }

    /// A long session replays in windows of actions: matching throughout, or diverging exactly at the first
    /// action that differs, far beyond the first window; `--until` stops in the middle of a window.
    /// The counting app in a new folder, and a recording (`session.jsonl` there) of `count` actions adding
    /// 1, 2, 0, 1, 2, 0, …
    func recordedCountingSession(_ count: Int) async throws -> (folder: URL, recording: String) {
        let folder = try CLI.makeApp(TestApps.countingBy)
        let actions = folder.appendingPathComponent("actions.jsonl")
        try Data((1...count).map { #"{"type":"add","by":\#($0 % 3)}"# + "\n" }.joined().utf8).write(to: actions)
        let recording = folder.appendingPathComponent("session.jsonl").path
        let run = try await CLI.run(["run", folder.path, "--actions", actions.path, "--format", "json", "--record", recording])
        #expect(run.status == 0, "\(run.errors)")
        return (folder, recording)
    }

    /// `replay` checks the state `init` makes against the recorded one where it lies in the recording's text: the
    /// same state, however it is spaced, replays; one value changed anywhere in it diverges before the first action,
    /// at that place; a state that is not JSON is refused, naming the header.
    @Test func theInitialStateIsComparedWithTheRecordedOne() async throws {
        let folder = try CLI.makeApp("""
            local app = {}
            function app.init()
              local items = {}
              for i = 1, 2000 do items[i] = { id = i, title = "item " .. i, tags = { [i % 3 == 0] = 1.5 } } end
              return { items = items, note = "ünï" }
            end
            function app.reduce(state, action) state.items[action.id].title = action.title end
            function app.props(state) return { count = #state.items } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: folder) }
        let recording = folder.appendingPathComponent("session.jsonl")
        let run = try await CLI.run(["run", folder.path, "--record", recording.path], input: #"{"type":"x","id":7,"title":"seven"}"# + "\n")
        #expect(run.status == 0, "\(run.errors)")
        let lines = String(decoding: try Data(contentsOf: recording), as: UTF8.self).split(separator: "\n").map(String.init)
        func replay(header: String) async throws -> ChildProcessResult {
            let edited = folder.appendingPathComponent("edited.jsonl")
            try Data(([RecordingLine.withSum(header)] + lines.dropFirst()).joined(separator: "\n").utf8 + [10]).write(to: edited)
            return try await CLI.run(["replay", folder.path, edited.path])
        }
        let same = try await replay(header: lines[0].replacingOccurrences(of: #"{"id":"#, with: #"{ "id" :"#))
        #expect(same.status == 0 && same.output.contains("replayed 1 actions: every change matches"), "\(same.output)\(same.errors)")
        let changed = try await replay(header: lines[0].replacingOccurrences(of: #""item 1234""#, with: #""item 1234!""#))
        #expect(changed.status == 1, "\(changed.output)\(changed.errors)")
        #expect(changed.errors.contains("diverges before the first action (init)"), "\(changed.errors)")
        #expect(changed.errors.contains(#"state.items[1234].title: recorded "item 1234!", now "item 1234""#), "\(changed.errors)")
        let float = try await replay(header: lines[0].replacingOccurrences(of: #"[true,1.5]"#, with: #"[true,1.50000001]"#))
        #expect(float.status == 1 && float.errors.contains("state.items[3].tags[true]"), "\(float.errors)")
        let broken = try await replay(header: lines[0].replacingOccurrences(of: #""item 1234""#, with: #""item \u12""#))
        #expect(broken.status == 2, "\(broken.output)\(broken.errors)")
        #expect(broken.errors.contains("the initial state"), "\(broken.errors)")
    }

    /// A recording that starts later than its session (its header follows entry N > 0: a journal from a snapshot,
    /// `luastore export`, an export of the devtools' kept history) replays from the state its header holds — `init`
    /// is neither run against it nor compared — and diverges where that state makes an action do something else.
    @Test func aRecordingThatStartsLaterReplaysFromItsHeadersState() async throws {
        let counter = try CLI.copySample("counter")
        defer { try? FileManager.default.removeItem(at: counter) }
        let folder = counter
        let recording = folder.appendingPathComponent("session.jsonl")
        let run = try await CLI.run(["run", counter.path, "--record", recording.path],
                                    input: String(repeating: #"{"type":"increment"}"# + "\n", count: 4))
        #expect(run.status == 0, "\(run.errors)")
        let lines = String(decoding: try Data(contentsOf: recording), as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.count == 5 && lines[0].contains(#""seq":0"#) && lines[0].contains(#""state":{"count":0}"#), "\(lines)")
        func replay(fromCount count: Int) async throws -> ChildProcessResult {
            let header = lines[0].replacingOccurrences(of: #""seq":0"#, with: #""seq":2"#)
                .replacingOccurrences(of: #""state":{"count":0}"#, with: #""state":{"count":\#(count)}"#)
            let later = folder.appendingPathComponent("later.jsonl")
            try Data(([RecordingLine.withSum(header)] + lines.dropFirst(3)).joined(separator: "\n").utf8 + [10]).write(to: later)
            return try await CLI.run(["replay", counter.path, later.path])
        }
        let fromTwo = try await replay(fromCount: 2)
        #expect(fromTwo.status == 0 && fromTwo.output.contains("replayed 2 actions: every change matches"), "\(fromTwo.output)\(fromTwo.errors)")
        let fromFive = try await replay(fromCount: 5)
        #expect(fromFive.status == 1, "\(fromFive.output)\(fromFive.errors)")
        #expect(fromFive.errors.contains("diverges at action 3") && fromFive.errors.contains("state.count: recorded 3, now 6"), "\(fromFive.errors)")
    }

    @Test func aLongSessionReplaysAndDivergesAtTheRightAction() async throws {
        let (folder, recording) = try await recordedCountingSession(6_000)
        defer { try? FileManager.default.removeItem(at: folder) }
        let replay = try await CLI.run(["replay", folder.path, recording])
        #expect(replay.output == "replayed 6000 actions: every change matches the recording\n", "\(replay.errors)")
        let until = try await CLI.run(["replay", folder.path, recording, "--until", "3000", "--json"])
        #expect(until.output == #"{"matches":true,"replayed":3000}"# + "\n", "\(until.output)")

        // From the 5,000th action on, the reducer adds one more: the 5,000th (by = 5000 % 3 = 2) is named.
        try await Self.expectDivergence(at: 5_000, replaying: recording, in: folder)
    }

    /// Makes the counting app in `folder` add one more from its `sequence`-th action on, and expects the replay of
    /// `recording` to name that action (as `--json` prints it).
    static func expectDivergence(at sequence: Int, replaying recording: String, in folder: URL) async throws {
        try Data(TestApps.countingBy
            .replacingOccurrences(of: "local app = {}", with: "local app = {}\nlocal reduced = 0")
            .replacingOccurrences(of: "state.count = state.count + action.by",
                                  with: "reduced = reduced + 1\n  state.count = state.count + action.by + (reduced >= \(sequence) and 1 or 0)").utf8)
            .write(to: folder.appendingPathComponent("app.lua"))
        let diverged = try await CLI.run(["replay", folder.path, recording, "--json"])
        #expect(diverged.status == 1)
        let recorded = (1...sequence).reduce(0) { $0 + $1 % 3 }
        #expect(diverged.output == #"{"divergence":{"action":{"by":\#(sequence % 3),"type":"add"},"now":"\#(recorded + 1)","path":"state.count","recorded":"\#(recorded)","sequence":\#(sequence)},"matches":false,"replayed":\#(sequence)}"# + "\n", "\(diverged.output) \(diverged.errors)")
    }

    /// The replay reads the next window of the recording (4,096 lines) while the store reduces this one: a
    /// damaged line is named as before, and a divergence is still reported before a damaged line of the window
    /// after it, as if each line were read once the one before was compared.
    @Test func aDivergenceIsReportedBeforeADamagedLineOfTheNextWindow() async throws {
        let (folder, recording) = try await recordedCountingSession(6_000)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = URL(fileURLWithPath: recording)
        var lines = String(decoding: try Data(contentsOf: url), as: UTF8.self)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines[5_000] = #"{"damaged"# // the 5,000th action's line (the header is line 1)
        try Data(lines.joined(separator: "\n").utf8).write(to: url)
        let damaged = try await CLI.run(["replay", folder.path, recording])
        #expect(damaged.status == 2)
        #expect(damaged.errors.contains("session.jsonl:5001: "), "\(damaged.errors)")

        // From the 100th action on, the reducer adds one more: that, in the first window, is what is reported.
        try await Self.expectDivergence(at: 100, replaying: recording, in: folder)
    }

    /// Replay compares the changes the store wrote with the recording's text first; a recording that writes the
    /// same changes differently (spaces, another order of keys in a value) still matches — compared as values —
    /// and one value changed in the text is a divergence, named.
    @Test func changesWrittenDifferentlyStillMatch() async throws {
        let (folder, path) = try await recordedCountingSession(50)
        defer { try? FileManager.default.removeItem(at: folder) }
        let recording = URL(fileURLWithPath: path)
        let original = try String(contentsOf: recording, encoding: .utf8)
        #expect(original.contains(#""changes":[[["count"],"#))
        // (Each line edited here gets its sum made anew, as a tool editing a recording on purpose would: an edit
        // without it is refused as damage, below.)
        let spaced = original.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.isEmpty ? "" : RecordingLine.withSum(line.replacingOccurrences(of: #""changes":[[["count"],"#, with: #""changes": [ [ [ "count" ] , "#))
        }.joined(separator: "\n")
        #expect(spaced != original)
        try Data(spaced.utf8).write(to: recording)
        let replay = try await CLI.run(["replay", folder.path, recording.path])
        #expect(replay.output == "replayed 50 actions: every change matches the recording\n", "\(replay.errors)")
        let lines = original.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var tampered = lines
        tampered[10] = lines[10].replacingOccurrences(of: #"[["count"],"#, with: #"[["count"],1000"#)
        try Data(tampered.joined(separator: "\n").utf8).write(to: recording)
        let damaged = try await CLI.run(["replay", folder.path, recording.path])
        #expect(damaged.status == 2)
        #expect(damaged.errors.hasSuffix(#"session.jsonl:11: not a recorded entry: the line's "sum" does not match its contents (the line was changed or damaged)"# + "\n"), "\(damaged.errors)")
        tampered[10] = RecordingLine.withSum(tampered[10])
        try Data(tampered.joined(separator: "\n").utf8).write(to: recording)
        let diverged = try await CLI.run(["replay", folder.path, recording.path, "--json"])
        #expect(diverged.status == 1)
        #expect(diverged.output.contains(#""path":"state.count""#) && diverged.output.contains(#""sequence":10"#), "\(diverged.output)")
        // Changes that are JSON but not a list of changes: named when they are read (exit status 2).
        var malformed = lines
        malformed[12] = RecordingLine.withSum(lines[12].replacing(#/"changes":\[.*\],"scripts"/#, with: #""changes":{"not":"a list"},"scripts""#))
        #expect(malformed[12] != lines[12])
        try Data(malformed.joined(separator: "\n").utf8).write(to: recording)
        let refused = try await CLI.run(["replay", folder.path, recording.path])
        #expect(refused.status == 2)
        #expect(refused.errors.contains("the entry of action 12 is not a recorded entry (\"changes\" must be a list)"), "\(refused.errors)")
    }

    @Test func aRecordingCutMidLineReplaysUpToItsLastCompleteLineAndVersionOneIsRefused() async throws {
        let folder = try makeApp()
        defer { try? FileManager.default.removeItem(at: folder) }
        let recording = folder.appendingPathComponent("session.jsonl")
        _ = try await CLI.run(["run", folder.path, "--actions", folder.appendingPathComponent("actions.jsonl").path, "--record", recording.path])
        let whole = try Data(contentsOf: recording)
        let cut = whole.prefix(whole.count - 20) // the last entry loses its end, as after a crash mid-write
        try cut.write(to: recording)
        let replay = try await CLI.run(["replay", folder.path, recording.path])
        #expect(replay.status == 0, "\(replay.errors)")
        #expect(replay.errors.contains("session.jsonl:6: the last line is cut short"), "\(replay.errors)")
        #expect(replay.output == "replayed 4 actions: every change matches the recording\n")

        let folderGiven = try await CLI.run(["replay", folder.path, folder.path])
        #expect(folderGiven.status == 2 && folderGiven.errors == "luastore: cannot read \(folder.path): it is a folder\n", "\(folderGiven.errors)")
        let missing = try await CLI.run(["replay", folder.path, folder.path + "/none.jsonl"])
        #expect(missing.status == 2 && missing.errors.contains("none.jsonl: no such file"), "\(missing.errors)")

        try Data(#"{"action":{"type":"flag"},"state":{"flags":{}}}"#.utf8).write(to: recording)
        let old = try await CLI.run(["replay", folder.path, recording.path])
        #expect(old.status == 2)
        #expect(old.errors.contains("session.jsonl:1: a version 1 recording"), "\(old.errors)")
    }

    @Test func outputsAreWrittenThroughLinksAndFailuresAreWords() async throws {
        let folder = try makeApp()
        defer { try? FileManager.default.removeItem(at: folder) }
        let actions = folder.appendingPathComponent("actions.jsonl").path
        // Through a symbolic link: the target is written, the link stays a link.
        let target = folder.appendingPathComponent("target.jsonl")
        let link = folder.appendingPathComponent("link.jsonl")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        _ = try await CLI.run(["run", folder.path, "--actions", actions, "--record", link.path])
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == target.path)
        #expect(try String(contentsOf: target, encoding: .utf8).hasPrefix(#"{"format":"luastore-recording""#))
        // A device that is full: an error in words, exit 1, the device left alone.
        for option in ["--record", "--state-out"] {
            let full = try await CLI.run(["run", folder.path, "--actions", actions, option, "/dev/full"])
            #expect(full.status == 1)
            let what = option == "--record" ? "the recording" : "the state"
            #expect(full.errors.contains("cannot write \(what) to /dev/full: no space left on device"), "\(full.errors)")
        }
        #expect((try FileManager.default.attributesOfItem(atPath: "/dev/full")[.type] as? FileAttributeType) == .typeCharacterSpecial)
        // A folder that does not exist: refused before anything runs.
        let missing = try await CLI.run(["run", folder.path, "--actions", actions, "--record", "/nonexistent/session.jsonl"])
        #expect(missing.status == 2)
        #expect(missing.errors.contains("cannot write the recording to /nonexistent/session.jsonl: no such file or directory"), "\(missing.errors)")
        // Standard output on a full device: words and exit 1, after the state file is written (not a crash).
        let state = folder.appendingPathComponent("state.json").path
        let shell = try await runChildProcess(URL(fileURLWithPath: "/bin/sh"), [
            "-c", "exec \"$0\" run \"$1\" --actions \"$2\" --format json --state-out \"$3\" > /dev/full",
            CLI.binary.path, folder.path, actions, state,
        ], environment: CLI.environment)
        #expect(shell.status == 1, "\(shell.errors)")
        #expect(shell.errors.contains("luastore: cannot write to standard output: no space left on device"), "\(shell.errors)")
        #expect(!shell.errors.contains("Fatal error"))
        #expect(FileManager.default.fileExists(atPath: state))
        // Standard output: the recording is the output.
        let stdout = try await CLI.run(["run", folder.path, "--actions", actions, "--record", "/dev/stdout", "--format", "json"])
        #expect(stdout.outputLines.contains { $0.hasPrefix(#"{"format":"luastore-recording""#) }, "\(stdout.output)")
    }
}
