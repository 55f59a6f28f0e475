import Foundation
import LocalPostgres
import LuaStoreTestSupport
import RawHTTPClient
import Testing

/// Two `luastore serve --cluster` nodes on one real PostgreSQL: a key is served by the node that holds its lease
/// (the other sends its clients there), and when that node is killed (`kill -9`) the other takes the key over
/// once the lease expires — with every acknowledged action, and every id answered rather than applied again.
@Suite(.serialized, .enabled(if: PostgresServer.unavailable == nil, "PostgreSQL's server is not installed"))
struct ClusterServeTests {
    let counter = CLI.packageRoot.appendingPathComponent("samples/counter")

    @Test func aKilledNodesKeysResumeOnAnotherWithNothingAcknowledgedLostOrAppliedTwice() async throws {
        let cluster = try await Cluster(app: counter, leaseSeconds: 6)
        defer { cluster.remove() }
        let (server, url) = (cluster.server, cluster.url)
        let one = try await cluster.node("one")
        let two = try await cluster.node("two")

        var acknowledged: Set<String> = []
        for index in 0..<10 {
            let response = try await one.request("POST", "/stores/room/actions", body: #"{"id":"x\#(index)","action":{"type":"increment"}}"#)
            if response.status == 200 { acknowledged.insert("x\(index)") }
        }
        #expect(acknowledged.count == 10)
        // The other node sends the key's clients to the one that holds it.
        let redirected = try await two.request("GET", "/stores/room/props")
        #expect(redirected.status == 307, "\(redirected.body)")
        #expect(redirected.headers["location"] == "http://127.0.0.1:\(one.port)/stores/room/props")
        #expect(redirected.body.contains("served by node one"))

        #expect(try await one.stop(SIGKILL).status == SIGKILL)
        // Clients resend what they sent and go on: once the lease expires, the second node takes the key over.
        var answers: [String: [String: Any]] = [:]
        let deadline = ContinuousClock.now + .seconds(60)
        for index in 0..<15 {
            while ContinuousClock.now < deadline {
                let response = try await two.request("POST", "/stores/room/actions", body: #"{"id":"x\#(index)","action":{"type":"increment"}}"#)
                if response.status == 200 {
                    answers["x\(index)"] = try ServedApp.json(response.body)
                    break
                }
                #expect([307, 503].contains(response.status), "\(response.status) \(response.body)")
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        #expect(answers.count == 15)
        for index in 0..<10 { #expect(answers["x\(index)"]?["repeated"] as? Bool == true, "x\(index): \(answers["x\(index)"] ?? [:])") }
        for index in 10..<15 { #expect(answers["x\(index)"]?["repeated"] == nil) }
        #expect(try ServedApp.json(try await two.request("GET", "/stores/room/props").body)["count"] as? Int == 15)
        let ended = try await two.stop()
        #expect(ended.status == 0, "\(ended.errors)")
        // Closed, the second node let the key go: its lease has expired in the database.
        let database = String(url.split(separator: "/").last!)
        #expect(try await server.psql(database, "SELECT node, expires <= now() FROM luastore_leases WHERE key = 'room'")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "two|t")
    }

    /// A key's journal, written while the node runs (snapshots every 3 actions: older entries are gone), exports as a
    /// recording that `luastore replay` replays to the end without a divergence; what is not there is said in words.
    @Test func aKeysJournalExportsAsARecordingThatReplays() async throws {
        let cluster = try await Cluster(app: counter, leaseSeconds: 6)
        defer { cluster.remove() }
        let one = try await cluster.node("one", ["--persist-snapshot-every", "3"])
        for index in 0..<8 {
            let body = index == 5 ? #"{"id":"r5","action":{"type":"increment","by":10}}"# : #"{"id":"r\#(index)","action":{"type":"increment"}}"#
            #expect(try await one.request("POST", "/stores/doc/actions", body: body).status == 200)
        }
        let (status, report) = try await cluster.replayJournal(of: "doc")
        #expect(status == 0, "\(report)")
        let answer = try ServedApp.json(report)
        #expect(answer["matches"] as? Bool == true, "\(report)")
        // (From the latest snapshot, at entry 6: entries 7 and 8 follow it.)
        #expect(answer["replayed"] as? Int == 2, "\(report)")
        let file = cluster.folder.appendingPathComponent("doc.jsonl")
        #expect(try await CLI.run(["export", "doc", "--cluster", cluster.url, "-o", file.path]).status == 0)
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 3 && lines[0].contains(#""seq":6"#) && lines[0].contains(#""count":15"#), "\(lines)")

        let missing = try await CLI.run(["export", "nobody", "--cluster", cluster.url])
        #expect(missing.status == 1 && missing.errors.contains(#"the cluster holds no journal of key "nobody""#), "\(missing.errors)")
        let again = try await CLI.run(["export", "doc", "--cluster", cluster.url, "-o", file.path])
        #expect(again.status == 2 && again.errors.contains("exists"), "\(again.errors)")
        let badKey = try await CLI.run(["export", "../doc", "--cluster", cluster.url])
        #expect(badKey.status == 2 && badKey.errors.contains("a store key"), "\(badKey.errors)")
        let empty = cluster.server.url(try await cluster.server.database())
        let notCluster = try await CLI.run(["export", "doc", "--cluster", empty])
        #expect(notCluster.status == 2 && notCluster.errors.contains("is not a LuaStore cluster"), "\(notCluster.errors)")
        #expect(try await one.stop().status == 0)
    }

    /// A key whose reducer draws ids with `math.random`, taken over after its node is killed: the second node draws
    /// on where the first's journal left the generator — every acknowledged item kept (it drew the first node's ids
    /// again and overwrote their items) — and the journal, from its latest snapshot, replays without a divergence.
    @Test func aTakenOverKeyDrawsOnWhereItsJournalLeftMathRandom() async throws {
        let app = try ServedApp.randomIdsApp()
        defer { try? FileManager.default.removeItem(at: app) }
        let cluster = try await Cluster(app: app, leaseSeconds: 4)
        defer { cluster.remove() }
        let one = try await cluster.node("one", ["--persist-snapshot-every", "3"])
        let two = try await cluster.node("two", ["--persist-snapshot-every", "3"])
        for n in 0..<7 {
            #expect(try await one.request("POST", "/stores/ids/actions", body: #"{"id":"i\#(n)","action":{"type":"add","n":\#(n)}}"#).status == 200)
        }
        #expect(try await one.stop(SIGKILL).status == SIGKILL)
        let deadline = ContinuousClock.now + .seconds(60)
        for n in 7..<10 {
            while ContinuousClock.now < deadline {
                let response = try await two.request("POST", "/stores/ids/actions", body: #"{"id":"i\#(n)","action":{"type":"add","n":\#(n)}}"#)
                if response.status == 200 { break }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        #expect(try ServedApp.json(try await two.request("GET", "/stores/ids/props").body)["count"] as? Int == 10)
        let (status, report) = try await cluster.replayJournal(of: "ids")
        #expect(status == 0 && (try? ServedApp.json(report))?["matches"] as? Bool == true, "\(report)")
        #expect(try await two.stop().status == 0)
    }

    /// `luastore publish` reaches every node: a signed newer version is installed into the live stores of each (their
    /// counts kept) and runs the keys opened after; a version that does not load, or that no trusted key signed, is
    /// refused by each node, which keeps the version it runs and says why; `publish` refuses a version that is not
    /// newer; a node started later runs the latest version that passes — not a refused one, not its own older one.
    @Test func aPublishedVersionReachesEveryNodeAndABadOneChangesNothing() async throws {
        let versions = try await CounterVersions(counter)
        defer { versions.remove() }
        let relabeled = try await versions.pack("1.1.0") { $0.replacingOccurrences(of: #"" clicks")"#, with: #"" clicks in 1.1")"#) }
        let broken = try await versions.pack("1.2.0") { $0 + "\nthis is not Lua\n" }
        let unsigned = try await versions.pack("1.3.0", signed: false) { $0.replacingOccurrences(of: #"" clicks")"#, with: #"" clicks in 1.3")"#) }

        let cluster = try await Cluster(app: counter, leaseSeconds: 3)
        defer { cluster.remove() }
        let trust = versions.trust
        let one = try await cluster.node("one", trust), two = try await cluster.node("two", trust)
        for (node, key) in [(one, "a"), (two, "b")] {
            for _ in 0..<2 { #expect(try await node.request("POST", "/stores/\(key)/actions", body: #"{"type":"increment"}"#).status == 200) }
        }
        func label(_ node: ServedApp, _ key: String) async throws -> String? {
            try ServedApp.json(try await node.request("GET", "/stores/\(key)/props").body)["label"] as? String
        }

        let published = try await CLI.run(["publish", relabeled, "--cluster", cluster.url] + trust)
        #expect(published.status == 0 && published.output.contains("published counter 1.1.0 to the cluster (publication 1)"), "\(published.output)\(published.errors)")
        try await eventually("both nodes' live stores run 1.1.0") {
            let (a, b) = (try await label(one, "a"), try await label(two, "b"))
            return a == "2 clicks in 1.1" && b == "2 clicks in 1.1"
        }
        #expect(try await one.request("POST", "/stores/c/actions", body: #"{"type":"increment","by":3}"#).status == 200)
        #expect(try await label(one, "c") == "3 clicks in 1.1")
        for node in [one, two] { #expect(node.errorsSoFar().contains("installed counter 1.1.0 (publication 1) in place of counter 1.0.0"), "\(node.errorsSoFar())") }

        // A version that does not load: published (it is signed), refused by every node, which keeps 1.1.0.
        #expect(try await CLI.run(["publish", broken, "--cluster", cluster.url] + trust).status == 0)
        try await eventually("both nodes refuse 1.2.0") {
            [one, two].allSatisfy { $0.errorsSoFar().contains("install of publication 2 (counter 1.2.0) failed, still running counter 1.1.0: app.lua:") }
        }
        #expect(try await label(two, "b") == "2 clicks in 1.1")
        // Versions only go up.
        let again = try await CLI.run(["publish", broken, "--cluster", cluster.url] + trust)
        #expect(again.status == 2 && again.errors.contains("counter 1.2.0 is published already: publish a newer version"), "\(again.errors)")
        // Unsigned: `publish --allow-unsigned` stores it, and the nodes, which trust only signed versions, refuse it.
        #expect(try await CLI.run(["publish", unsigned, "--cluster", cluster.url]).status == 2)
        #expect(try await CLI.run(["publish", unsigned, "--cluster", cluster.url, "--allow-unsigned"]).status == 0)
        try await eventually("both nodes refuse the unsigned 1.3.0") {
            [one, two].allSatisfy { $0.errorsSoFar().contains("install of publication 3 (counter 1.3.0) failed, still running counter 1.1.0") && $0.errorsSoFar().contains("is not signed") }
        }

        // A node started now runs 1.1.0, the latest that passes: key a, let go by node one as it stops, resumes there.
        #expect(try await one.stop().status == 0)
        let three = try await cluster.node("three", trust)
        #expect(try await label(three, "a") == "2 clicks in 1.1")
        #expect(try await two.stop().status == 0)
        #expect(try await three.stop().status == 0)
        // The install is in each key's journal (a reload entry), which replays (reloads are passed over).
        let (status, report) = try await cluster.replayJournal(of: "b")
        #expect(status == 0 && report.contains(#""matches":true"#), "\(report)")
    }

    /// A key whose state a published version cannot migrate keeps the version it ran — while live (its install fails)
    /// and after it moves to another node, which resumes it on the version its journal last ran: a publication
    /// (looked for in the cluster) or the node's own app; the other keys run the latest.
    @Test func aStoreThatAVersionCannotMigrateResumesOnTheVersionItsJournalRan() async throws {
        let versions = try await CounterVersions(counter)
        defer { versions.remove() }
        /// A version whose `schemaVersion` is `schema`, its `migrate`'s body `migrate`.
        func version(_ number: String, schema: Int, migrate: String) async throws -> String {
            try await versions.pack(number) { source in
                source.replacingOccurrences(of: #"" clicks")"#, with: #"" clicks in \#(number)")"#).replacingOccurrences(
                    of: "return app", with: "app.schemaVersion = \(schema)\nfunction app.migrate(state, from)\n\(migrate)\n  return state\nend\nreturn app")
            }
        }
        let first = try await version("1.1.0", schema: 2, migrate: "")
        let second = try await version("1.2.0", schema: 3, migrate: #"  if state.count > 5 then error("too many clicks to migrate") end"#)

        let cluster = try await Cluster(app: counter, leaseSeconds: 3)
        defer { cluster.remove() }
        let trust = versions.trust
        let one = try await cluster.node("one", trust)
        #expect(try await one.request("POST", "/stores/small/actions", body: #"{"type":"increment","by":2}"#).status == 200)
        #expect(try await one.request("POST", "/stores/big/actions", body: #"{"type":"increment","by":10}"#).status == 200)
        func label(_ node: ServedApp, _ key: String) async throws -> String? {
            let response = try await node.request("GET", "/stores/\(key)/props")
            return response.status == 200 ? try ServedApp.json(response.body)["label"] as? String : "\(response.status) \(response.body)"
        }
        #expect(try await CLI.run(["publish", first, "--cluster", cluster.url] + trust).status == 0)
        try await eventually("both keys run 1.1") {
            let (small, big) = (try await label(one, "small"), try await label(one, "big"))
            return small == "2 clicks in 1.1.0" && big == "10 clicks in 1.1.0"
        }
        #expect(try await CLI.run(["publish", second, "--cluster", cluster.url] + trust).status == 0)
        try await eventually("key small runs 1.2, and big's install failed") {
            try await label(one, "small") == "2 clicks in 1.2.0" && one.errorsSoFar().contains("key big: install failed")
        }
        #expect(try await label(one, "big") == "10 clicks in 1.1.0")
        #expect(try await one.stop().status == 0)

        // Node two starts on 1.2 (its own app is 1.0.0): big resumes on 1.1, found among the publications.
        let two = try await cluster.node("two", trust)
        #expect(try await label(two, "big") == "10 clicks in 1.1.0")
        #expect(two.errorsSoFar().contains("key big: the running version cannot start its store (app.lua:"), "\(two.errorsSoFar())")
        #expect(two.errorsSoFar().contains("too many clicks to migrate"))
        #expect(try await two.request("POST", "/stores/big/actions", body: #"{"type":"decrement","by":6}"#).status == 200)
        #expect(try await label(two, "big") == "4 clicks in 1.1.0")
        #expect(try await label(two, "small") == "2 clicks in 1.2.0")
        #expect(try await two.stop().status == 0)

        // Node three: big, now small enough, migrates to 1.2 as it resumes.
        let three = try await cluster.node("three", trust)
        #expect(try await label(three, "big") == "4 clicks in 1.2.0")
        #expect(try await three.stop().status == 0)
    }

    /// A live connection to a node that does not hold its key is relayed to the node that does (a browser does not
    /// follow a redirect on a WebSocket's upgrade): the snapshot, the actions and their outcomes go through it.
    @Test func aLiveClientOfAnotherNodeIsForwardedToTheHolder() async throws {
        let cluster = try await Cluster(app: counter, leaseSeconds: 6)
        defer { cluster.remove() }
        let one = try await cluster.node("one", ["--max-message-bytes", "256"])
        let two = try await cluster.node("two", ["--max-message-bytes", "256"])
        #expect(try await one.request("POST", "/stores/doc/actions", body: #"{"type":"increment","by":5}"#).status == 200)
        let live = try await two.live("/stores/doc/live")
        let snapshot = try #require(try await live.read(1).first)
        #expect((snapshot["props"] as? [String: Any])?["count"] as? Int == 5)
        try await live.send(#"{"id":"via-two","action":{"type":"increment"}}"#)
        let two_ = try await live.read(2)
        #expect(two_.contains { ($0["props"] as? [String: Any])?["count"] as? Int == 6 })
        #expect(two_.contains { $0["id"] as? String == "via-two" && $0["outcome"] as? String == "applied" })
        // The action was applied where the key lives.
        #expect(try ServedApp.json(try await one.request("GET", "/stores/doc/props").body)["count"] as? Int == 6)
        // Changes made on the holder reach the forwarded client.
        _ = try await one.request("POST", "/stores/doc/actions", body: #"{"type":"increment"}"#)
        #expect((try #require(try await live.read(1).first)["props"] as? [String: Any])?["count"] as? Int == 7)
        live.close()
        // A message over the limit ends a relayed connection as it ends a direct one: 1009, saying why (one frame
        // longer than the limit, and a message of frames that grows past it); so does a binary frame (1003); and
        // nothing of them is applied.
        let big = #"{"id":"big","action":{"type":"increment","pad":""# + String(repeating: "x", count: 400) + #""}}"#
        let oneFrame = try await two.live("/stores/doc/live")
        _ = try await oneFrame.read(1)
        try await oneFrame.send(big)
        await oneFrame.expectClose(1009, saying: "a message has at most 256 bytes", otherwise: "a relayed message over the limit was answered")
        oneFrame.close()
        let fragments = try await two.live("/stores/doc/live")
        _ = try await fragments.read(1)
        try await offPool { try fragments.sendText(big, inPieces: 3) }
        await fragments.expectClose(1009, saying: "a message has at most 256 bytes", otherwise: "a relayed message of frames over the limit was answered")
        fragments.close()
        let binary = try await two.live("/stores/doc/live")
        _ = try await binary.read(1)
        try await offPool { try binary.send(opcode: 0x2, Array(#"{"type":"increment"}"#.utf8)) }
        await binary.expectClose(1003, saying: "the live protocol speaks JSON text", otherwise: "a relayed binary frame was taken")
        binary.close()
        #expect(try ServedApp.json(try await one.request("GET", "/stores/doc/props").body)["count"] as? Int == 7)
        #expect(try await two.stop().status == 0)
        #expect(try await one.stop().status == 0)
    }

    /// A node paused past its lease (`SIGSTOP`) while another took its key over never writes the key again when it
    /// wakes: an action it is sent then is not acknowledged, and the key's state is the other node's.
    @Test func aPausedNodeThatWakesAfterATakeoverWritesNothing() async throws {
        let cluster = try await Cluster(app: counter, leaseSeconds: 3)
        defer { cluster.remove() }
        let (server, url) = (cluster.server, cluster.url)
        let one = try await cluster.node("one")
        let two = try await cluster.node("two")
        for index in 0..<3 {
            #expect(try await one.request("POST", "/stores/k/actions", body: #"{"id":"a\#(index)","action":{"type":"increment"}}"#).status == 200)
        }
        let watching = try await one.live("/stores/k/live")
        _ = try await watching.read(1) // (its snapshot)
        kill(one.process.processIdentifier, SIGSTOP)
        var took = false
        let deadline = ContinuousClock.now + .seconds(60)
        while !took, ContinuousClock.now < deadline {
            let response = try await two.request("POST", "/stores/k/actions", body: #"{"id":"b0","action":{"type":"increment","by":10}}"#)
            took = response.status == 200
            if !took { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(took)
        kill(one.process.processIdentifier, SIGCONT)
        // The woken node still runs the key's store until it finds its lease gone: whatever it is sent is refused
        // by the database (fenced), or sent on to the node that holds the key — never acknowledged by it.
        let late = try await one.request("POST", "/stores/k/actions", body: #"{"id":"late","action":{"type":"increment","by":100}}"#)
        #expect(late.status != 200, "\(late.status) \(late.body)")
        // (Never "failed", which says the reducer refused the action and the state is as it was for good: the
        // action was never reduced, and its sender sends it again — here, to the node that holds the key.)
        #expect(!late.body.contains(#""outcome":"failed""#) && !late.body.contains(#""seq""#), "\(late.status) \(late.body)")
        #expect(try ServedApp.json(try await two.request("GET", "/stores/k/props").body)["count"] as? Int == 13)
        // Its live client is told the key moved (not that the server is shutting down), and reconnects.
        await watching.expectClose(1001, saying: "the key moved to another node", otherwise: "the woken node kept its live client")
        let resent = try await two.request("POST", "/stores/k/actions", body: #"{"id":"late","action":{"type":"increment","by":100}}"#)
        #expect(resent.status == 200, "\(resent.status) \(resent.body)")
        #expect(try ServedApp.json(try await two.request("GET", "/stores/k/props").body)["count"] as? Int == 113)
        #expect(try await one.stop().status == 0)
        #expect(try await two.stop().status == 0)
        let database = String(url.split(separator: "/").last!)
        #expect(try await server.psql(database, "SELECT count(*) FROM luastore_entries WHERE key = 'k' AND convert_from(lines, 'UTF8') LIKE '%late%'")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the late action once: as the holder applied it")
    }
}

/// A database of the test's own on the process's PostgreSQL, and `serve --cluster` nodes on it (full sync).
/// Versions of the counter sample packed as bundles, signed with a key made for them (`trust` names it to a node).
struct CounterVersions {
    let folder: URL
    let source: String
    let manifest: String
    let key: String
    var trust: [String] { ["--trust", key + ".pub"] }

    init(_ counter: URL) async throws {
        folder = try ServedApp.temporaryFolder()
        source = try String(contentsOf: counter.appendingPathComponent("app.lua"), encoding: .utf8)
        manifest = try String(contentsOf: counter.appendingPathComponent("luastore.json"), encoding: .utf8)
        key = folder.appendingPathComponent("release").path
        #expect(try await CLI.run(["keygen", key]).status == 0)
    }

    /// Version `number` of the counter: its manifest's version, its app.lua changed by `edit`; packed (signed unless
    /// not); the bundle's path.
    func pack(_ number: String, signed: Bool = true, _ edit: (String) -> String) async throws -> String {
        let app = folder.appendingPathComponent("v\(number)/counter")
        try FileManager.default.createDirectory(at: app, withIntermediateDirectories: true)
        try edit(source).write(to: app.appendingPathComponent("app.lua"), atomically: true, encoding: .utf8)
        try manifest.replacingOccurrences(of: #""version": "1.0.0""#, with: #""version": "\#(number)""#)
            .write(to: app.appendingPathComponent("luastore.json"), atomically: true, encoding: .utf8)
        let bundle = folder.appendingPathComponent("counter-\(number).zip").path
        let packed = try await CLI.run(["pack", app.path, "-o", bundle] + (signed ? ["--key", key + ".key"] : []))
        #expect(packed.status == 0, "\(packed.errors)")
        return bundle
    }

    func remove() { try? FileManager.default.removeItem(at: folder) }
}

/// Waits until `check` holds, at most 30 s (an issue when it does not).
func eventually(_ what: String, _ check: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
        if try await check() { return }
        try await Task.sleep(for: .milliseconds(100))
    }
    Issue.record("not within 30 s: \(what)")
}

struct Cluster {
    let server: PostgresServer
    let url: String
    let folder: URL
    let app: URL
    let leaseSeconds: Int

    init(app: URL, leaseSeconds: Int) async throws {
        server = try await PostgresServer.running()
        url = server.url(try await server.database())
        folder = try ServedApp.temporaryFolder()
        self.app = app
        self.leaseSeconds = leaseSeconds
    }

    /// Starts node `name` (with `extra` arguments).
    func node(_ name: String, _ extra: [String] = []) async throws -> ServedApp {
        try await ServedApp(app: app, data: folder.appendingPathComponent(name),
                            ["--no-auth", "--cluster", url, "--node", name, "--lease-seconds", String(leaseSeconds), "--persist-sync", "full"] + extra)
    }

    /// `luastore export KEY --cluster URL` into a file of the cluster's folder, then `luastore replay APP FILE --json`:
    /// the replay's status and report (what it printed).
    func replayJournal(of key: String) async throws -> (status: Int32, report: String) {
        let file = folder.appendingPathComponent("\(key)-\(UUID().uuidString).jsonl")
        let export = try await CLI.run(["export", key, "--cluster", url, "--output", file.path])
        guard export.status == 0 else { return (export.status, "export: \(export.errors)") }
        let replay = try await CLI.run(["replay", app.path, file.path, "--json"])
        return (replay.status, replay.output + replay.errors)
    }

    func remove() { try? FileManager.default.removeItem(at: folder) }
}
