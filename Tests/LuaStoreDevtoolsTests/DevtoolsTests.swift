import Foundation
import Glibc
import LuaKit
@testable import LuaStoreDevtools
import LuaStorePersistence
import LuaStoreScripting
import LuaStoreTestSupport
import RawHTTPClient
import Testing

/// The devtools' API over real HTTP on 127.0.0.1 (requests written on a socket, so that Host and Origin are
/// exactly what a test says), a real WebSocket, a real scripted store.
@Suite struct DevtoolsTests {
    static let app = """
        local app = {}
        function app.init() return { count = 0, items = {}, name = "start" } end
        function app.reduce(state, action)
          if action.type == "add" then
            state.count = state.count + 1
            state.items[#state.items + 1] = { n = state.count }
          elseif action.type == "rename" then state.name = action.name
          elseif action.type == "boom" then error("boom at " .. state.count)
          end
        end
        function app.props(state) return { count = state.count, name = state.name } end
        return app
        """

    /// A store with the devtools on, and its server.
    struct Session {
        let store: ScriptedStore
        let server: DevtoolsServer
        let token: String

        func get(_ target: String, headers: [String: String] = [:], token: String? = nil) async throws -> RawHTTP.Response {
            let (port, token) = (server.port, token ?? self.token)
            return try await offPool { try RawHTTP.request("GET", target, port: port, headers: headers, token: token) }
        }

        func post(_ target: String, body: String = "", token: String? = nil) async throws -> RawHTTP.Response {
            let (port, token) = (server.port, token ?? self.token)
            return try await offPool { try RawHTTP.request("POST", target, port: port, body: body, token: token) }
        }

        func stop() async {
            await server.stop()
            store.shutdown()
        }
    }

    static func start(keep: Int = 1000, clientQueue: Int = 64, folder: URL? = nil, host: String = "127.0.0.1",
                      storeWait: Duration = .seconds(120), timeBudget: Duration? = nil,
                      persistence: (any StatePersistence)? = nil, connectionLimit: Int = 256, clock: StoreClock? = nil) async throws -> Session {
        let folder = try folder ?? CLI.makeApp(app)
        let journal = DevtoolsJournal(capacity: keep)
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        if let timeBudget { options.limits.timeBudget = timeBudget }
        options.journal = { journal.hear($0) }
        options.historyEntries = keep
        options.persistence = persistence
        if let clock { options.clock = clock }
        let store = try await ScriptedStore(app: folder, options: options)
        var settings = DevtoolsOptions()
        settings.app = "demo"
        settings.clientQueue = clientQueue
        settings.bodyLimit = 4096
        settings.host = host
        settings.storeWait = storeWait // (a loaded machine may take a while to hop to the store's thread)
        settings.connectionLimit = connectionLimit
        let server: DevtoolsServer
        do {
            server = try await DevtoolsServer.start(store: store, journal: journal, options: settings)
        } catch {
            store.shutdown()
            throw error
        }
        let token = String(server.url.split(separator: "=").last ?? "")
        #expect(server.url.hasPrefix("http://\(host):\(server.port)/?token="))
        #expect(token.count == 32)
        return Session(store: store, server: server, token: token)
    }

    /// Starts the built `luastore` with `arguments` (standard input empty) and returns it, serving, with what it
    /// wrote on standard error up to its `devtools:` line (or until it ended, or a minute passed).
    static func startServing(_ arguments: [String], output: FileHandle = .nullDevice, input: Any = FileHandle.nullDevice) async throws
        -> (process: Process, errors: String) {
        let process = Process()
        process.executableURL = CLI.binary
        process.environment = ProcessInfo.processInfo.environment.merging(CLI.environment) { $1 }
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        let reader = errors.fileHandleForReading
        let text = try await offPool { () -> String in
            var text = ""
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, !text.split(separator: "\n").contains(where: { $0.hasPrefix("devtools: ") }) {
                let data = reader.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            return text
        }
        return (process, text)
    }

    static func json(_ response: RawHTTP.Response) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any], "\(response.body)")
    }

    @Test func everyRequestNeedsTheTokenAndThisServersHostAndOrigin() async throws {
        let session = try await Self.start()
        defer { Task { await session.stop() } }
        #expect(try await session.get("/api/session").status == 200)
        #expect(try await session.get("/?token=\(session.token)", token: "").status == 200)
        let page = try await session.get("/?token=\(session.token)", token: "")
        #expect(page.body.contains("<title>LuaStore devtools</title>"))
        #expect(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)

        let missing = try await session.get("/api/session", token: "")
        #expect(missing.status == 401)
        #expect(missing.body.contains("a token is needed"))
        #expect(try await session.get("/api/session", token: String(repeating: "0", count: 32)).status == 401)
        #expect(try await session.get("/", token: "").status == 401) // the page too

        let rebound = try await session.get("/api/session", headers: ["Host": "attacker.example:\(session.server.port)"])
        #expect(rebound.status == 403)
        #expect(rebound.body.contains("does not name this server"))
        #expect(try await session.get("/api/session", headers: ["Host": "localhost:\(session.server.port)"]).status == 200)
        let foreign = try await session.get("/api/session", headers: ["Origin": "http://attacker.example"])
        #expect(foreign.status == 403)
        #expect(foreign.body.contains("http://attacker.example"))
        #expect(try await session.get("/api/session", headers: ["Origin": "http://127.0.0.1:\(session.server.port)"]).status == 200)
        #expect(try await session.get("/api/nothing").status == 404)
        let plain = try await session.get("/api/live")
        #expect(plain.status == 400)
        #expect(plain.body.lowercased().contains("websocket")) // (FlyingFox says what the handshake lacks)
    }

    /// A durable store's session and `/api/persistence` say its database's file, durability, size and last
    /// commit; a store without one says `null`.
    @Test func theDatabasesSizeAndLastCommitAreShown() async throws {
        let plain = try await Self.start()
        #expect(try Self.json(try await plain.get("/api/session"))["persistence"] is NSNull)
        #expect(try await plain.get("/api/persistence").body == "null")
        await plain.stop()

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("devtools-\(UUID().uuidString).db").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let database = try StoreDatabase(path: path, app: "demo")
        let session = try await Self.start(persistence: database)
        let opened = Date()
        for _ in 0..<3 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()
        try await offPool { try database.waitUntilCommitted(through: 3) }
        let status = try Self.json(try await session.get("/api/persistence"))
        #expect(status["path"] as? String == path)
        #expect(status["durability"] as? String == "batch")
        #expect(status["sequence"] as? Int == 3)
        let bytes = try #require(status["bytes"] as? Int)
        let onDisk = try [path, path + "-wal"].reduce(0) { total, file in
            total + ((try FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.intValue ?? 0)
        }
        #expect(bytes > 0 && bytes <= onDisk, "\(bytes) of \(onDisk)")
        let committed = try #require(status["committed"] as? Int)
        #expect(Double(committed) / 1000 >= opened.timeIntervalSince1970.rounded(.down) - 1)
        #expect(Double(committed) / 1000 <= Date().timeIntervalSince1970 + 1)
        #expect(status["failure"] is NSNull)
        let inSession = try #require(Self.json(try await session.get("/api/session"))["persistence"] as? [String: Any])
        #expect(inSession["sequence"] as? Int == 3)
        await session.stop()
        await session.store.barrier()
        #expect(database.close() == nil)
    }

    /// An app that mounts plugins: the session lists them (key, name, version), `/api/plugins` says what each
    /// has cost (calls, time, allocations, failures), and an entry's changes lie under their slices' keys.
    @Test func mountedPluginsAndTheirCostsAreShown() async throws {
        let plain = try await Self.start()
        #expect(try Self.json(try await plain.get("/api/session"))["plugins"] as? [Any] != nil)
        #expect(try await plain.get("/api/plugins").body == #"{"plugins":[]}"#)
        await plain.stop()

        let folder = try CLI.makeApp("""
            return { init = function() return { n = 0 } end, reduce = function(s, a) s.n = s.n + 1 end,
                     props = function(s) return { n = s.n, seen = s.counter.seen } end }
            """)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(#"{"name": "host", "version": "1.0.0", "luastore": "^1.0", "mounts": {"counter": "counter"}}"#.utf8)
            .write(to: folder.appendingPathComponent("luastore.json"))
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("counter"), withIntermediateDirectories: true)
        try Data(#"{"name": "tally", "version": "2.1.0", "luastore": "^1.0"}"#.utf8).write(to: folder.appendingPathComponent("counter/luastore.json"))
        try Data("""
            return { init = function() return { seen = 0 } end,
                     reduce = function(slice, action) if action.type == "boom" then error("no") end slice.seen = slice.seen + 1 end }
            """.utf8).write(to: folder.appendingPathComponent("counter/app.lua"))
        let session = try await Self.start(folder: folder)
        for type in ["add", "add", "boom"] { session.store.dispatch(["type": .string(type)]) }
        await session.store.barrier()
        let listed = try #require(Self.json(try await session.get("/api/session"))["plugins"] as? [[String: Any]])
        #expect(listed.count == 1)
        #expect(listed.first?["key"] as? String == "counter")
        #expect(listed.first?["name"] as? String == "tally")
        #expect(listed.first?["version"] as? String == "2.1.0")
        let costs = try #require(Self.json(try await session.get("/api/plugins"))["plugins"] as? [[String: Any]])
        #expect(costs.first?["key"] as? String == "counter")
        #expect(costs.first?["calls"] as? Int == 4, "init and three actions: \(costs)")
        #expect(costs.first?["failures"] as? Int == 1)
        #expect((costs.first?["nanoseconds"] as? Int ?? 0) > 0)
        #expect((costs.first?["allocations"] as? Int ?? 0) > 0)
        let entry = try Self.json(try await session.get("/api/entry?seq=1"))
        let changes = try #require((entry["line"] as? [String: Any])?["changes"] as? [[Any]])
        let paths = Set(changes.compactMap { ($0.first as? [Any])?.first as? String })
        #expect(paths == ["n", "counter"], "\(changes)")
        await session.stop()
    }

    @Test func theTimelineIsPagedAndFilteredOnTheServer() async throws {
        let session = try await Self.start()
        defer { Task { await session.stop() } }
        for _ in 0..<240 { session.store.dispatch(["type": "add"]) }
        session.store.dispatch(["type": "boom"])
        session.store.dispatch(["type": "rename", "name": "Zed"])
        await session.store.barrier()

        let page = try Self.json(try await session.get("/api/entries?offset=200&limit=100"))
        #expect(page["total"] as? Int == 242)
        let entries = try #require(page["entries"] as? [[String: Any]])
        #expect(entries.count == 42)
        #expect(entries.first?["seq"] as? Int == 201)
        #expect(entries.first?["type"] as? String == "add")
        #expect(entries.first?["changes"] as? Int == 2)

        let failed = try Self.json(try await session.get("/api/entries?failed=1"))
        #expect(failed["total"] as? Int == 1)
        let failure = try #require((failed["entries"] as? [[String: Any]])?.first?["failure"] as? [String: Any])
        #expect((failure["message"] as? String)?.contains("boom at 240") == true)
        #expect((failure["location"] as? String)?.contains("app.lua:8") == true)

        let renamed = try Self.json(try await session.get("/api/entries?path=%5B%22name%22%5D")) // ["name"]
        #expect(renamed["total"] as? Int == 1)
        let byText = try Self.json(try await session.get("/api/entries?text=zed"))
        #expect(byText["total"] as? Int == 1)
        let item = try Self.json(try await session.get("/api/entries?path=%5B%22items%22%2C7%5D")) // ["items",7]
        #expect(item["total"] as? Int == 1)
        #expect((item["entries"] as? [[String: Any]])?.first?["seq"] as? Int == 7)
        let byType = try Self.json(try await session.get("/api/entries?type=add&limit=0"))
        #expect(byType["total"] as? Int == 240)
        #expect(try await session.get("/api/entries?path=%5Bnope").status == 400)
        // The filter box's text, parsed by the server with LuaPath's rules: `items[7]`, `state.items.7`.
        for text in ["items%5B7%5D", "state.items.7", "state%5B%22items%22%5D%5B7%5D"] {
            let parsed = try Self.json(try await session.get("/api/entries?pathText=" + text))
            #expect(parsed["total"] as? Int == 1, "\(text)")
        }
        let unparsed = try await session.get("/api/entries?pathText=items%5B7")
        #expect(unparsed.status == 400)
        #expect(unparsed.body.contains("'items[7' is not a path"), "\(unparsed.body)")
    }

    /// The server keeps the newest `--devtools-keep` entries; a filter forgets matches that are no longer kept.
    @Test func theTimelineKeepsItsBoundAndFiltersForgetWhatWentOut() async throws {
        let session = try await Self.start(keep: 20)
        defer { Task { await session.stop() } }
        for _ in 0..<10 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()
        #expect(try Self.json(try await session.get("/api/entries?type=add&limit=0"))["total"] as? Int == 10)
        for index in 0..<30 { session.store.dispatch(["type": "rename", "name": .string("n\(index)")]) }
        await session.store.barrier()
        let page = try Self.json(try await session.get("/api/entries?limit=100"))
        #expect(page["total"] as? Int == 20)
        #expect((page["entries"] as? [[String: Any]])?.first?["seq"] as? Int == 21)
        #expect(try Self.json(try await session.get("/api/entries?type=add&limit=0"))["total"] as? Int == 0)
        #expect(try await session.get("/api/entry?seq=5").status == 404)
        let session2 = try Self.json(try await session.get("/api/session"))
        #expect(session2["first"] as? Int == 21)
        #expect(session2["last"] as? Int == 40)
    }

    @Test func anEntryShowsItsDiffItsPropsAndTheStateAtThatPoint() async throws {
        let session = try await Self.start()
        defer { Task { await session.stop() } }
        for _ in 0..<5 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()

        let entry = try Self.json(try await session.get("/api/entry?seq=3"))
        let line = try #require(entry["line"] as? [String: Any])
        #expect((line["action"] as? [String: Any])?["type"] as? String == "add")
        let changes = try #require(line["changes"] as? [[Any]])
        #expect(changes.count == 2)
        let before = try #require(entry["before"] as? [Any])
        let paths = changes.map { ($0[0] as? [Any])?.map { "\($0)" }.joined(separator: ".") ?? "" }
        let count = try #require(paths.firstIndex(of: "count"))
        #expect(before[count] as? Int == 2)
        #expect(changes[count][1] as? Int == 3)
        let added = try #require(paths.firstIndex(of: "items.3"))
        #expect(before[added] is NSNull)
        #expect((entry["props"] as? [String: Any])?["count"] as? Int == 3)

        let root = try Self.json(try await session.get("/api/state?seq=3"))
        #expect(root["count"] as? Int == 3)
        let items = try #require((root["items"] as? [[String: Any]])?.first { $0["key"] as? String == "items" })
        #expect(items["size"] as? Int == 3)
        let earlier = try Self.json(try await session.get("/api/state?seq=3&before=1&path=%5B%22items%22%5D"))
        #expect(earlier["count"] as? Int == 2)
        let paged = try Self.json(try await session.get("/api/state?path=%5B%22items%22%5D&offset=3&limit=10"))
        #expect(paged["count"] as? Int == 5)
        #expect((paged["items"] as? [[String: Any]])?.map { $0["key"] as? Int } == [4, 5])
        #expect(try await session.get("/api/state?path=%5B%22name%22%5D").status == 404)
        #expect(try await session.get("/api/entry?seq=999").status == 404)
        // A query value that is not what its name takes is refused, naming it — not read as the default.
        for (target, said) in [("/api/entries?offset=abc", "'offset' must be a whole number"), ("/api/entries?offset=-1", "'offset'"),
                               ("/api/entries?limit=-5", "'limit'"), ("/api/entries?limit=1.5", "'limit'"),
                               ("/api/entries?failed=maybe", "'failed' is 1 or 0"), ("/api/state?seq=3&before=yes", "'before' is 1 or 0"),
                               ("/api/state?path=%7B%7D", "'path' must be a JSON list"), ("/api/entry?seq=%2B3", "'seq' must be"),
                               ("/api/entries?offset=99999999999999999999999", "'offset'")] {
            let refused = try await session.get(target)
            #expect(refused.status == 400 && refused.body.contains(said), "\(target): \(refused.status) \(refused.body)")
        }
        #expect(try await session.get("/api/entries?limit=0").status == 200, "the page asks for the total alone")

        let found = try Self.json(try await session.get("/api/search?q=star"))
        #expect((found["matches"] as? [[String: Any]])?.first?["value"] as? String == "start")
        // (The store was put back where it was: now is still the newest state.)
        #expect(try await session.store.state()["count"] == 5)
    }

    @Test func dispatchAndTimeTravelWaitForTheUnlockAndHoldLiveActions() async throws {
        let session = try await Self.start()
        defer { Task { await session.stop() } }
        for _ in 0..<10 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()

        let locked = try await session.post("/api/dispatch", body: #"{"type":"add"}"#)
        #expect(locked.status == 423)
        #expect(try await session.post("/api/jump?seq=2").status == 423)
        #expect(try await session.post("/api/unlock").status == 200)
        #expect(try await session.post("/api/dispatch", body: #"{"type":"add"}"#).status == 200)
        #expect(try await session.store.state()["count"] == 11)
        let malformed = try await session.post("/api/dispatch", body: #"{"type":}"#)
        #expect(malformed.status == 400)
        #expect(malformed.body.contains("column"))
        #expect(try await session.post("/api/dispatch", body: #"{"kind":"add"}"#).status == 400)
        let large = try await session.post("/api/dispatch", body: #"{"type":"rename","name":""# + String(repeating: "x", count: 5000) + #""}"#)
        #expect(large.status == 413)

        let jumped = try Self.json(try await session.post("/api/jump?seq=4"))
        #expect(jumped["traveling"] as? Bool == true)
        #expect(try await session.store.props()["count"] == 4)
        session.store.dispatch(["type": "add"]) // held while traveling
        await session.store.barrier()
        #expect(try Self.json(try await session.get("/api/session"))["held"] as? Int == 1)
        #expect(try await session.post("/api/jump?seq=999").status == 409)

        let resumed = try Self.json(try await session.post("/api/resume"))
        #expect(resumed["traveling"] as? Bool == false)
        await session.store.barrier()
        #expect(try await session.store.state()["count"] == 12)

        #expect(try await session.post("/api/rewind?seq=5").status == 200)
        #expect(try await session.store.state()["count"] == 5)
        #expect(try await session.post("/api/lock").status == 200)
        #expect(try await session.post("/api/resume").status == 423)
    }

    @Test func thePageHearsNewEntriesOverTheLiveSocket() async throws {
        let session = try await Self.start()
        defer { Task { await session.stop() } }
        let port = session.server.port, token = session.token
        let socket = try await offPool { try RawWebSocket(port: port, target: "/api/live?token=\(token)") }
        defer { socket.close() }
        let first = try await offPool { try socket.readText() }
        #expect(first.contains(#""type":"entries""#))
        session.store.dispatch(["type": "rename", "name": "live"])
        var heard = ""
        for _ in 0..<5 where !heard.contains(#""type":"rename""#) { heard = try await offPool { try socket.readText() } }
        #expect(heard.contains(#""type":"rename""#))
        #expect(heard.contains(#""last":1"#))
        await #expect(throws: (any Error).self) { try await offPool { try RawWebSocket(port: port, target: "/api/live?token=wrong") } }
    }

    @Test func theFirstEntryAfterWhichAConditionHoldsIsFound() async throws {
        let session = try await Self.start()
        defer { Task { await session.stop() } }
        for _ in 0..<30 { session.store.dispatch(["type": "add"]) }
        await session.store.barrier()
        let found = try Self.json(try await session.get("/api/first?where=state.count%20%3E%3D%2017")) // state.count >= 17
        #expect(found["result"] as? String == "entry")
        #expect(found["seq"] as? Int == 17)
        #expect(try Self.json(try await session.get("/api/first?where=state.name%20%3D%3D%20%22start%22"))["result"] as? String == "start")
        let never = try Self.json(try await session.get("/api/first?where=state.count%20%3E%20100"))
        #expect(never["result"] as? String == "never")
        #expect(never["checked"] as? Int == 31)
        let broken = try await session.get("/api/first?where=state.count%20%3E")
        #expect(broken.status == 400)
        #expect(broken.body.contains("condition"))
        let writing = try await session.get("/api/first?where=(function()%20state.count%20%3D%200%20end)()") // a write
        #expect(writing.status == 400)
        #expect(try await session.store.state()["count"] == 30) // nothing written, the state put back
        // A condition that loops in C is stopped by the budget (the default 200 ms, counted in CPU time):
        // the request is answered, and the store goes on.
        let looping = try await session.get("/api/first?where=%23table.move(%7B%7D%2C1%2C1e12%2C1%2C%7B%7D)%20%3E%200") // #table.move({},1,1e12,1,{}) > 0
        #expect(looping.status == 400, "\(looping.body)")
        #expect(looping.body.contains("time budget"), "\(looping.body)")
        let empty = try await session.get("/api/first?where=%23(%27%27)%3Arep(math.maxinteger)%20%3E%200") // #(''):rep(math.maxinteger) > 0
        #expect(empty.status == 200, "\(empty.body)")
        #expect(await session.store.send(["type": "add"]).failure == nil)
        #expect(try await session.store.state()["count"] == 31)
    }

    @Test func anEntryShowsTheSubscriptionsItLaunchedAndCancelled() async throws {
        let folder = try CLI.makeApp("""
            local luastore = require("luastore")
            local app = {}
            function app.init() return { ticking = false, every = 30 } end
            function app.reduce(state, action)
              if action.type == "start" then state.ticking = true
              elseif action.type == "faster" then state.every = 20
              elseif action.type == "stop" then state.ticking = false end
            end
            function app.subscriptions(state)
              if state.ticking then return { clock = luastore.timer(state.every, { type = "tick" }) } end
              return {}
            end
            function app.props(state) return { ticking = state.ticking } end
            return app
            """)
        let journal = DevtoolsJournal()
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.journal = { journal.hear($0) }
        options.subscriptionsChanged = { journal.hear($0) }
        options.historyEntries = 100
        let store = try await ScriptedStore(app: folder, options: options)
        let server = try await DevtoolsServer.start(store: store, journal: journal)
        let session = Session(store: store, server: server, token: String(server.url.split(separator: "=").last ?? ""))
        defer { Task { await session.stop() } }
        for type in ["start", "faster", "stop"] {
            store.dispatch(["type": .string(type)])
            await store.barrier()
        }
        let started = try #require(try Self.json(try await session.get("/api/entry?seq=1"))["subscriptions"] as? [String: Any])
        #expect((started["launched"] as? [String: Any])?.keys.sorted() == ["clock"])
        #expect(((started["launched"] as? [String: Any])?["clock"] as? [String: Any])?["every"] as? Int == 30)
        #expect((started["cancelled"] as? [String])?.isEmpty == true)
        let changed = try #require(try Self.json(try await session.get("/api/entry?seq=2"))["subscriptions"] as? [String: Any])
        #expect(((changed["launched"] as? [String: Any])?["clock"] as? [String: Any])?["every"] as? Int == 20)
        #expect(changed["cancelled"] as? [String] == ["clock"])
        let stopped = try #require(try Self.json(try await session.get("/api/entry?seq=3"))["subscriptions"] as? [String: Any])
        #expect((stopped["launched"] as? [String: Any])?.isEmpty == true)
        #expect(stopped["cancelled"] as? [String] == ["clock"])
    }
}
