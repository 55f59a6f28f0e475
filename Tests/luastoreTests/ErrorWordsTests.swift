import Foundation
import LuaStoreTestSupport
import Testing

/// Failures a user meets are said in words naming the file and what to do — never a library's own error text
/// (`CLI.run` checks every run of every test for that; these are the cases that showed it) — and a damaged file
/// is refused in words instead of stopping the process (issue "Nothing lost, second sweep", item 9).
@Suite struct ErrorWordsTests {
    static let app = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action)
          if action.type == "add" then state.count = state.count + 1 end
          if action.type == "load" then return nil, { luastore.load("notes", "loaded") } end
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    /// `luastore serve` and `luastore token` run `luastore-serve` (the `serve/` package); a `luastore` built without
    /// it says so, and how to build it, instead of failing to start something. (The built `luastore` is copied to a
    /// folder of its own: the build folder may hold a `luastore-serve` — `scripts/test` builds the server's package
    /// into it.)
    @Test(arguments: ["serve", "token"]) func aMissingServerProgramIsNamedWithHowToBuildIt(command: String) async throws {
        let alone = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-alone-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: alone, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: alone) }
        let binary = alone.appendingPathComponent("luastore")
        try FileManager.default.copyItem(at: CLI.binary, to: binary)
        #expect(!FileManager.default.fileExists(atPath: alone.appendingPathComponent("luastore-serve").path))
        let result = try await runChildProcess(binary, [command, "--help"], directory: CLI.packageRoot,
                                               environment: CLI.environment.merging(["PATH": "/usr/bin:/bin"]) { $1 })
        #expect(CLI.rawErrorText(in: result.errors + result.output) == nil, "\(result.errors)")
        #expect(result.status == 2)
        #expect(result.errors.contains("luastore \(command) is the program luastore-serve, which is neither beside luastore (\(alone.path))"),
                "\(result.errors)")
        #expect(result.errors.contains("swift build --package-path serve"), "\(result.errors)")
        #expect(result.output.isEmpty)
    }

    @Test func filesThatCannotBeWrittenAreNamedInWords() async throws {
        let app = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: app) }
        let file = app.appendingPathComponent("file.txt")
        try Data("x".utf8).write(to: file)
        let recording = app.appendingPathComponent("session.jsonl").path
        #expect(try await CLI.run(["run", app.path, "--record", recording], input: #"{"type":"add"}"# + "\n").status == 0)

        let spec = try await CLI.run(["replay", app.path, recording, "--write-spec", file.path + "/x_spec.lua"])
        #expect(spec.status != 0)
        #expect(spec.errors.contains("cannot write the spec \(file.path)/x_spec.lua: \(file.path) is a file, not a folder"), "\(spec.errors)")

        try Data(#"{"name": "words", "version": "1.0.0", "luastore": "^1.0", "capabilities": {"storage": true}}"#.utf8).write(to: app.appendingPathComponent("luastore.json"))
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-missing-\(UUID().uuidString)")
        let pack = try await CLI.run(["pack", app.path, "-o", outside.path + "/sub/x.lsb"])
        #expect(pack.status == 1)
        #expect(pack.errors.contains("\(outside.path) does not exist"), "\(pack.errors)")
        let underFile = try await CLI.run(["pack", app.path, "-o", "/etc/hostname/x.lsb"])
        #expect(underFile.status == 1)
        #expect(underFile.errors.contains("/etc/hostname is a file, not a folder"), "\(underFile.errors)")

        let data = app.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data.appendingPathComponent("notes.json"), withIntermediateDirectories: true)
        let load = try await CLI.run(["run", app.path, "--data", data.path, "--format", "json"], input: #"{"type":"load"}"# + "\n")
        #expect(load.errors.contains("notes.json is a folder, not a file"), "\(load.errors)")
    }

    /// A recording of a format this luastore does not read says which luastore wrote it and what to do.
    @Test func recordingsOfOtherVersionsSayWhatToDo() async throws {
        let app = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: app) }
        for (version, said) in [
            ("1", "a recording of format version 1, written by an older luastore, which this one no longer replays (this luastore reads versions 2–6): record the session again with `luastore run --record`"),
            ("9", "a recording of format version 9, written by a newer luastore (this luastore reads versions 2–6): replay it with that luastore"),
            (#""3""#, #"the header's "version" must be a format version number"#),
        ] {
            let recording = app.appendingPathComponent("v\(version.count).jsonl")
            try Data(#"{"format":"luastore-recording","version":\#(version),"app":"app","schemaVersion":0,"scripts":"0000000000000000","state":{}}"#.utf8)
                .write(to: recording)
            let replay = try await CLI.run(["replay", app.path, recording.path])
            #expect(replay.status == 2)
            #expect(replay.errors.contains(said), "\(version): \(replay.errors)")
        }
    }

    /// A recording whose header holds no state (a string, a number, null where the state's table goes) is refused as
    /// the recording's fault, naming its line — not blamed on the app's `init`, which never ran.
    @Test func aHeaderWhoseStateIsNoTableIsTheRecordingsFault() async throws {
        let app = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: app) }
        for state in [#""str""#, "5", "null"] {
            let recording = app.appendingPathComponent("state.jsonl")
            try Data(#"{"format":"luastore-recording","version":2,"app":"app","schemaVersion":0,"scripts":"0000000000000000","state":\#(state)}"#.utf8)
                .write(to: recording)
            let replay = try await CLI.run(["replay", app.path, recording.path])
            #expect(replay.status == 2)
            #expect(replay.errors.contains(#"state.jsonl:1: "#) && replay.errors.contains(#"the header's "state" must be a state"#),
                    "\(state): \(replay.errors)")
            #expect(!replay.errors.contains("init"), "\(state): \(replay.errors)")
        }
    }

    /// A store whose rows hold what LuaStore never writes (a NULL key, a snapshot header that is a number) is
    /// refused in words, the file left as it is — it stopped the process before.
    @Test func aStoreWithRowsLuaStoreNeverWritesIsRefusedInWords() async throws {
        let app = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: app) }
        for (name, sql, said) in [
            ("nullkey", "INSERT INTO luastore (key, value) VALUES (NULL, 'x')", nil as String?),
            ("header", "UPDATE snapshots SET header = 42", "its snapshot is not one LuaStore writes"),
        ] {
            let store = app.appendingPathComponent("\(name).sqlite").path
            #expect(try await CLI.run(["run", app.path, "--persist", store], input: #"{"type":"add"}"# + "\n").status == 0)
            let changed = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                try: db.execute("PRAGMA writable_schema = 0")
                except Exception: pass
                db.execute(sys.argv[2]); db.commit(); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.close()
                """, store, sql])
            #expect(changed.status == 0, "\(changed.errors)")
            let before = try Data(contentsOf: URL(fileURLWithPath: store))
            let resumed = try await CLI.run(["run", app.path, "--persist", store, "--format", "json"], input: #"{"type":"add"}"# + "\n")
            if let said {
                #expect(resumed.status == 2, "\(name): \(resumed.output)")
                #expect(resumed.errors.contains(said), "\(name): \(resumed.errors)")
                #expect(try Data(contentsOf: URL(fileURLWithPath: store)) == before, "\(name): left as it is")
            } else {
                #expect(resumed.status == 0 || resumed.status == 2, "\(name): words, not a crash: \(resumed.status) \(resumed.errors)")
            }
        }
    }
}
