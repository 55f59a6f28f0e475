import Foundation
import LocalPostgres
import LuaStoreTestSupport
import RawHTTPClient
import Testing

/// Three `serve --cluster` nodes on one PostgreSQL, clients sending actions over several keys, and nodes killed
/// (`kill -9`, then started again) or paused past their lease (`SIGSTOP` … `SIGCONT`) at random while they do. Each
/// client resends an action under its own id until some node answers it, as docs/serve.md tells clients to. At the
/// end every key's count is exactly the number of ids acknowledged for it — nothing acknowledged lost, nothing
/// applied twice — a node started afresh resumes every key from PostgreSQL to the same count, and every key's
/// journal, exported as a recording, replays with exit status 0.
@Suite(.serialized, .enabled(if: PostgresServer.unavailable == nil, "PostgreSQL's server is not installed"))
struct ClusterChaosTests {
    let counter = CLI.packageRoot.appendingPathComponent("samples/counter")

    static let clients = 6
    static let keys = 4
    static let leaseSeconds = 2
    /// Kills and pauses, one after another, while the clients send.
    static let disturbances = 6

    @Test func acknowledgedActionsSurviveKillsAndPausesAndNoneIsAppliedTwice() async throws {
        let cluster = try await Cluster(app: counter, leaseSeconds: Self.leaseSeconds)
        defer { cluster.remove() }
        let nodes = Nodes()
        for name in ["one", "two", "three"] { await nodes.set(name, try await cluster.node(name)) }

        let deadline = ContinuousClock.now + .seconds(240)
        let chaos = Task {
            var events: [String] = []
            var generator = SystemRandomNumberGenerator()
            while events.count < Self.disturbances, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(Int.random(in: 500...1_500, using: &generator)))
                let name = ["one", "two", "three"].randomElement(using: &generator)!
                guard let node = await nodes.get(name) else { continue }
                if Bool.random(using: &generator) {
                    events.append("kill -9 \(name)")
                    _ = try? await node.stop(SIGKILL)
                    await nodes.set(name, nil)
                    try? await Task.sleep(for: .milliseconds(300))
                    if let restarted = try? await cluster.node(name) { await nodes.set(name, restarted) }
                } else {
                    events.append("pause \(name)")
                    await nodes.set(name, nil) // (clients go elsewhere while it sleeps; what they sent it stays unanswered)
                    kill(node.process.processIdentifier, SIGSTOP)
                    try? await Task.sleep(for: .seconds(Self.leaseSeconds + 1))
                    kill(node.process.processIdentifier, SIGCONT)
                    await nodes.set(name, node)
                }
            }
            await nodes.finish()
            return events
        }

        // Each client, until the disturbances are over: actions, each on a random key, each resent under its id until
        // a node answers it.
        let results = try await withThrowingTaskGroup(of: [String: Answer].self) { group in
            for client in 0..<Self.clients {
                group.addTask {
                    var answers: [String: Answer] = [:]
                    var index = 0
                    while await !nodes.finished, ContinuousClock.now < deadline {
                        defer { index += 1 }
                        try await Task.sleep(for: .milliseconds(20))
                        let id = "c\(client)-\(index)", key = "k\(Int.random(in: 0..<Self.keys))"
                        let body = #"{"id":"\#(id)","action":{"type":"increment"}}"#
                        while answers[id] == nil, ContinuousClock.now < deadline {
                            if let answer = await Self.send(body, key: key, nodes: nodes) {
                                answers[id] = Answer(key: key, repeated: answer["repeated"] as? Bool == true,
                                                     outcome: answer["outcome"] as? String ?? "")
                            } else {
                                try await Task.sleep(for: .milliseconds(100))
                            }
                        }
                        if answers[id] == nil { Issue.record("\(id) was never answered: every node refused or failed it for 4 minutes") }
                    }
                    return answers
                }
            }
            var all: [String: Answer] = [:]
            for try await answers in group { all.merge(answers) { first, _ in first } }
            return all
        }
        let events = await chaos.value
        // (Every node awake and running again.)
        for name in ["one", "two", "three"] {
            if let node = await nodes.get(name) { kill(node.process.processIdentifier, SIGCONT) }
            else { await nodes.set(name, try await cluster.node(name)) }
        }

        #expect(events.count == Self.disturbances, "\(events)")
        #expect(results.count >= Self.clients * 10, "\(results.count) actions answered (chaos: \(events))")
        #expect(results.values.allSatisfy { $0.outcome == "applied" }, "\(results.filter { $0.value.outcome != "applied" })")
        var expected: [String: Int] = [:]
        for answer in results.values { expected[answer.key, default: 0] += 1 }
        for key in 0..<Self.keys {
            let count = try await Self.count(of: "k\(key)", nodes: nodes, until: ContinuousClock.now + .seconds(60))
            #expect(count == expected["k\(key)", default: 0], "k\(key): \(count) counted, \(expected["k\(key)", default: 0]) acknowledged (chaos: \(events))")
        }

        // Every node closed; a node started afresh resumes each key from its journal in PostgreSQL.
        for name in ["one", "two", "three"] {
            if let node = await nodes.get(name) { _ = try await node.stop() }
        }
        let fresh = try await cluster.node("four")
        let only = Nodes()
        await only.set("four", fresh)
        for key in 0..<Self.keys {
            let count = try await Self.count(of: "k\(key)", nodes: only, until: ContinuousClock.now + .seconds(60))
            #expect(count == expected["k\(key)", default: 0], "k\(key) resumed: \(count), acknowledged \(expected["k\(key)", default: 0])")
        }
        #expect(try await fresh.stop().status == 0)
        // Every key's journal, exported from PostgreSQL, replays to its end without a divergence.
        for key in 0..<Self.keys {
            let (status, report) = try await cluster.replayJournal(of: "k\(key)")
            #expect(status == 0 && report.contains(#""matches":true"#), "k\(key): \(report)")
        }
    }

    struct Answer: Sendable {
        let key: String
        let repeated: Bool
        let outcome: String
    }

    /// One try: the action sent to a random live node (a redirect followed once); its answer, or nil.
    static func send(_ body: String, key: String, nodes: Nodes) async -> [String: Any]? {
        guard let node = await nodes.any() else { return nil }
        guard var response = try? await node.request("POST", "/stores/\(key)/actions", body: body) else { return nil }
        if response.status == 307, let port = redirectPort(response) {
            guard let followed = try? await request(port: port, "POST", "/stores/\(key)/actions", body: body) else { return nil }
            response = followed
        }
        guard response.status == 200 else { return nil }
        return try? ServedApp.json(response.body)
    }

    /// The key's count, read from whichever node answers (a redirect followed), retried until `deadline`.
    static func count(of key: String, nodes: Nodes, until deadline: ContinuousClock.Instant) async throws -> Int {
        while ContinuousClock.now < deadline {
            if let node = await nodes.any(), var response = try? await node.request("GET", "/stores/\(key)/props") {
                if response.status == 307, let port = redirectPort(response),
                   let followed = try? await request(port: port, "GET", "/stores/\(key)/props") {
                    response = followed
                }
                if response.status == 200, let count = try ServedApp.json(response.body)["count"] as? Int { return count }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw RawSocket.Failure("no node answered \(key)'s props within the time")
    }

    static func redirectPort(_ response: RawHTTP.Response) -> UInt16? {
        guard let location = response.headers["location"], let afterHost = location.split(separator: ":").last else { return nil }
        return UInt16(afterHost.prefix { $0.isNumber })
    }

    static func request(port: UInt16, _ method: String, _ target: String, body: String = "") async throws -> RawHTTP.Response {
        try await offPool { try RawHTTP.request(method, target, port: port, headers: [:], body: body, token: "") }
    }
}

/// The cluster's running nodes by name (nil while one is down or paused), and whether the disturbances are over.
actor Nodes {
    private var running: [String: ServedApp] = [:]
    private(set) var finished = false

    func finish() { finished = true }

    func set(_ name: String, _ node: ServedApp?) { running[name] = node }
    func get(_ name: String) -> ServedApp? { running[name] }
    func any() -> ServedApp? { running.values.randomElement() }
}
