import Foundation
import LuaStoreCore
import RawHTTPClient

/// `serve.*`: the built `luastore-serve` (`--serve-binary`; `scripts/bench` builds the `serve/` package) as a
/// process of its own on 127.0.0.1, driven by clients in this process — the load generator on the same machine,
/// as the goals say. Each client is a thread with a WebSocket of its own (a second thread reads it in the
/// open-loop row).
extension Scenarios {
    /// A store of 10,000 items from its `init`, for the resume row.
    static let serveItemsApp = """
        local app = {}
        function app.init()
          local items = {}
          for i = 1, 10000 do items["i" .. i] = { title = "item " .. i, done = false } end
          return { items = items, touched = 0 }
        end
        function app.reduce(state, action)
          if action.type == "touch" then state.touched = state.touched + 1 end
        end
        function app.props(state) return { touched = state.touched } end
        return app
        """

    func serve() async throws -> [Scenario] {
        guard let binary = serveBinary else {
            FileHandle.standardError.write(Data("bench: serve rows need --serve-binary PATH (luastore-serve; scripts/bench builds it)\n".utf8))
            return []
        }
        var rows: [Scenario] = []
        let counter = try app("serve-counter", Self.countingApp) // (one counter per key)
        let options = ["--no-auth", "--persist-sync", "batch", "--connection-rate", "10000000", "--key-rate", "10000000",
                       "--connections-per-token", "100000", "--idle-seconds", "600", "--max-live-stores", "1000000"]
        var quickIdle = options // (the rows of hibernated stores: idle after a second)
        quickIdle[quickIdle.firstIndex(of: "--idle-seconds")! + 1] = "1"

        // Throughput: 100 clients, each on its own key among 1,000 live ones, each keeping 16 actions in flight.
        if wants("serve.ws_actions_per_second") {
            let server = try ServeProcess(binary: binary, app: counter, data: workspace.appendingPathComponent("serve-throughput"), options)
            defer { server.stop() }
            let keys = quick ? 100 : 1_000, clients = quick ? 20 : 100
            try Self.touchKeys((0..<keys).map { "k\($0)" }, port: server.port)
            FileHandle.standardError.write(Data("bench: serve: \(keys) keys live; \(clients) clients sending\n".utf8))
            let seconds = quick ? 1.0 : 5.0
            let answered = try Self.closedLoop(port: server.port, keys: (0..<clients).map { "k\($0 * (keys / clients))" },
                                               inFlight: 16, seconds: seconds)
            let perSecond = Double(answered) / seconds
            rows.append(Scenario(name: "serve.ws_actions_per_second", value: perSecond, unit: "/s", goal: "≥ 50000", pass: perSecond >= 50_000))
        }

        // Latency at an offered 20,000 actions a second (open loop: each client sends on its schedule, whatever
        // the answers do; a late answer counts from when its action was due).
        if wants("serve.p99_ms", "serve.p50_ms", "serve.cpu_us_per_action") {
            let server = try ServeProcess(binary: binary, app: counter, data: workspace.appendingPathComponent("serve-latency"), options)
            defer { server.stop() }
            let clients = quick ? 20 : 100, offered = quick ? 2_000.0 : 20_000.0
            try Self.touchKeys((0..<clients).map { "k\($0)" }, port: server.port)
            // (First a quarter of that load, which the server is far from saturated by: what a client waits then.)
            let light = try Self.openLoop(port: server.port, keys: (0..<clients).map { "k\($0)" }, perSecond: offered / 4 / Double(clients),
                                          seconds: quick ? 1.0 : 3.0)
            rows.append(Scenario(name: "serve.p99_ms_quarter_load", value: Harness.percentile(light, 0.99) * 1_000, unit: "ms", goal: "—", pass: nil))
            let before = server.processorSeconds()
            let latencies = try Self.openLoop(port: server.port, keys: (0..<clients).map { "k\($0)" }, perSecond: offered / Double(clients),
                                              seconds: quick ? 1.0 : 5.0)
            let used = server.processorSeconds() - before
            let p99 = Harness.percentile(latencies, 0.99) * 1_000
            rows.append(Scenario(name: "serve.p99_ms", value: p99, unit: "ms", goal: "≤ 5", pass: p99 <= 5))
            rows.append(Scenario(name: "serve.p50_ms", value: Harness.percentile(latencies, 0.5) * 1_000, unit: "ms", goal: "—", pass: nil))
            // (What that load cost the server: its processor time, every thread's, per action answered.)
            rows.append(Scenario(name: "serve.cpu_us_per_action", value: used / Double(latencies.count) * 1e6, unit: "µs", goal: "—", pass: nil))
        }

        // A hibernated 10,000-item store resumed by a request, against the same store made fresh by `init`; and
        // what a hibernated key holds of the server's memory.
        if wants("serve.resume") {
            let items = try app("serve-items", Self.serveItemsApp)
            let server = try ServeProcess(binary: binary, app: items, data: workspace.appendingPathComponent("serve-resume"), quickIdle)
            defer { server.stop() }
            var fresh: [Double] = [], resumed: [Double] = []
            for round in 0..<(quick ? 2 : 5) {
                fresh.append(try Self.timedRequest("POST", "/stores/r\(round)/actions", #"{"type":"touch"}"#, port: server.port))
            }
            try Self.waitForHibernation(port: server.port)
            for round in 0..<(quick ? 2 : 5) {
                resumed.append(try Self.timedRequest("POST", "/stores/r\(round)/actions", #"{"type":"touch"}"#, port: server.port))
            }
            let resume = Harness.median(resumed), start = Harness.median(fresh)
            rows.append(Scenario(name: "serve.resume_ms", value: resume, unit: "ms", goal: "—", pass: nil))
            rows.append(Scenario(name: "serve.resume_vs_fresh_ratio", value: resume / start, unit: "×", goal: "≤ 2", pass: resume / start <= 2))
        }
        if wants("serve.hibernated_keys", "serve.kib_per_hibernated_key", "serve.new_keys_per_second") {
            let server = try ServeProcess(binary: binary, app: counter, data: workspace.appendingPathComponent("serve-hibernated"), quickIdle)
            defer { server.stop() }
            // (100,000 keys, as a node holds them: each made by its first action — which makes its database file —
            // and hibernated a second after, so a few thousand are live at a time.)
            let count = quick ? 500 : 100_000
            try Self.touchKeys(["warm"], port: server.port)
            try Self.waitForHibernation(port: server.port)
            let before = server.residentBytes()
            let started = ContinuousClock.now
            try Self.touchKeys((0..<count).map { "h\($0)" }, port: server.port)
            let making = Harness.milliseconds(ContinuousClock.now - started)
            try Self.waitForHibernation(port: server.port)
            let kibibytes = Double(server.residentBytes() - before) / 1024 / Double(count)
            rows.append(Scenario(name: "serve.hibernated_keys", value: Double(count), unit: "keys", goal: "≥ 100000", pass: quick ? nil : count >= 100_000))
            rows.append(Scenario(name: "serve.kib_per_hibernated_key", value: max(kibibytes, 0), unit: "KiB", goal: "≤ 4", pass: kibibytes <= 4))
            rows.append(Scenario(name: "serve.new_keys_per_second", value: Double(count) / making * 1_000, unit: "/s", goal: "—", pass: nil))
        }
        return rows
    }

    /// One action on each key (four clients at once), so that every key's store is live.
    static func touchKeys(_ keys: [String], port: UInt16) throws {
        let failures = Protected<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { lane in
            for key in keys[...].enumerated().filter({ $0.offset % 4 == lane }).map(\.element) {
                do {
                    let response = try RawHTTP.request("POST", "/stores/\(key)/actions", port: port, headers: [:], body: #"{"type":"touch"}"#, token: "")
                    if response.status != 200 { failures.withLock { $0.append("\(key): \(response.status) \(response.body)") } }
                } catch {
                    failures.withLock { $0.append("\(key): \(error)") }
                }
            }
        }
        if let first = failures.withLock({ $0.first }) { throw RawSocket.Failure("a key's first action failed: \(first)") }
    }

    /// Milliseconds one request takes.
    static func timedRequest(_ method: String, _ target: String, _ body: String, port: UInt16) throws -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        let response = try RawHTTP.request(method, target, port: port, headers: [:], body: body, token: "")
        guard response.status == 200 else { throw RawSocket.Failure("\(target): \(response.status) \(response.body)") }
        return Harness.milliseconds(clock.now - start)
    }

    /// Waits until the server has no live store (its metrics say so), at most two minutes.
    static func waitForHibernation(port: UInt16) throws {
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let metrics = try RawHTTP.request("GET", "/metrics", port: port, headers: [:], body: "", token: "").body
            let live = metrics.split(separator: "\n").first { $0.hasPrefix("luastore_live_stores ") }
            if let live, Double(live.split(separator: " ").last ?? "") == 0 { return }
            usleep(100_000)
        }
        Harness.stalled("the serve bench's stores to hibernate")
    }

    /// A live WebSocket to each key, its snapshot read.
    static func liveSockets(port: UInt16, keys: [String]) throws -> [RawWebSocket] {
        try keys.map { key in
            let socket = try RawWebSocket(port: port, target: "/stores/\(key)/live")
            _ = try socket.readText() // (the snapshot)
            return socket
        }
    }

    /// Clients (one WebSocket to its key each; `SocketLoad`'s few threads) keeping `inFlight` actions
    /// unanswered until `seconds` passed; the number of answers heard in that time.
    static func closedLoop(port: UInt16, keys: [String], inFlight: Int, seconds: Double) throws -> Int {
        try SocketLoad.closedLoop(liveSockets(port: port, keys: keys), inFlight: inFlight, seconds: seconds)
    }

    /// Clients sending `perSecond` actions each on a fixed schedule for `seconds`; each answer's latency in
    /// seconds, from when its action was due.
    static func openLoop(port: UInt16, keys: [String], perSecond: Double, seconds: Double) throws -> [Double] {
        try SocketLoad.openLoop(liveSockets(port: port, keys: keys), perSecond: perSecond, seconds: seconds)
    }
}

/// `luastore-serve serve APP` on 127.0.0.1 and a port it chose, its data in a folder of the bench's workspace.
final class ServeProcess: @unchecked Sendable { // (its process is set once, before it is shared)
    let port: UInt16
    private let process: Process

    init(binary: URL, app: URL, data: URL, _ options: [String]) throws {
        let process = Process()
        process.executableURL = binary
        process.arguments = ["serve", app.path, "--listen", "127.0.0.1:0", "--data", data.path] + options
        process.environment = ProcessInfo.processInfo.environment.merging(["LUASTORE_TIME_BUDGET_MS": "30000"]) { $1 }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var text = ""
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, !text.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        guard let port = text.split(separator: ":").last.flatMap({ UInt16($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            Glibc.kill(process.processIdentifier, SIGKILL)
            throw RawSocket.Failure("luastore-serve printed \(text.debugDescription), not its address")
        }
        self.port = port
        self.process = process
        Harness.children.withLock { _ = $0.insert(process.processIdentifier) }
    }

    /// `kill -9`, and waits (at most a minute) for it to end.
    func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        Harness.children.withLock { _ = $0.remove(process.processIdentifier) }
    }

    /// The server's resident memory, in bytes.
    func residentBytes() -> Int {
        Scenarios.residentBytes(of: String(process.processIdentifier))
    }

    /// The processor time the server has used so far (user and system, all its threads), in seconds.
    func processorSeconds() -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return .nan }
        // (After the name in parentheses: the state is field 3; utime and stime are fields 14 and 15.)
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// SIGTERM, and waits (at most a minute) for it to end (a process already ended: nothing).
    func stop() {
        guard process.isRunning else {
            Harness.children.withLock { _ = $0.remove(process.processIdentifier) }
            return
        }
        process.terminate()
        let deadline = Date().addingTimeInterval(60)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        Harness.children.withLock { _ = $0.remove(process.processIdentifier) }
    }
}

