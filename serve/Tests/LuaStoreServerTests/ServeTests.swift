import Foundation
import LuaStoreServer
import LuaStoreTestSupport
import RawHTTPClient
import Testing

/// `luastore serve` through the built binary: stores by key over HTTP and WebSockets, action ids answered once,
/// hibernation, tokens, limits, graceful shutdown and `kill -9`.
@Suite(.serialized) struct ServeTests { // (one server at a time: each is a process of its own)
    let counter = CLI.packageRoot.appendingPathComponent("samples/counter")

    /// Props that fail are said to fail: `GET …/props` answers 500 naming the failure (it answered the props from
    /// before the action, which the state no longer had, and `null` once the store resumed), until props succeed again.
    @Test func propsThatFailAreSaidToFail() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action) state.count = state.count + 1 end
            function app.props(state)
              if state.count == 2 then error("two is not shown") end
              if state.count == 4 then return { count = 0 / 0 } end
              return { count = state.count }
            end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let served = try await ServedApp(app: app, data: folder.appendingPathComponent("data"), ["--no-auth"])
        let watcher = try await served.live("/stores/k/live")
        #expect(try await watcher.read(1).first?["snapshot"] as? Bool == true)
        for _ in 0..<2 { #expect(try await served.request("POST", "/stores/k/actions", body: #"{"type":"tick"}"#).status == 200) }
        let failing = try await served.request("GET", "/stores/k/props")
        #expect(failing.status == 500, "\(failing.body)")
        #expect(failing.body.contains("the props of key k failed") && failing.body.contains("two is not shown"), "\(failing.body)")
        // A live client hears that they fail (numbered, as a change), and one that joins now is told so in its snapshot.
        let heard = try await watcher.read(2)
        #expect((heard[0]["props"] as? [String: Any])?["count"] as? Int == 1)
        #expect(heard[1]["seq"] as? Int == 2 && (heard[1]["error"] as? String)?.contains("the props of key k failed") == true
                && (heard[1]["error"] as? String)?.contains("two is not shown") == true && heard[1]["props"] == nil, "\(heard[1])")
        let joining = try await served.live("/stores/k/live")
        let snapshot = try #require(try await joining.read(1).first)
        #expect(snapshot["snapshot"] as? Bool == true && snapshot["seq"] as? Int == 2 && snapshot["props"] == nil
                && (snapshot["error"] as? String)?.contains("two is not shown") == true, "\(snapshot)")
        #expect(try await served.request("POST", "/stores/k/actions", body: #"{"type":"tick"}"#).status == 200)
        let shown = try await served.request("GET", "/stores/k/props")
        #expect(shown.status == 200, "\(shown.body)")
        #expect(try ServedApp.json(shown.body)["count"] as? Int == 3, "\(shown.body)")
        for client in [watcher, joining] { // (and both hear the props again)
            let again = try #require(try await client.read(1).first)
            #expect(again["seq"] as? Int == 3 && (again["props"] as? [String: Any])?["count"] as? Int == 3, "\(again)")
            client.close()
        }
        // Props JSON cannot hold (NaN) fail as props do: never a `null` answered 200.
        #expect(try await served.request("POST", "/stores/k/actions", body: #"{"type":"tick"}"#).status == 200)
        let nan = try await served.request("GET", "/stores/k/props")
        #expect(nan.status == 500 && nan.body.contains("the props of key k failed") && nan.body.contains("nan"), "\(nan.status) \(nan.body)")
        #expect(try await served.stop().status == 0)
    }

    @Test func actionsOverHTTPAreAnsweredOnceByTheirIdAndKeysAreApart() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--no-auth"])

        let first = try await served.request("POST", "/stores/room-1/actions", body: #"{"id":"a1","action":{"type":"increment"}}"#)
        #expect(first.status == 200)
        let answer = try ServedApp.json(first.body)
        #expect(answer["outcome"] as? String == "applied")
        #expect(answer["id"] as? String == "a1")
        #expect(answer["seq"] as? Int == 1)
        // Sent again (a client that did not hear the answer): answered, not applied again.
        let again = try ServedApp.json(try await served.request("POST", "/stores/room-1/actions",
                                                                body: #"{"id":"a1","action":{"type":"increment"}}"#).body)
        #expect(again["outcome"] as? String == "applied")
        #expect(again["repeated"] as? Bool == true)
        // Ids are their bytes: "café" with "é" and with "e" and a combining accent are two actions, both applied.
        for id in ["caf\u{E9}", "cafe\u{301}"] {
            let answered = try ServedApp.json(try await served.request("POST", "/stores/room-2/actions",
                                                                       body: #"{"id":"\#(id)","action":{"type":"increment"}}"#).body)
            #expect(answered["outcome"] as? String == "applied" && answered["repeated"] == nil, "\(id.unicodeScalars.count): \(answered)")
        }
        #expect(try ServedApp.json(try await served.request("GET", "/stores/room-2/props").body)["count"] as? Int == 2)
        // A bare action (no envelope) is an action without an id.
        #expect(try await served.request("POST", "/stores/room-1/actions", body: #"{"type":"increment","by":5}"#).status == 200)
        #expect(try ServedApp.json(try await served.request("GET", "/stores/room-1/props").body)["count"] as? Int == 6)
        #expect(try ServedApp.json(try await served.request("GET", "/stores/room-1/state").body)["count"] as? Int == 6)
        // Another key is another store, from init.
        #expect(try ServedApp.json(try await served.request("GET", "/stores/room-3/props").body)["count"] as? Int == 0)
        // The server's counts, in Prometheus' format: the repeated id is not an action applied again.
        let metrics = try await served.request("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        for line in [#"luastore_actions_total{outcome="applied"} 4"#, "luastore_live_stores 3", #"luastore_action_seconds_count 4"#] {
            #expect(metrics.body.contains(line), "\(line) in \(metrics.body)")
        }

        // Without tokens a browser's page could reach the server: by a name resolving to the loopback (DNS
        // rebinding), or from another origin (a form's text/plain POST, a script). Refused, changing nothing.
        let port = served.port
        let rebound = try RawHTTP.request("GET", "/stores/room-1/state", port: port, headers: ["Host": "evil.example"], token: "")
        #expect(rebound.status == 403 && rebound.body.contains("the Host 'evil.example' does not name this server"), "\(rebound.body)")
        let forged = try RawHTTP.request("POST", "/stores/room-1/actions", port: port,
                                         headers: ["Origin": "http://evil.example", "Content-Type": "text/plain"], body: #"{"type":"increment"}"#, token: "")
        #expect(forged.status == 403 && forged.body.contains("requests from the page at http") && forged.body.contains("evil.example are refused"), "\(forged.status) \(forged.body)")
        // (An origin hidden from the server — a sandboxed frame, a data: page — is no page of its own either.)
        let hidden = try RawHTTP.request("POST", "/stores/room-1/actions", port: port,
                                         headers: ["Origin": "null", "Content-Type": "text/plain"], body: #"{"type":"increment"}"#, token: "")
        #expect(hidden.status == 403 && hidden.body.contains("requests from the page at null are refused"), "\(hidden.status) \(hidden.body)")
        // A GET of the live address that does not ask for the upgrade is told so.
        let plain = try RawHTTP.request("GET", "/stores/room-1/live", port: port, headers: [:], token: "")
        #expect(plain.status == 426 && plain.body.contains("is a WebSocket"), "\(plain.status) \(plain.body)")
        let own = try RawHTTP.request("GET", "/stores/room-1/props", port: port, headers: ["Origin": "http://127.0.0.1:\(port)"], token: "")
        #expect(own.status == 200, "the server's own pages: \(own.body)")
        #expect(try ServedApp.json(try await served.request("GET", "/stores/room-1/props").body)["count"] as? Int == 6)

        let ended = try await served.stop()
        #expect(ended.status == 0, "\(ended.errors)")
        #expect(FileManager.default.fileExists(atPath: served.data.appendingPathComponent("room-1.db").path))
    }

    /// What one key's `luastore.save` keeps, another key's `load` does not read: each key's saves are in a folder
    /// of its own (`DATA/.data/KEY/`).
    @Test func aKeysSavesAreItsOwn() async throws {
        let app = try CLI.makeApp("""
            local luastore = require("luastore")
            local app = {}
            function app.init() return { loaded = "waiting" } end
            function app.reduce(state, action)
              if action.type == "save" then return nil, { luastore.save("secret", { v = action.v }) } end
              if action.type == "load" then return nil, { luastore.load("secret", "loaded") } end
              if action.type == "loaded" then state.loaded = action.value and action.value.v or "nothing" end
            end
            function app.props(state) return { loaded = state.loaded } end
            return app
            """)
        try Data(#"{"name": "saver", "version": "1.0.0", "luastore": "^1.0", "capabilities": {"storage": true}}"#.utf8)
            .write(to: app.appendingPathComponent("luastore.json"))
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder); try? FileManager.default.removeItem(at: app) }
        let served = try await ServedApp(app: app, data: folder.appendingPathComponent("data"), ["--no-auth"])
        #expect(try await served.request("POST", "/stores/a/actions", body: #"{"type":"save","v":"from a"}"#).status == 200)
        // (A save is an effect, run after its action is answered: the loads are sent once its file is written.)
        let saved = served.data.appendingPathComponent(".data/a/secret.json").path
        let deadline = ContinuousClock.now + .seconds(60)
        while !FileManager.default.fileExists(atPath: saved), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        for key in ["a", "b"] {
            #expect(try await served.request("POST", "/stores/\(key)/actions", body: #"{"type":"load"}"#).status == 200)
        }
        // (The loads' answers come back as actions of their own: wait for a's.)
        var loaded: [String: String] = [:]
        while ContinuousClock.now < deadline {
            for key in ["a", "b"] {
                loaded[key] = try ServedApp.json(try await served.request("GET", "/stores/\(key)/props").body)["loaded"] as? String
            }
            if loaded["a"] != "waiting" && loaded["b"] != "waiting" { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(loaded == ["a": "from a", "b": "nothing"], "b read a's save")
        #expect(FileManager.default.fileExists(atPath: served.data.appendingPathComponent(".data/a/secret.json").path))
        _ = try await served.stop()
    }

    @Test func badRequestsAreRefusedInWordsAndChangeNothing() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"),
                                         ["--no-auth", "--max-message-bytes", "256"])
        let cases: [(target: String, body: String, status: Int, words: String)] = [
            ("/stores/..%2F..%2Fetc/actions", #"{"type":"increment"}"#, 400, "a path has no '..' part"),
            ("/stores/.hidden/actions", #"{"type":"increment"}"#, 400, "a store key does not start with '.'"),
            ("/stores//actions", #"{"type":"increment"}"#, 400, "a store key has 1 to 128 characters: the path names none"),
            ("/stores/a%20b/actions", #"{"type":"increment"}"#, 400, "only letters, digits"),
            ("/stores/k/actions", #"{"type":"increment""#, 400, "not JSON"),
            ("/stores/k/actions", #"[1,2]"#, 400, "an action message is a JSON object"),
            ("/stores/k/actions", #"{"kind":"increment"}"#, 400, "or the action itself"),
            ("/stores/k/actions", #"{"id":"x","action":{"by":2}}"#, 400, "holds an action"),
            ("/stores/k/actions", #"{"id":7,"action":{"type":"increment"}}"#, 400, "id is a string"),
            ("/stores/k/actions", #"{"type":"increment","pad":""# + String(repeating: "x", count: 400) + #""}"#, 413, "at most 256 bytes"),
        ]
        for item in cases {
            let response = try await served.request("POST", item.target, body: item.body)
            #expect(response.status == item.status, "\(item.target) \(item.body.prefix(60)): \(response.body)")
            #expect(response.body.contains(item.words), "\(response.body)")
        }
        // A body that is not UTF-8 is no JSON: refused, not read with other bytes than the client sent.
        let notText = try await served.request("POST", "/stores/k/actions", bytes: Array(#"{"type":"increment","v":""#.utf8) + [0xFF] + Array(#""}"#.utf8))
        #expect(notText.status == 400 && notText.body.contains("not UTF-8"), "\(notText.status) \(notText.body)")
        // A method an address does not serve is said to be that, with the ones it does (405, Allow), not 404.
        for (method, target, allowed) in [("PUT", "/stores/k/state", "GET"), ("DELETE", "/stores/k/actions", "POST"), ("GET", "/stores/k/actions", "POST"),
                                          ("POST", "/health", "GET"), ("POST", "/metrics", "GET")] {
            let refused = try await served.request(method, target)
            #expect(refused.status == 405 && refused.headers["allow"] == allowed && refused.body.contains("it answers \(allowed)"),
                    "\(method) \(target): \(refused.status) \(refused.headers) \(refused.body)")
        }
        #expect(try await served.request("PUT", "/nowhere").status == 404)
        // A body said to be larger than the limit is refused at once, none of it waited for (the client sends none).
        let huge = try RawHTTP.request("POST", "/stores/k/actions", port: served.port, headers: ["Content-Length": "99999999999"], token: "")
        #expect(huge.status == 413 && huge.body.contains("at most 256 bytes"), "\(huge.status) \(huge.body)")
        // A reducer that fails: 422 with the script's words; the state is as it was.
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { n = 0 } end
            function app.reduce(state, action)
              state.n = state.n + 1
              if action.type == "boom" then error("boom at " .. state.n) end
            end
            function app.props(state) return { n = state.n } end
            return app
            """)
        let strict = try await ServedApp(app: app, data: folder.appendingPathComponent("strict"), ["--no-auth"])
        #expect(try await strict.request("GET", "/").status == 404) // (an app without a web folder serves no files)
        #expect(try await strict.request("POST", "/stores/k/actions", body: #"{"type":"ok"}"#).status == 200)
        let failed = try await strict.request("POST", "/stores/k/actions", body: #"{"id":"b","action":{"type":"boom"}}"#)
        #expect(failed.status == 422)
        let outcome = try ServedApp.json(failed.body)
        #expect(outcome["outcome"] as? String == "failed")
        #expect((outcome["error"] as? String)?.contains("app.lua:5: boom at 2") == true, "\(outcome)")
        #expect(try ServedApp.json(try await strict.request("GET", "/stores/k/props").body)["n"] as? Int == 1)
        #expect(try await served.request("GET", "/nowhere").status == 404)
        // Over a live connection: a message over the limit ends it (1009, saying why — one frame longer than the
        // limit is refused by NIO's decoder, which closed without a reason) and applies nothing; a `since` that is
        // not a number is refused (4400).
        let live = try await served.live("/stores/k/live")
        _ = try await live.read(1)
        try await live.send(#"{"id":"big","action":{"type":"increment","pad":""# + String(repeating: "x", count: 400) + #""}}"#)
        await live.expectClose(1009, saying: "a message has at most 256 bytes", otherwise: "a message over the limit was answered")
        live.close()
        let badSince = try await served.live("/stores/k/live?since=abc")
        await badSince.expectClose(4400, saying: "since is a sequence number", otherwise: "a since that is not a number was taken")
        badSince.close()
        #expect(try ServedApp.json(try await served.request("GET", "/stores/k/props").body)["count"] as? Int == 0)
        #expect(try await served.stop().status == 0)
        #expect(try await strict.stop().status == 0)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("etc.db").path))
    }

    @Test func liveClientsHearEveryChangeAndCatchUpSinceASequence() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--no-auth"])
        let live = try await served.live("/stores/doc/live")
        let snapshot = try #require(try await live.read(1).first)
        #expect(snapshot["snapshot"] as? Bool == true)
        #expect((snapshot["props"] as? [String: Any])?["count"] as? Int == 0)

        try await live.send(#"{"id":"w1","action":{"type":"increment"}}"#)
        let two = try await live.read(2) // the props change and the outcome, in either order
        let change = try #require(two.first { $0["props"] != nil })
        let answer = try #require(two.first { $0["outcome"] != nil })
        #expect((change["props"] as? [String: Any])?["count"] as? Int == 1)
        #expect(answer["id"] as? String == "w1")
        #expect(answer["outcome"] as? String == "applied")
        let seen = try #require(change["seq"] as? Int)

        // Changes made over HTTP reach the live client; a client reconnecting since what it saw gets each one.
        for _ in 0..<3 { _ = try await served.request("POST", "/stores/doc/actions", body: #"{"type":"increment"}"#) }
        let pushed = try await live.read(3)
        #expect(pushed.compactMap { ($0["props"] as? [String: Any])?["count"] as? Int } == [2, 3, 4])
        let again = try await served.live("/stores/doc/live?since=\(seen)")
        let missed = try await again.read(3)
        #expect(missed.compactMap { ($0["props"] as? [String: Any])?["count"] as? Int } == [2, 3, 4])
        #expect(missed.allSatisfy { $0["snapshot"] == nil })

        // A refused message is answered and the connection stays.
        try await live.send(#"{"id":"w2","action":{"kind":"increment"}}"#)
        let refused = try #require(try await live.read(1).first)
        #expect(refused["outcome"] as? String == "refused")
        #expect((refused["error"] as? String)?.contains("holds an action") == true)
        live.close()
        // Shutting down, the server closes the connections still open (1000, or 1001 "going away").
        async let ended = served.stop()
        await again.expectClose(1000, 1001, otherwise: "a live client was not told the server went away")
        again.close()
        #expect(try await ended.status == 0)
    }

    /// A live client need not wait for one answer before sending the next: up to 16 of its actions are in flight,
    /// reduced in the order they came and answered in that order — refusals, failures and repeated ids among them.
    @Test func actionsInFlightOnOneConnectionKeepTheirOrder() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { seen = {} } end
            function app.reduce(state, action)
              if action.type == "note" then state.seen[#state.seen + 1] = action.n end
              if action.type == "boom" then error("boom " .. action.n) end
            end
            function app.props(state) return { count = #state.seen, last = state.seen[#state.seen] } end
            return app
            """)
        let folder = try ServedApp.temporaryFolder()
        defer {
            try? FileManager.default.removeItem(at: folder)
            try? FileManager.default.removeItem(at: app)
        }
        let served = try await ServedApp(app: app, data: folder.appendingPathComponent("data"), ["--no-auth"])
        let live = try await served.live("/stores/list/live")
        _ = try await live.read(1) // (the snapshot)
        var sent: [String] = []
        for n in 1...60 {
            let message: String
            switch n {
            case 20: message = #"{"id":"m20","action":{"type":"boom","n":20}}"#
            case 30: message = #"{"id":"m30","action":{"kind":"note"}}"#
            case 40: message = #"{"id":"m5","action":{"type":"note","n":40}}"# // (an id already used: answered, not applied)
            default: message = #"{"id":"m\#(n)","action":{"type":"note","n":\#(n)}}"#
            }
            sent.append(n == 40 ? "m5" : "m\(n)")
            try await live.send(message)
        }
        var answers: [[String: Any]] = []
        let deadline = ContinuousClock.now + .seconds(60)
        while answers.count < sent.count, ContinuousClock.now < deadline {
            for message in try await live.read(1) where message["outcome"] != nil { answers.append(message) }
        }
        #expect(answers.compactMap { $0["id"] as? String } == sent)
        #expect(answers[19]["outcome"] as? String == "failed" && (answers[19]["error"] as? String)?.contains("boom 20") == true)
        #expect(answers[29]["outcome"] as? String == "refused")
        #expect(answers[39]["repeated"] as? Bool == true)
        let applied = answers.filter { $0["outcome"] as? String == "applied" && $0["repeated"] == nil }
        #expect(applied.count == 57)
        // Reduced in the order sent: the journal's sequence grows from each answer to the next.
        let sequences = applied.compactMap { $0["seq"] as? Int }
        #expect(sequences.count == 57 && zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "\(sequences)")
        let props = try ServedApp.json(try await served.request("GET", "/stores/list/props").body)
        #expect(props["count"] as? Int == 57 && props["last"] as? Int == 60, "\(props)")
        live.close()
        #expect(try await served.stop().status == 0)
    }

    /// A client that sends at once, before it read anything — while the server is still opening the key's store —
    /// and sends some messages in fragments with a ping between them: every action is reduced in the order sent,
    /// the ping is answered, and a binary frame closes the connection (1003) with nothing else changed.
    @Test func actionsSentBeforeTheSnapshotAndInFragmentsKeepTheirOrder() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--no-auth"])
        let live = try await served.live("/stores/fresh/live")
        let count = 40
        try await offPool {
            for n in 1...count {
                let message = #"{"id":"f\#(n)","action":{"type":"increment"}}"#
                if n % 7 == 0 {
                    try live.sendText(message, inPieces: 3, between: live.ping("p\(n)"))
                } else {
                    try live.sendText(message)
                }
            }
        }
        var outcomes: [[String: Any]] = [], counts: [Int] = []
        let deadline = ContinuousClock.now + .seconds(60)
        while outcomes.count < count, ContinuousClock.now < deadline {
            for message in try await live.read(1) {
                if message["outcome"] != nil { outcomes.append(message) }
                if let props = message["props"] as? [String: Any], let seen = props["count"] as? Int { counts.append(seen) }
            }
        }
        #expect(outcomes.compactMap { $0["id"] as? String } == (1...count).map { "f\($0)" })
        #expect(outcomes.allSatisfy { $0["outcome"] as? String == "applied" }, "\(outcomes.filter { $0["outcome"] as? String != "applied" })")
        let sequences = outcomes.compactMap { $0["seq"] as? Int }
        #expect(sequences.count == count && zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "\(sequences)")
        #expect(counts.last == count && zip(counts, counts.dropFirst()).allSatisfy { $0 < $1 }, "\(counts)")
        #expect(Set(live.pongs) == Set(stride(from: 7, through: count, by: 7).map { "p\($0)" }), "\(live.pongs)")

        try await offPool { try live.send(opcode: 0x2, Array(#"{"type":"increment"}"#.utf8)) }
        await live.expectClose(1003, otherwise: "a binary frame did not close the connection")
        live.close()
        let props = try ServedApp.json(try await served.request("GET", "/stores/fresh/props").body)
        #expect(props["count"] as? Int == count, "\(props)")
        #expect(try await served.stop().status == 0)
    }

    @Test func idleStoresHibernateAndResumeWithTheirStateAndAnsweredIds() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let data = folder.appendingPathComponent("data")
        let served = try await ServedApp(app: counter, data: data, ["--no-auth", "--idle-seconds", "0.2"])
        let body = #"{"id":"h1","action":{"type":"increment","by":3}}"#
        #expect(try await served.request("POST", "/stores/sleepy/actions", body: body).status == 200)
        // Hibernated: the store's file let go (SQLite removes its log when the last connection closes).
        let wal = data.appendingPathComponent("sleepy.db-wal").path
        #expect(await eventually(timeout: .seconds(30)) { !FileManager.default.fileExists(atPath: wal) })
        let resent = try ServedApp.json(try await served.request("POST", "/stores/sleepy/actions", body: body).body)
        #expect(resent["repeated"] as? Bool == true)
        #expect(try ServedApp.json(try await served.request("GET", "/stores/sleepy/props").body)["count"] as? Int == 3)
        #expect(try await served.stop().status == 0)
    }

    /// A key whose reducer draws ids with `math.random`, hibernated between its actions: it resumes drawing where it
    /// left off, so every item stays (it drew the same ids again after each resume, overwriting the items keyed by
    /// them), and its items are those a key that never slept has.
    @Test func aHibernatedKeyDrawsOnWhereItLeftMathRandom() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let app = try ServedApp.randomIdsApp()
        defer { try? FileManager.default.removeItem(at: app) }
        let data = folder.appendingPathComponent("data")
        let served = try await ServedApp(app: app, data: data, ["--no-auth", "--idle-seconds", "0.2"])
        let awake = try await ServedApp(app: app, data: folder.appendingPathComponent("awake"), ["--no-auth"])
        for n in 1...6 {
            #expect(try await served.request("POST", "/stores/k/actions", body: #"{"type":"add","n":\#(n)}"#).status == 200)
            #expect(try await awake.request("POST", "/stores/k/actions", body: #"{"type":"add","n":\#(n)}"#).status == 200)
            if n % 2 == 0 { // (hibernated: the key's file let go — SQLite removes its log when the last connection closes)
                let wal = data.appendingPathComponent("k.db-wal").path
                #expect(await eventually(timeout: .seconds(30)) { !FileManager.default.fileExists(atPath: wal) })
            }
        }
        #expect(try ServedApp.json(try await served.request("GET", "/stores/k/props").body)["count"] as? Int == 6)
        let slept = try await served.request("GET", "/stores/k/state").body
        #expect(slept == (try await awake.request("GET", "/stores/k/state").body), "the same ids as a key that never slept")
        #expect(try await served.stop().status == 0)
        #expect(try await awake.stop().status == 0)
    }

    /// At most `--max-live-stores` stores are live: a new key takes the place of the one used longest ago that nothing
    /// uses (hibernated, its state kept); while every live store is in use (a live client holds it), a new key is
    /// refused for now — 503 with Retry-After, a WebSocket closed 1013 — and nothing else changes.
    @Test func liveStoresAreBoundedAndTheOneUsedLongestAgoHibernates() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"),
                                         ["--no-auth", "--idle-seconds", "600", "--max-live-stores", "2"])
        @Sendable func live() async throws -> Int? {
            let metrics = try await served.request("GET", "/metrics").body
            return metrics.split(separator: "\n").first { $0.hasPrefix("luastore_live_stores ") }.flatMap { Double($0.split(separator: " ")[1]) }
                .map { Int($0) }
        }
        for key in ["a", "b", "c"] {
            #expect(try await served.request("POST", "/stores/\(key)/actions", body: #"{"type":"increment","by":2}"#).status == 200)
        }
        // "a", used longest ago, made room for "c" (once its store is closed, two are live).
        let two = await eventually(timeout: .seconds(30)) { (try? await live()) == 2 }
        let liveNow = try? await live()
        #expect(two, "two live stores: \(String(describing: liveNow))")
        #expect(try ServedApp.json(try await served.request("GET", "/stores/a/props").body)["count"] as? Int == 2, "a resumed its state")
        // Both live stores held by a client each: a third key waits for neither, it is refused for now.
        let first = try await served.live("/stores/a/live"), second = try await served.live("/stores/c/live")
        defer { first.close(); second.close() }
        _ = try await first.read(1)
        _ = try await second.read(1)
        let refused = try await served.request("POST", "/stores/d/actions", body: #"{"type":"increment"}"#)
        #expect(refused.status == 503, "\(refused.status) \(refused.body)")
        #expect(refused.body.contains("the server holds its most live stores (2, --max-live-stores)"), "\(refused.body)")
        #expect(refused.headers["retry-after"] == "1", "\(refused.headers)")
        let socket = try await served.live("/stores/d/live")
        await socket.expectClose(1013, saying: "try again later", otherwise: "a live client of a key with no room got a message")
        socket.close()
        #expect(try await served.request("GET", "/metrics").body.contains("luastore_keys_refused_total 2"))
        // A client gone, its store makes room again.
        first.close()
        #expect(await eventually(timeout: .seconds(30)) {
            (try? await served.request("POST", "/stores/d/actions", body: #"{"type":"increment"}"#).status) == 200
        })
        // (The second client still holds its socket and reads nothing: SIGTERM closes it all the same, once the
        // close it was sent went unanswered for the close timeout.)
        #expect(try await served.stop().status == 0)
    }

    @Test func tokensGrantKeysAndRightsAndNothingElse() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let secret = folder.appendingPathComponent("secret").path
        #expect(try await CLI.run(["token", "secret", secret]).status == 0)
        let again = try await CLI.run(["token", "secret", secret])
        #expect(again.status == 2 && again.errors.contains("never overwritten"))
        let reader = try await CLI.run(["token", "issue", "--secret", secret, "--subject", "ann", "--key", "doc-*", "--rights", "read"])
        let writer = try await CLI.run(["token", "issue", "--secret", secret, "--subject", "bo", "--key", "doc-1", "--rights", "read,dispatch"])
        let readToken = reader.output.trimmingCharacters(in: .whitespacesAndNewlines)
        let writeToken = writer.output.trimmingCharacters(in: .whitespacesAndNewlines)
        // A token that could let nobody in is a mistake, refused in words as it is asked for.
        for (arguments, said) in [(["--key", "a*b"], "--key \"a*b\" is a key, a key's prefix ending in *, or * alone"),
                                  (["--key", "**"], "--key \"**\" is a key"), (["--key", "../x"], "--key \"../x\" is a key"),
                                  (["--key", ""], "--key \"\" is a key"), (["--key", "a", "--rights", ""], "--rights grants nothing"),
                                  (["--key", "a", "--subject", ""], "--subject names who the token is for"),
                                  (["--key", "a", "--expires-in", "0"], "--expires-in is a number of seconds, at least 1")] {
            let refused = try await CLI.run(["token", "issue", "--secret", secret, "--subject", "x"] + arguments)
            #expect(refused.status != 0 && refused.errors.contains(said) && refused.output.isEmpty, "\(arguments): \(refused.errors)")
        }
        let authority = try TokenAuthority(secretFile: secret)
        let expired = authority.issue(AccessGrant(subject: "old", keys: ["*"], rights: [.read, .dispatch], expires: 1))
        let foreign = try TokenAuthority(secret: Data(repeating: 7, count: 32))
            .issue(AccessGrant(subject: "x", keys: ["*"], rights: [.read, .dispatch]))

        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--token-secret", secret])
        let action = #"{"type":"increment"}"#
        #expect(try await served.request("POST", "/stores/doc-1/actions", body: action).status == 401)
        #expect(try await served.request("POST", "/stores/doc-1/actions", body: action, token: writeToken).status == 200)
        #expect(try await served.request("POST", "/stores/doc-1/actions", body: action, token: readToken).status == 403)
        #expect(try await served.request("POST", "/stores/doc-2/actions", body: action, token: writeToken).status == 403)
        // A key without a store is not given one by a token that may only read it: nothing is made.
        for path in ["/stores/doc-2/props", "/stores/doc-2/state"] {
            let none = try await served.request("GET", path, token: readToken)
            #expect(none.status == 404 && none.body.contains("key doc-2 has no store yet"), "\(path): \(none.status) \(none.body)")
        }
        let noStore = try await served.live("/stores/doc-2/live", token: readToken)
        await noStore.expectClose(4404, saying: "has no store yet", otherwise: "a read-only client made key doc-2's store")
        noStore.close()
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("data/doc-2.db").path))
        #expect(try await served.request("GET", "/stores/doc-1/props", token: readToken).status == 200, "a key with a store is read")
        #expect(try await served.request("GET", "/stores/other/props", token: readToken).status == 403)
        let old = try await served.request("GET", "/stores/doc-1/props", token: expired)
        #expect(old.status == 401 && old.body.contains("expired"))
        let forged = try await served.request("GET", "/stores/doc-1/props", token: foreign)
        #expect(forged.status == 401 && forged.body.contains("signature"))
        // Widening a token's keys breaks its signature.
        let parts = writeToken.split(separator: ".")
        let widened = "\(parts[0]).\(parts[1].dropLast(2))xx.\(parts[2])"
        #expect(try await served.request("GET", "/stores/doc-1/props", token: widened).status == 401)
        #expect(try ServedApp.json(try await served.request("GET", "/stores/doc-1/props", token: readToken).body)["count"] as? Int == 1)
        // The scheme's name in any case (RFC 9110); the live address asked for without the upgrade: 401, then 426.
        let port = served.port
        let lower = try RawHTTP.request("GET", "/stores/doc-1/props", port: port, headers: ["Authorization": "bearer \(readToken)"], token: "")
        #expect(lower.status == 200, "\(lower.status) \(lower.body)")
        #expect(try await served.request("GET", "/stores/doc-1/live").status == 401)
        #expect(try await served.request("GET", "/stores/other/live", token: readToken).status == 403)
        #expect(try await served.request("GET", "/stores/doc-1/live", token: readToken).status == 426)
        // The whole server's counts need a token that reads every key.
        #expect(try await served.request("GET", "/metrics").status == 401)
        #expect(try await served.request("GET", "/metrics", token: readToken).status == 403)

        // A WebSocket without a token is closed with 4401, with one that may not dispatch answered "refused".
        let anonymous = try await served.live("/stores/doc-1/live")
        await anonymous.expectClose(4401, otherwise: "a live connection without a token was served")
        anonymous.close()
        let watcher = try await served.live("/stores/doc-1/live", token: readToken)
        _ = try await watcher.read(1)
        try await watcher.send(#"{"id":"r","action":{"type":"increment"}}"#)
        let refused = try #require(try await watcher.read(1).first)
        #expect(refused["outcome"] as? String == "refused")
        #expect((refused["error"] as? String)?.contains("does not grant dispatch") == true)
        watcher.close()
        #expect(try await served.stop().status == 0)
    }

    /// `serve --devtools`: a key's devtools open for a token granting `devtools` on that key — and for no other: the
    /// answer is a redirect to their page, whose own token the devtools check as they always do; the page shows the
    /// key's actions and dispatches to its store; when the store hibernates its devtools stop.
    @Test func aKeysDevtoolsOpenOnlyForATokenGrantingThem() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let secret = folder.appendingPathComponent("secret").path
        #expect(try await CLI.run(["token", "secret", secret]).status == 0)
        func token(_ key: String, _ rights: String) async throws -> String {
            try await CLI.run(["token", "issue", "--secret", secret, "--subject", "dev", "--key", key, "--rights", rights])
                .output.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let writer = try await token("room-*", "read,dispatch"), developer = try await token("room-1", "devtools")
        let off = try await ServedApp(app: counter, data: folder.appendingPathComponent("off"), ["--token-secret", secret])
        let notServed = try await off.request("GET", "/stores/room-1/devtools", token: developer)
        #expect(notServed.status == 404 && notServed.body.contains("serve with --devtools"), "\(notServed.body)")
        #expect(try await off.stop().status == 0)

        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"),
                                         ["--token-secret", secret, "--devtools", "--idle-seconds", "1"])
        for _ in 0..<3 { #expect(try await served.request("POST", "/stores/room-1/actions", body: #"{"type":"increment"}"#, token: writer).status == 200) }
        #expect(try await served.request("GET", "/stores/room-1/devtools").status == 401)
        let withoutRight = try await served.request("GET", "/stores/room-1/devtools", token: writer)
        #expect(withoutRight.status == 403 && withoutRight.body.contains("does not grant devtools"), "\(withoutRight.body)")
        #expect(try await served.request("GET", "/stores/room-2/devtools", token: developer).status == 403)
        let opened = try await served.request("GET", "/stores/room-1/devtools", token: developer)
        #expect(opened.status == 303, "\(opened.body)")
        let location = try #require(opened.headers["location"])
        #expect(try ServedApp.json(opened.body)["devtools"] as? String == location)
        let match = try #require(location.firstMatch(of: #/^http://127\.0\.0\.1:(\d+)/\?token=([0-9a-f]+)$/#), "\(location)")
        let (port, pageToken) = (try #require(UInt16(match.output.1)), String(match.output.2))
        // The devtools' own admission: without their token, nothing; with it, the key's session.
        #expect(try await offPool { try RawHTTP.request("GET", "/api/session", port: port, token: "") }.status == 401)
        let session = try ServedApp.json(try await offPool { try RawHTTP.request("GET", "/api/session", port: port, token: pageToken) }.body)
        #expect(session["app"] as? String == "room-1" && session["count"] as? Int == 3, "\(session)")
        // Asked for again: the same page.
        #expect(try await served.request("GET", "/stores/room-1/devtools", token: developer).headers["location"] == location)
        // Dispatch from the devtools (once unlocked) reaches the key's store and its journal.
        #expect(try await offPool { try RawHTTP.request("POST", "/api/unlock", port: port, token: pageToken) }.status == 200)
        let dispatched = try await offPool {
            try RawHTTP.request("POST", "/api/dispatch", port: port, body: #"{"type":"increment","by":10}"#, token: pageToken)
        }
        #expect(dispatched.status == 200, "\(dispatched.body)")
        #expect(await eventually(timeout: .seconds(30)) {
            (try? ServedApp.json(try await served.request("GET", "/stores/room-1/props", token: writer).body)["count"] as? Int) == 13
        })
        // Idle, the store hibernates and its devtools stop.
        #expect(await eventually(timeout: .seconds(30)) {
            (try? await offPool { try RawHTTP.request("GET", "/api/session", port: port, token: pageToken) }) == nil
        })
        #expect(try await served.stop().status == 0)
    }

    @Test func serveSaysHowClientsAreLetIn() async throws {
        let missing = try await CLI.run(["serve", counter.path, "--data", "/tmp/unused"])
        #expect(missing.status == 2 && missing.errors.contains("--token-secret FILE (bearer tokens), or --no-auth"))
        let open = try await CLI.run(["serve", counter.path, "--data", "/tmp/unused", "--no-auth", "--listen", "0.0.0.0:0"])
        #expect(open.status == 2 && open.errors.contains("loopback"))
        let port = try await CLI.run(["serve", counter.path, "--data", "/tmp/unused", "--no-auth", "--listen", "127.0.0.1:99999"])
        #expect(port.status == 2 && port.errors.contains("HOST:PORT"))
    }

    /// A request head too large for the parser is answered 431 in words, and the connection ends; a connection that
    /// does not send a whole first head within `--request-head-seconds` — nothing at all, or a head that never
    /// ends — is closed (neither was answered nor closed: a client could hold sockets open for ever); the server
    /// goes on serving.
    @Test func requestHeadsThatNeverEndOrDoNotFitAreEnded() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--no-auth", "--request-head-seconds", "1"])
        let port = served.port
        let large = try await ServedApp.exchange(port: port, "GET /health HTTP/1.1\r\nHost: x\r\nX-Large: " + String(repeating: "a", count: 100_000) + "\r\n\r\n")
        #expect(large.hasPrefix("HTTP/1.1 431") && large.contains("too large"), "\(large.prefix(200))")
        // The same for a later request of a connection, once the answer before it came: refused in words.
        for (after, said) in [("X-Large: " + String(repeating: "a", count: 100_000) + "\r\n\r\n", "HTTP/1.1 431"),
                              ("NOT HTTP AT ALL\r\n\r\n", "HTTP/1.1 400")] {
            let answered = try await ServedApp.exchange(port: port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", waitingFor: #"{"ok":true}"#,
                                                        then: after.hasPrefix("X-") ? "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + after : after)
            #expect(answered.hasPrefix("HTTP/1.1 200") && answered.contains(said) && answered.contains(#"{"error":{"message":"the request"#),
                    "\(answered.prefix(400))")
        }
        // A head that never ends, at the start or after an answer, is ended at the head timeout.
        for start in ["", "GET /health HTTP/1.1\r\nHost: x\r\n", "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /hea"] {
            let (ended, seconds) = try await offPool { () throws -> (String, Double) in
                let socket = try RawSocket(port: port)
                defer { socket.close() }
                let started = ContinuousClock.now
                if !start.isEmpty { try socket.write(start) }
                do {
                    while true { _ = try socket.readSome() }
                } catch {
                    return ("\(error)", Double((ContinuousClock.now - started) / .milliseconds(1)) / 1_000)
                }
            }
            #expect(ended.contains("the connection ended") && seconds < 30, "\(start.debugDescription): \(ended) after \(seconds) s")
        }
        #expect(try await served.request("GET", "/health").status == 200)
        #expect(try await served.stop().status == 0)
    }

    /// A WebSocket handshake the upgrade cannot take is answered as RFC 6455 (4.2.2) has it, in words: a version other
    /// than 13 (or none) 426 with `Sec-WebSocket-Version: 13`, a `Sec-WebSocket-Key` missing, repeated or not 16
    /// bytes in base64 400 (the build before closed the first two without a word and upgraded the last). So is one the
    /// server's rules refuse, as they refuse any request (the upgrade answered those with an empty 400): without tokens
    /// a page of another origin or a name that is not the server's 403, a `..` or an empty key 400, and an address
    /// that is not a live connection 404. The connection ends, nothing after the head is read as a request, and a
    /// right handshake still opens.
    @Test func webSocketHandshakesThatCannotGoOnAreAnsweredInWords() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--no-auth"])
        let port = served.port
        let key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="
        let version = "Sec-WebSocket-Version: 13"
        let cases: [(path: String, headers: [String], status: String, said: String)] = [
            ("/stores/k/live", ["Sec-WebSocket-Version: 12", key], "HTTP/1.1 426", #"asks for \"12\""#),
            ("/stores/k/live", [key], "HTTP/1.1 426", "names no version"),
            ("/stores/k/live", [version, version, key], "HTTP/1.1 426", "asks for"),
            ("/stores/k/live", [version], "HTTP/1.1 400", "the request gives none"),
            ("/stores/k/live", [version, "Sec-WebSocket-Key: short"], "HTTP/1.1 400", #"gives \"short\""#),
            ("/stores/k/live", [version, "Sec-WebSocket-Key: c2hvcnQ="], "HTTP/1.1 400", "16 bytes in base64"),
            ("/stores/k/live", [version, key, key], "HTTP/1.1 400", "gives 2 of them"),
            ("/stores/k/live", [version, key, "Origin: http://evil.example"], "HTTP/1.1 403", "the page at http://evil.example are refused"),
            ("/stores/k/live", [version, key, "Origin: null"], "HTTP/1.1 403", "the page at null are refused"),
            ("/stores/k/live", [version, key, "Host: evil.example"], "HTTP/1.1 403", "the Host 'evil.example' does not name this server"),
            ("/stores/%2e%2e/live", [version, key], "HTTP/1.1 400", "a path has no '..' part"),
            ("/stores//live", [version, key], "HTTP/1.1 400", "the path names none"),
            ("/health", [version, key], "HTTP/1.1 404", "/health is not a WebSocket"),
        ]
        for (path, headers, status, said) in cases {
            // (A second request right behind it: not read, not answered.)
            let host = headers.contains { $0.hasPrefix("Host:") } ? "" : "Host: 127.0.0.1\r\n"
            let answered = try await ServedApp.exchange(port: port, "GET \(path) HTTP/1.1\r\n\(host)Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                                        + headers.map { $0 + "\r\n" }.joined() + "\r\nGET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(answered.hasPrefix(status) && answered.contains(said) && answered.contains(#"{"error":{"message":"#)
                    && !answered.contains(#"{"ok":true}"#), "\(path) \(headers): \(answered.prefix(400))")
            #expect(status != "HTTP/1.1 426" || answered.contains("Sec-WebSocket-Version: 13\r\n"), "\(path) \(headers): \(answered.prefix(400))")
        }
        let opened = try await offPool { () throws -> String in
            let socket = try RawSocket(port: port)
            defer { socket.close() }
            try socket.write("GET /stores/k/live?since=0 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             + "Origin: http://127.0.0.1:\(port)\r\n\(version)\r\n\(key)\r\n\r\n")
            var received: [UInt8] = []
            while !String(decoding: received, as: UTF8.self).contains("\r\n\r\n") { received += try socket.readSome() }
            return String(decoding: received, as: UTF8.self)
        }
        #expect(opened.hasPrefix("HTTP/1.1 101") && opened.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "\(opened.prefix(300))")
        #expect(try await served.request("GET", "/health").status == 200)
        let stopped = try await served.stop()
        #expect(stopped.status == 0)
        // A handshake refused in words is no error of the server's: nothing is logged as one (each was, by
        // Hummingbird's upgrade, which failed as the connection ended).
        #expect(!stopped.errors.contains(" error ") && !stopped.errors.contains("upgrade"), "\(stopped.errors.prefix(600))")
    }

    /// A frame the client did not mask fails the connection (RFC 6455, 5.1) — a close with 1002 saying why, nothing of
    /// it applied — whether it came in the same packet as the upgrade's request (read before the live handler was in
    /// place: the build before applied such an action and answered it) or later, data or control (a ping); a masked
    /// action on another connection is applied.
    @Test func framesAClientDidNotMaskFailTheConnection() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--no-auth"])
        let port = served.port
        let upgrade = "GET /stores/k/live HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        /// A frame of `text` (a text frame, or a ping: opcode 9), masked with `key` or not.
        func frame(_ text: String, opcode: UInt8 = 1, key: [UInt8]?) -> [UInt8] {
            let payload = Array(text.utf8)
            precondition(payload.count < 126)
            var bytes: [UInt8] = [0x80 | opcode, (key == nil ? 0 : 0x80) | UInt8(payload.count)]
            guard let key else { return bytes + payload }
            bytes += key
            return bytes + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
        }
        let action = #"{"id":"a1","action":{"type":"increment"}}"#
        let failClose: [UInt8] = [0x88, UInt8(2 + "a client's frames are masked (RFC 6455, 5.1)".utf8.count), 0x03, 0xEA]
        for (first, later) in [(frame(action, key: nil), [UInt8]()), ([], frame("hi", opcode: 9, key: nil)), ([], frame(action, key: nil))] {
            // (A later frame once the snapshot came: the live handler is in place.)
            let received = try await ServedApp.exchange(port: port, Array(upgrade.utf8) + first,
                                                        waitingFor: later.isEmpty ? nil : #""snapshot":true"#, then: later)
            let text = String(decoding: received, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 101") && received.indices.contains { received[$0...].starts(with: failClose) }
                    && text.hasSuffix("a client's frames are masked (RFC 6455, 5.1)") && !text.contains(#""outcome""#), "\(text)")
        }
        let live = try await served.live("/stores/k/live")
        _ = try await live.read(1)
        try await live.send(#"{"id":"a2","action":{"type":"increment"}}"#)
        #expect(try await live.read(2).contains { $0["outcome"] as? String == "applied" })
        live.close()
        #expect(try ServedApp.json(try await served.request("GET", "/stores/k/props").body)["count"] as? Int == 1)
        #expect(try await served.stop().status == 0)
    }

    /// SIGTERM while clients hold a first request head half sent, or nothing sent at all: they are closed, every store
    /// is closed and the server exits 0 within its grace (it died of a cancellation that outlasted it: SIGILL).
    @Test func sigtermEndsConnectionsThatHaveNotSentAWholeHead() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--no-auth"])
        #expect(try await served.request("POST", "/stores/a/actions", body: #"{"type":"increment"}"#).status == 200)
        let port = served.port
        let half = try await offPool { try RawSocket(port: port) }, silent = try await offPool { try RawSocket(port: port) }
        defer { half.close(); silent.close() }
        try half.write("GET /hea")
        try await Task.sleep(for: .milliseconds(200)) // (the server has read the half head)
        let started = ContinuousClock.now
        let stopped = try await served.stop()
        #expect(stopped.status == 0, "\(stopped.errors)")
        #expect(stopped.errors.contains("every store was closed"), "\(stopped.errors)")
        #expect(ContinuousClock.now - started < .seconds(30))
    }

    /// An app's `web` folder is its clients' page: served at `/` without a token, and nothing outside it — not the
    /// app's scripts beside it, whatever the path's spelling; `--web` names another folder, and must name one.
    @Test func theAppsWebFolderIsServedAndNothingOutsideIt() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let secret = folder.appendingPathComponent("secret").path
        #expect(try await CLI.run(["token", "secret", secret]).status == 0)
        let served = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--token-secret", secret])
        let page = try await served.request("GET", "/")
        #expect(page.status == 200)
        #expect(page.headers["content-type"]?.hasPrefix("text/html") == true, "\(page.headers)")
        #expect(page.body == (try String(contentsOf: counter.appendingPathComponent("web/index.html"), encoding: .utf8)))
        #expect(try await served.request("GET", "/index.html").body == page.body)
        for escape in ["/../app.lua", "/%2e%2e/app.lua", "/..%2fapp.lua", "/web/../app.lua", "/app.lua", "/nothing.js"] {
            let response = try await served.request("GET", escape)
            #expect([400, 404].contains(response.status), "\(escape): \(response.status)")
            #expect(!response.body.contains("app.reduce"), "\(escape) showed the app's script")
            if response.status == 400 { #expect(response.body.contains("a path has no '..' part"), "\(escape): \(response.body)") }
        }
        // A NUL byte, which the file system would cut the path at, is refused in words (`index.html%00.txt` served
        // `index.html`).
        for nul in ["/index.html%00.txt", "/index.html%00"] {
            let response = try await served.request("GET", nul)
            #expect(response.status == 400 && response.body.contains("NUL"), "\(nul): \(response.status) \(response.body)")
        }
        // The stores are still behind their tokens.
        #expect(try await served.request("GET", "/stores/room-1/props").status == 401)
        #expect(try await served.stop().status == 0)

        let pages = folder.appendingPathComponent("pages")
        try FileManager.default.createDirectory(at: pages, withIntermediateDirectories: true)
        try "<p>elsewhere</p>".write(to: pages.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        // Symbolic links inside the folder that lead out of it — to a folder, to a file — serve nothing; one that
        // stays inside does.
        try "not for clients".write(to: folder.appendingPathComponent("private.txt"), atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: pages.appendingPathComponent("up").path, withDestinationPath: folder.path)
        try FileManager.default.createSymbolicLink(atPath: pages.appendingPathComponent("private.txt").path,
                                                   withDestinationPath: folder.appendingPathComponent("private.txt").path)
        try FileManager.default.createSymbolicLink(atPath: pages.appendingPathComponent("home.html").path, withDestinationPath: "index.html")
        let other = try await ServedApp(app: counter, data: folder.appendingPathComponent("data"), ["--no-auth", "--web", pages.path])
        #expect(try await other.request("GET", "/").body == "<p>elsewhere</p>")
        #expect(try await other.request("GET", "/home.html").body == "<p>elsewhere</p>")
        for outside in ["/up/private.txt", "/private.txt", "/up/"] {
            let response = try await other.request("GET", outside)
            #expect(response.status == 404 && !response.body.contains("not for clients"), "\(outside): \(response.status) \(response.body)")
        }
        #expect(try await other.stop().status == 0)
        let none = try await CLI.run(["serve", counter.path, "--data", folder.appendingPathComponent("data").path, "--no-auth",
                                      "--web", folder.appendingPathComponent("absent").path])
        #expect(none.status == 2 && none.errors.contains("--web: ") && none.errors.contains("is not a folder"), "\(none.errors)")
    }

    /// `luastore serve|token` run the `luastore-serve` beside `luastore` (every test here goes through it): its help
    /// reads as `luastore`'s, and a usage error keeps its words and its status.
    @Test func luastoreRunsTheServerProgramBesideIt() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: CLI.buildFolder.appendingPathComponent("luastore-serve").path))
        let help = try await CLI.run(["serve", "--help"], extraEnvironment: ["PATH": "/usr/bin:/bin"])
        #expect(help.status == 0)
        #expect(help.output.contains("USAGE: luastore serve [<options>] <app> --data <folder>") && help.output.contains("--token-secret"), "\(help.output)")
        let tokenHelp = try await CLI.run(["token", "issue", "--help"])
        #expect(tokenHelp.status == 0 && tokenHelp.output.contains("USAGE: luastore token issue"), "\(tokenHelp.output)")
        let unknown = try await CLI.run(["serve", counter.path, "--data", "/tmp/unused", "--no-auth", "--bogus"])
        #expect(unknown.status == 2 && unknown.errors.contains("--bogus"), "\(unknown.errors)")
        // The root's own commands are not luastore-serve's.
        let run = try await CLI.run(["run", counter.path], input: #"{"type":"increment"}"# + "\n")
        #expect(run.status == 0 && run.output.contains("count: 1"), "\(run.output) \(run.errors)")
    }

    @Test func sigtermClosesEveryStoreAndKill9LosesNothingAcknowledgedWithFullSync() async throws {
        let folder = try ServedApp.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let data = folder.appendingPathComponent("data")
        let options = ["--no-auth", "--persist-sync", "full", "--persist-snapshot-every", "4"]
        let served = try await ServedApp(app: counter, data: data, options)
        var acknowledged = 0
        for index in 0..<20 {
            let response = try await served.request("POST", "/stores/k\(index % 3)/actions", body: #"{"id":"i\#(index)","action":{"type":"increment"}}"#)
            if response.status == 200 { acknowledged += 1 }
        }
        #expect(acknowledged == 20)
        #expect(try await served.stop(SIGKILL).status == SIGKILL)
        let restarted = try await ServedApp(app: counter, data: data, options)
        var total = 0
        for key in 0..<3 {
            total += try ServedApp.json(try await restarted.request("GET", "/stores/k\(key)/props").body)["count"] as? Int ?? -100
        }
        #expect(total == 20)
        // Every id is still known from the journal — those in entries after the last snapshot, and those the
        // snapshots carry — so resending any of them applies nothing.
        for index in 0..<20 {
            let resent = try ServedApp.json(try await restarted.request("POST", "/stores/k\(index % 3)/actions",
                                                                        body: #"{"id":"i\#(index)","action":{"type":"increment"}}"#).body)
            #expect(resent["repeated"] as? Bool == true, "i\(index): \(resent)")
            #expect(resent["seq"] as? Int != nil)
        }
        total = 0
        for key in 0..<3 {
            total += try ServedApp.json(try await restarted.request("GET", "/stores/k\(key)/props").body)["count"] as? Int ?? -100
        }
        #expect(total == 20)
        _ = try await restarted.request("POST", "/stores/k0/actions", body: #"{"type":"increment"}"#)
        // No client holds the shutdown open: one that sent half a body (and sends no more), one whose live
        // connection never answers the close — cut after the grace, the stores closed all the same.
        let halfBody = try RawSocket(port: restarted.port)
        try halfBody.write("POST /stores/k1/actions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"type\":")
        let deaf = try await restarted.live("/stores/k2/live")
        defer { halfBody.close(); deaf.close() }
        let signalled = ContinuousClock.now
        let ended = try await restarted.stop(SIGTERM)
        #expect(ended.status == 0, "\(ended.errors)")
        #expect(ContinuousClock.now - signalled < .seconds(30), "a client held the shutdown open for \(ContinuousClock.now - signalled)")
        // Closed: the file is a durable store `luastore run` resumes.
        let resumed = try await CLI.run(["run", counter.path, "--persist", data.appendingPathComponent("k0.db").path, "--format", "json"], input: "")
        #expect(resumed.output.contains(#""count":8"#), "\(resumed.output) \(resumed.errors)")
    }
}
