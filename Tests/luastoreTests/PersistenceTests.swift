import Foundation
import LuaStoreTestSupport
import Testing

/// Durable stores through the built binary (`run --persist`): the state survives the process — also `kill -9` —
/// resumes without `init`, migrates once, and files that are not this app's store are refused untouched.
@Suite struct PersistenceTests {
    static let counter = """
        local app = {}
        app.schemaVersion = 1
        function app.init() return { count = 0, inits = 1 } end
        function app.reduce(state, action)
          if action.type == "increment" then state.count = state.count + 1 end
        end
        function app.props(state) return { count = state.count, inits = state.inits } end
        return app
        """

    func temporaryFile(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("luastore-persist-\(UUID().uuidString)-\(name)").path
    }

    func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// The last `count` a run printed (its props lines), or nil.
    func lastCount(_ output: String) -> Int? {
        output.split(separator: "\n").compactMap { line -> Int? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return object["count"] as? Int
        }.last
    }

    /// Runs the app on `--persist database` with the actions `feed` (a shell loop) prints, its props going to
    /// `output`, and kills it with SIGKILL after `delay` seconds.
    func killRun(app: URL, database: String, output: String, sync: String, feed: String, after delay: String) async throws
        -> ChildProcessResult {
        try await runChildProcess(URL(fileURLWithPath: "/bin/bash"), ["-c", """
            rm -f "$5"
            (\(feed)) | "$1" run "$2" --persist "$3" --persist-sync "$4" --format json > "$5" 2>/dev/null &
            pid=$!
            # The delay counts from the first acknowledged action (a second props line), not from the start: a
            # loaded machine may take longer than the delay to start the run at all (bounded: 30 s).
            for _ in $(seq 1 3000); do
              [ "$(wc -l < "$5" 2>/dev/null || echo 0)" -ge 2 ] && break
              kill -0 $pid 2>/dev/null || break
              sleep 0.01
            done
            sleep "$6"
            kill -9 $pid 2>/dev/null
            wait $pid 2>/dev/null
            exit 0
            """, "kill", CLI.binary.path, app.path, database, sync, output, delay], environment: CLI.environment)
    }

    @Test func theStateSurvivesRunsWithoutInitAndSnapshotsReplaceTheLog() async throws {
        let app = try CLI.makeApp(Self.counter)
        let database = temporaryFile("store.db")
        defer { try? FileManager.default.removeItem(at: app); remove(database) }
        let increments = String(repeating: "{\"type\":\"increment\"}\n", count: 12)
        let first = try await CLI.run(["run", app.path, "--persist", database, "--persist-snapshot-every", "5", "--format", "json"],
                                      input: increments)
        #expect(first.status == 0, "\(first.errors)")
        #expect(first.outputLines.last == #"{"count":12,"inits":1}"#)
        let second = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: increments)
        #expect(second.status == 0, "\(second.errors)")
        #expect(second.outputLines.first == #"{"count":12,"inits":1}"#, "resumed, and init did not run again")
        #expect(second.outputLines.last == #"{"count":24,"inits":1}"#)
        let reset = try await CLI.run(["run", app.path, "--persist", database, "--persist-reset", "--format", "json"], input: "")
        #expect(reset.outputLines == [#"{"count":0,"inits":1}"#])
    }

    /// Items keyed by `math.random` ids, added over two runs of `--persist` (with `batch` and `full`, a snapshot
    /// between them or not): the second run draws on where the first left the generator — every item kept, the
    /// state an uninterrupted run makes, the second run's ids not the first's again (which overwrote its items).
    @Test(arguments: ["batch", "full"], [2, 1_000])
    func aSecondRunDrawsOnWhereTheFirstLeftMathRandom(sync: String, snapshotEvery: Int) async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { items = {} } end
            function app.reduce(state, action) state.items[tostring(math.random(1, 1 << 40))] = action.title end
            function app.props(state)
              local titles = {}
              for _, title in pairs(state.items) do titles[#titles + 1] = title end
              table.sort(titles)
              return { titles = table.concat(titles, ","), ids = state.items }
            end
            return app
            """)
        let database = temporaryFile("random.db"), whole = temporaryFile("random-whole.db")
        defer { try? FileManager.default.removeItem(at: app); remove(database); remove(whole) }
        let adds = { (titles: [String]) in titles.map { #"{"type":"add","title":"\#($0)"}"# + "\n" }.joined() }
        let options = ["--persist-sync", sync, "--persist-snapshot-every", String(snapshotEvery), "--format", "json"]
        let first = try await CLI.run(["run", app.path, "--persist", database] + options, input: adds(["a", "b", "c"]))
        let second = try await CLI.run(["run", app.path, "--persist", database] + options, input: adds(["d", "e", "f"]))
        let uninterrupted = try await CLI.run(["run", app.path, "--persist", whole] + options, input: adds(["a", "b", "c", "d", "e", "f"]))
        #expect(first.status == 0 && second.status == 0 && uninterrupted.status == 0, "\(first.errors) \(second.errors) \(uninterrupted.errors)")
        #expect(second.outputLines.last?.contains(#""titles":"a,b,c,d,e,f""#) == true, "\(second.outputLines)")
        #expect(second.outputLines.last == uninterrupted.outputLines.last, "the same ids as one run draws")
    }

    /// A run on a file written by an older version of the app runs its `migrate` once, from the version the file
    /// was written under; a file written by a newer one is refused and left as it is. A migration whose props fail
    /// is undone before the file holds it (the older app could no longer open it): refused, the file as it was.
    @Test func anOlderStoreIsMigratedOnceAndANewerOneRefused() async throws {
        let app = try CLI.makeApp(Self.counter)
        let database = temporaryFile("store.db")
        defer { try? FileManager.default.removeItem(at: app); remove(database) }
        _ = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "{\"type\":\"increment\"}\n")
        try Data("""
            local app = {}
            app.schemaVersion = 2
            function app.init() return { total = 0 } end
            function app.migrate(state, from) return { total = state.count } end
            function app.reduce(state, action) state.total = state.total + 1 end
            function app.props(state) return { total = state.missing.x } end
            return app
            """.utf8).write(to: app.appendingPathComponent("app.lua"))
        let unmigrated = try Data(contentsOf: URL(fileURLWithPath: database))
        let failing = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "")
        #expect(failing.status == 2)
        #expect(failing.errors.contains("app.lua:6: props fail on the state `migrate` made (the database is left as it is, at schemaVersion 1)"),
                "\(failing.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == unmigrated)
        try Data("""
            local app = {}
            app.schemaVersion = 2
            function app.init() return { count = 0, inits = 1, migrations = 0 } end
            function app.migrate(state, from) state.migrations = (state.migrations or 0) + 1; state.from = from end
            function app.reduce(state, action) if action.type == "increment" then state.count = state.count + 1 end end
            function app.props(state) return { count = state.count, migrations = state.migrations, from = state.from } end
            return app
            """.utf8).write(to: app.appendingPathComponent("app.lua"))
        let migrated = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "{\"type\":\"increment\"}\n")
        #expect(migrated.status == 0, "\(migrated.errors)")
        #expect(migrated.outputLines == [#"{"count":1,"from":1,"migrations":1}"#, #"{"count":2,"from":1,"migrations":1}"#])
        let again = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "")
        #expect(again.outputLines == [#"{"count":2,"from":1,"migrations":1}"#], "migrate ran once")
        try Data(Self.counter.utf8).write(to: app.appendingPathComponent("app.lua"))
        let before = try Data(contentsOf: URL(fileURLWithPath: database))
        let older = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "")
        #expect(older.status == 2)
        #expect(older.errors.contains("the store's database was written by schemaVersion 2, newer than this app's 1"), "\(older.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == before)
    }

    /// Files that are not this app's store — not a database, another SQLite database, another app's store, a
    /// damaged entry — are refused in words and left byte for byte as they were; a second process is refused
    /// while the first holds the file.
    @Test func foreignDamagedAndBusyFilesAreRefusedUntouched() async throws {
        let app = try CLI.makeApp(Self.counter)
        let other = try CLI.makeApp(Self.counter)
        defer { try? FileManager.default.removeItem(at: app); try? FileManager.default.removeItem(at: other) }
        func refused(_ path: String, _ message: String) async throws {
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            // (No input: the run is refused before it reads any, and writing to it could raise SIGPIPE here.)
            let run = try await CLI.run(["run", app.path, "--persist", path, "--format", "json"], input: "")
            #expect(run.status == 2)
            #expect(run.output.isEmpty)
            #expect(run.errors.contains(message), "\(run.errors)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(path) left as it was")
        }
        let text = temporaryFile("notes.txt")
        defer { remove(text) }
        try Data("my notes\n".utf8).write(to: URL(fileURLWithPath: text))
        try await refused(text, "is not a LuaStore store (not an SQLite database); it was left as it is")

        let foreign = temporaryFile("foreign.db")
        defer { remove(foreign) }
        let made = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"),
                                             ["python3", "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('create table notes (x)'); c.commit()", foreign])
        #expect(made.status == 0, "\(made.errors)")
        try await refused(foreign, "is an SQLite database but not a LuaStore store")

        let others = temporaryFile("others.db")
        defer { remove(others) }
        _ = try await CLI.run(["run", other.path, "--persist", others, "--format", "json"], input: "{\"type\":\"increment\"}\n")
        try await refused(others, "is the store of app '\(other.lastPathComponent)', not of '\(app.lastPathComponent)'")

        let damaged = temporaryFile("damaged.db")
        defer { remove(damaged) }
        _ = try await CLI.run(["run", app.path, "--persist", damaged, "--format", "json"], input: "{\"type\":\"increment\"}\n{\"type\":\"increment\"}\n")
        let edit = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            for seq, lines in c.execute("select seq, lines from entries").fetchall():
                edited = b"\\n".join(line.replace(b'"increment"', b'"incrementX"') if line.startswith(b'{"seq":2,') else line
                                     for line in bytes(lines).split(b"\\n"))
                c.execute("update entries set lines = ? where seq = ?", (edited, seq))
            c.commit()
            c.execute("pragma wal_checkpoint(truncate)")
            """, damaged])
        #expect(edit.status == 0, "\(edit.errors)")
        try await refused(damaged, "is damaged at entry 2: the line's \"sum\" does not match its contents")

        let busy = temporaryFile("busy.db")
        defer { remove(busy) }
        let holder = try await runChildProcess(URL(fileURLWithPath: "/bin/bash"), ["-c", """
            (sleep 8) | "$1" run "$2" --persist "$3" --format json > /dev/null 2>&1 &
            for i in $(seq 1 200); do [ -s "$3" ] && break; sleep 0.01; done
            sleep 0.3
            "$1" run "$2" --persist "$3" --format json < /dev/null
            echo "status $?"
            wait
            """, "holder", CLI.binary.path, app.path, busy], environment: CLI.environment)
        #expect(holder.output.hasSuffix("status 2\n"), "\(holder.output)")
        #expect(holder.errors.contains("is in use by another process"), "\(holder.errors)")
    }

    /// Another program's database is refused before SQLite opens it for writing, and left byte for byte with the
    /// files beside it: one with only a view, only a `user_version`, an `application_id` of its own, a WAL-mode
    /// one with tables of its own, and one with a hot rollback journal (which opening it would have rolled back).
    /// A store whose index page is damaged is refused, naming SQLite's check.
    @Test func foreignDatabasesAndDamagedStoresAreLeftByteForByte() async throws {
        let app = try CLI.makeApp(Self.counter)
        defer { try? FileManager.default.removeItem(at: app) }
        let folder = try CLI.makeApp("return {}")
        defer { try? FileManager.default.removeItem(at: folder) }
        func python(_ script: String, _ arguments: [String]) async throws {
            let made = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", script] + arguments)
            #expect(made.status == 0, "\(made.errors)")
        }
        func files(_ path: String) -> [String: Data] {
            var found: [String: Data] = [:]
            for suffix in ["", "-journal", "-wal"] { found[suffix] = FileManager.default.contents(atPath: path + suffix) }
            return found
        }
        let cases: [(String, String, String)] = [
            ("view", "c.execute('create view v as select 1'); c.commit()", "not a LuaStore store"),
            ("version", "c.execute('pragma user_version = 42'); c.commit()", "not a LuaStore store"),
            ("application", "c.execute('pragma application_id = 1234'); c.execute('create table t (x)'); c.commit()",
             "is the database of another program (its application id is 0x4d2)"),
            ("wal", "c.execute('pragma journal_mode = wal'); c.execute('create table t (x)'); c.execute('insert into t values (1)'); c.commit()",
             "is an SQLite database but not a LuaStore store"),
            ("hot", """
                c.execute('pragma cache_size = 10'); c.execute('create table t (x)'); c.commit()
                c.execute('begin')
                for i in range(800): c.execute('insert into t values (?)', (bytes(1000),))
                import os; os._exit(0)
                """, "has a rollback journal beside it"),
        ]
        for (name, statements, said) in cases {
            let path = folder.appendingPathComponent("\(name).db").path
            try await python("import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\n" + statements, [path])
            let before = files(path)
            if name == "hot" { #expect((before["-journal"]?.count ?? 0) > 0, "a hot journal was made") }
            let run = try await CLI.run(["run", app.path, "--persist", path, "--format", "json"], input: "")
            #expect(run.status == 2, "\(name)")
            #expect(run.errors.contains(said), "\(name): \(run.errors)")
            #expect(files(path) == before, "\(name): left byte for byte")
        }

        let store = folder.appendingPathComponent("store.db").path
        #expect(try await CLI.run(["run", app.path, "--persist", store], input: String(repeating: "{\"type\":\"increment\"}\n", count: 50)).status == 0)
        try await python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            page = c.execute("select rootpage from sqlite_master where type = 'index'").fetchone()[0]
            size = c.execute("pragma page_size").fetchone()[0]
            c.close()
            with open(sys.argv[1], "r+b") as f:
                f.seek(page * size - 200); f.write(bytes([0xFF]) * 200)
            """, [store])
        let before = files(store)
        let damaged = try await CLI.run(["run", app.path, "--persist", store, "--format", "json"], input: "")
        #expect(damaged.status == 2)
        #expect(damaged.errors.contains("is damaged (SQLite's check:"), "\(damaged.errors)")
        #expect(files(store) == before, "left byte for byte")

        // A store cut short (its last pages gone) is refused as SQLite opens it — and nothing is left beside it.
        let cut = folder.appendingPathComponent("cut.db").path
        #expect(try await CLI.run(["run", app.path, "--persist", cut], input: String(repeating: "{\"type\":\"increment\"}\n", count: 50)).status == 0)
        let whole = try #require(FileManager.default.contents(atPath: cut))
        try whole.prefix(12_288).write(to: URL(fileURLWithPath: cut))
        let cutBefore = files(cut)
        let cutRun = try await CLI.run(["run", app.path, "--persist", cut, "--format", "json"], input: "")
        #expect(cutRun.status == 2)
        #expect(cutRun.errors.contains("cannot be read as a LuaStore store"), "\(cutRun.errors)")
        #expect(files(cut) == cutBefore, "left byte for byte")
        #expect(!FileManager.default.fileExists(atPath: cut + "-shm") && !FileManager.default.fileExists(atPath: cut + "-wal"),
                "nothing left beside it")
    }

    /// After `kill -9`, a log whose frame was damaged while committed frames follow it is refused, naming how many
    /// would be dropped, and left as it is; `--persist-recover` opens it, saying what it dropped.
    @Test func aDamagedLogAfterACrashIsRefusedNamingWhatItWouldDrop() async throws {
        let app = try CLI.makeApp(Self.counter)
        defer { try? FileManager.default.removeItem(at: app) }
        let database = temporaryFile("log.db")
        let output = temporaryFile("log.out")
        defer { remove(database); try? FileManager.default.removeItem(atPath: output) }
        _ = try await killRun(app: app, database: database, output: output, sync: "full",
                              feed: #"for i in $(seq 1 400); do echo '{"type":"increment"}'; done; sleep 30"#, after: "3")
        let acknowledged = try #require(lastCount(try String(contentsOfFile: output, encoding: .utf8)))
        let log = try #require(FileManager.default.contents(atPath: database + "-wal"))
        let pageSize = Int(log[8]) << 24 | Int(log[9]) << 16 | Int(log[10]) << 8 | Int(log[11])
        let frames = (log.count - 32) / (24 + pageSize)
        try #require(frames >= 20, "the crash left a log of \(frames) frames (\(acknowledged) acknowledged)")
        var damaged = log
        damaged[32 + (frames / 2) * (24 + pageSize) + 24 + 100] ^= 0xFF
        try damaged.write(to: URL(fileURLWithPath: database + "-wal"))
        let main = try Data(contentsOf: URL(fileURLWithPath: database))
        let refused = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "")
        #expect(refused.status == 2)
        #expect(refused.errors.contains("has a damaged log (\(database)-wal): frame \(frames / 2 + 1) is damaged"), "\(refused.errors)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == main)
        #expect(FileManager.default.contents(atPath: database + "-wal") == damaged)
        let recovered = try await CLI.run(["run", app.path, "--persist", database, "--persist-recover", "--format", "json"], input: "")
        #expect(recovered.status == 0, "\(recovered.errors)")
        #expect(recovered.errors.contains("frame \(frames / 2 + 1) of its log was damaged"), "\(recovered.errors)")
        let resumed = try #require(lastCount(recovered.output))
        #expect(resumed < acknowledged, "what came before the damage: \(resumed) of \(acknowledged)")
    }

    /// A disk that fills up (a 256 KiB tmpfs, where a user namespace may mount one) or a file at the size limit
    /// (`ulimit -f`, with SIGXFSZ ignored: the write fails as on a full disk). With `full` sync the run stops at
    /// the action whose entry could not be written — said once, in words, with how many later actions were
    /// refused — exits 1, and the file, opened again, holds exactly the state of the last props line it printed.
    /// With `batch` sync it stops too, and says which entry the file holds; opened again, it holds that state.
    @Test(arguments: ["full", "batch"]) func aFullDiskStopsTheStoreAndLosesNothingAcknowledged(sync: String) async throws {
        let app = try CLI.makeApp(Self.counter)
        let folder = temporaryFile("disk")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: app); try? FileManager.default.removeItem(atPath: folder) }
        let pad = String(repeating: "x", count: 400)
        let input = folder + "/actions.jsonl"
        try Data(String(repeating: "{\"type\":\"increment\",\"pad\":\"\(pad)\"}\n", count: 3000).utf8)
            .write(to: URL(fileURLWithPath: input))
        // Each way writes the database where it fills up, then leaves a copy of it (and its WAL) in `folder/kept`.
        var ways: [(name: String, words: String, script: String)] = [
            ("a file-size limit", "an input/output error", """
                trap '' XFSZ; ulimit -f 100
                "$1" run "$2" --persist "$3/kept.db" --persist-sync "$5" --format json < "$4" > "$3/out" 2> "$3/err"
                echo $? > "$3/status"
                """),
        ]
        let namespaces = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["unshare", "-rm", "true"])
        if namespaces.status == 0 {
            ways.append(("a full tmpfs", "the disk is full", """
                mkdir -p "$3/mount" && mount -t tmpfs -o size=256k tmpfs "$3/mount" || exit 3
                "$1" run "$2" --persist "$3/mount/kept.db" --persist-sync "$5" --format json < "$4" > "$3/out" 2> "$3/err"
                echo $? > "$3/status"
                for f in "$3"/mount/kept.db*; do cp "$f" "$3/"; done
                """))
        }
        for way in ways {
            for name in ["kept.db", "kept.db-wal", "kept.db-shm", "out", "err", "status"] { try? FileManager.default.removeItem(atPath: folder + "/" + name) }
            let arguments = ["-c", way.script, "disk", CLI.binary.path, app.path, folder, input, sync]
            let ran = way.name == "a full tmpfs"
                ? try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["unshare", "-rm", "/bin/bash"] + arguments,
                                            environment: CLI.environment)
                : try await runChildProcess(URL(fileURLWithPath: "/bin/bash"), arguments, environment: CLI.environment)
            #expect(ran.status == 0, "\(way.name): \(ran.errors)")
            let status = try String(contentsOfFile: folder + "/status", encoding: .utf8)
            let output = try String(contentsOfFile: folder + "/out", encoding: .utf8)
            let errors = try String(contentsOfFile: folder + "/err", encoding: .utf8)
            #expect(status == "1\n", "\(way.name): \(errors)")
            let acknowledged = try #require(lastCount(output), "\(way.name): \(output)")
            // (With batch sync the store may show every action before the writer finds the disk full: it does not
            // wait for commits. The file then holds what it says, below.)
            #expect(acknowledged > 0 && (acknowledged < 3000 || sync == "batch"), "\(way.name): \(acknowledged)")
            let said = errors.split(separator: "\n")
            #expect(said.last?.contains("the store stopped: it cannot keep its state in ") == true, "\(way.name): \(errors)")
            #expect(said.last?.contains(way.words) == true, "\(way.name): \(errors)")
            let resumed = try await CLI.run(["run", app.path, "--persist", folder + "/kept.db", "--format", "json"], input: "")
            #expect(resumed.status == 0, "\(way.name): \(resumed.errors)")
            if sync == "full" {
                #expect(said.count == 2, "\(way.name): once, then the summary: \(errors)")
                #expect(said.first?.contains("the store's database could not be written (") == true, "\(way.name): \(errors)")
                #expect(said.first?.contains(way.words) == true, "\(way.name): \(errors)")
                #expect(said.first?.hasSuffix("(line \(acknowledged + 1))") == true, "\(way.name): \(errors)")
                #expect(said.last?.contains("the file holds the state as of entry #\(acknowledged)") == true, "\(way.name): \(errors)")
                #expect(lastCount(resumed.output) == acknowledged, "\(way.name): every acknowledged action kept, nothing more")
            } else {
                // Batch sync shows actions before they are kept: the summary says which the file holds, and it holds
                // exactly that state.
                #expect(said.count <= 2, "\(way.name): at most once, then the summary: \(errors)")
                let kept = try #require(said.last?.firstMatch(of: /the file holds the state as of entry #(\d+) \(with batch sync, actions shown after it are not kept\)/),
                                        "\(way.name): \(errors)")
                let entry = try #require(Int(kept.1))
                #expect(entry <= acknowledged)
                #expect(lastCount(resumed.output) == entry, "\(way.name): the state of entry #\(entry)")
            }
        }
    }

    /// `kill -9` at random moments while actions stream in, 20 times over one file: with `--persist-sync full`
    /// every action whose props line was written is there after the restart (a props line comes only after its
    /// action is on disk), and the store always opens.
    @Test func killedRunsLoseNothingAcknowledgedWithFullSync() async throws {
        let app = try CLI.makeApp(Self.counter)
        let database = temporaryFile("store.db")
        let output = temporaryFile("out.jsonl")
        defer { try? FileManager.default.removeItem(at: app); remove(database); remove(output) }
        var restored = 0
        for round in 0..<20 {
            let delay = String(format: "%.3f", Double.random(in: 0.02...0.4))
            let killed = try await killRun(app: app, database: database, output: output, sync: "full",
                                           feed: "for i in $(seq 1 30); do printf '{\"type\":\"increment\"}\\n%.0s' $(seq 1 10); sleep 0.01; done", after: delay)
            #expect(killed.status == 0)
            let acknowledged = lastCount(try String(contentsOfFile: output, encoding: .utf8)) ?? restored
            let reopened = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "")
            #expect(reopened.status == 0, "round \(round): \(reopened.errors)")
            let now = try #require(lastCount(reopened.output), "round \(round): \(reopened.output) \(reopened.errors)")
            #expect(now >= acknowledged, "round \(round): \(acknowledged) acknowledged, \(now) kept")
            #expect(now >= restored && now <= restored + 300, "round \(round)")
            restored = now
        }
        #expect(restored > 0)
    }

    /// A run killed while it makes a new store's file — from the moment the file appears — leaves the empty file
    /// or the whole store, never a database half made that every later run refuses (30 rounds, killed 0–3 ms after).
    @Test func aRunKilledWhileItMakesTheStoreLeavesOneTheNextRunOpens() async throws {
        let app = try CLI.makeApp(Self.counter)
        defer { try? FileManager.default.removeItem(at: app) }
        for round in 0..<30 {
            let database = temporaryFile("made-\(round).db")
            defer { remove(database); try? FileManager.default.removeItem(atPath: database + "-journal") }
            let killed = try await runChildProcess(URL(fileURLWithPath: "/bin/bash"), ["-c", """
                "$1" run "$2" --persist "$3" --actions /dev/null --format json > /dev/null 2>&1 &
                pid=$!
                for _ in $(seq 1 20000); do [ -e "$3" ] && break; kill -0 $pid 2>/dev/null || break; done
                sleep "$4"
                kill -9 $pid 2>/dev/null
                wait $pid 2>/dev/null
                exit 0
                """, "kill", CLI.binary.path, app.path, database, String(format: "%.4f", Double(round % 4) / 1000)], environment: CLI.environment)
            #expect(killed.status == 0)
            let reopened = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "{\"type\":\"increment\"}\n")
            #expect(reopened.status == 0, "round \(round): \(reopened.errors)")
            #expect(lastCount(reopened.output) == 1, "round \(round): \(reopened.output) \(reopened.errors)")
        }
    }

    /// With `batch` (the default) a killed run loses at most what was not yet committed: the store always
    /// opens, on a state the actions reached (a prefix of them).
    @Test func killedRunsResumeOnAPrefixWithBatchSync() async throws {
        let app = try CLI.makeApp(Self.counter)
        let database = temporaryFile("store.db")
        let output = temporaryFile("out.jsonl")
        defer { try? FileManager.default.removeItem(at: app); remove(database); remove(output) }
        var restored = 0
        for round in 0..<5 {
            let delay = String(format: "%.3f", Double.random(in: 0.02...0.3))
            _ = try await killRun(app: app, database: database, output: output, sync: "batch",
                                  feed: "for i in $(seq 1 2000); do echo '{\"type\":\"increment\"}'; done; sleep 1", after: delay)
            let reopened = try await CLI.run(["run", app.path, "--persist", database, "--format", "json"], input: "")
            #expect(reopened.status == 0, "round \(round): \(reopened.errors)")
            let now = try #require(lastCount(reopened.output), "round \(round): \(reopened.errors)")
            #expect(now >= restored && now <= restored + 2000, "round \(round)")
            restored = now
        }
    }
}
