import Foundation
import LocalPostgres
import RawHTTPClient

/// `cluster.*`: `luastore-serve serve --cluster` on a PostgreSQL of the bench's own (Debian's, started with `initdb`
/// and `pg_ctl` in a temporary folder, syncing to disk as a production server does), against the same server
/// keeping its journals in SQLite files.
extension Scenarios {
    func cluster() async throws -> [Scenario] {
        guard let binary = serveBinary else {
            FileHandle.standardError.write(Data("bench: cluster rows need --serve-binary PATH (luastore-serve; scripts/bench builds it)\n".utf8))
            return []
        }
        if let missing = PostgresServer.unavailable {
            FileHandle.standardError.write(Data("bench: cluster rows need PostgreSQL: \(missing)\n".utf8))
            return []
        }
        let postgres = try PostgresServer(durable: true)
        postgres.stopsAtExit()
        defer { postgres.stop() }
        let counter = try app("cluster-counter", Self.countingApp)
        var rows: [Scenario] = []

        // What an action costs a node when `full` commits it to PostgreSQL before answering, against the same node
        // committing it to its SQLite files: the same load (clients on keys of their own, 16 actions in flight
        // each), the two alternated, a fresh database each round.
        let open = ["--no-auth", "--persist-sync", "full", "--connection-rate", "10000000", "--key-rate", "10000000",
                    "--connections-per-token", "100000", "--idle-seconds", "600", "--max-live-stores", "1000000"]
        let keys = (0..<(quick ? 4 : 20)).map { "k\($0)" }, seconds = quick ? 1.0 : 3.0
        var onPostgres: [Double] = [], onSQLite: [Double] = [], ratios: [Double] = []
        func microsecondsPerAction(_ options: [String], _ data: String) throws -> Double {
            let server = try ServeProcess(binary: binary, app: counter, data: workspace.appendingPathComponent(data), open + options)
            defer { server.stop() }
            try Self.touchKeys(keys, port: server.port)
            let answered = try Self.closedLoop(port: server.port, keys: keys, inFlight: 16, seconds: seconds)
            return seconds * 1e6 / Double(max(answered, 1))
        }
        for round in 0..<(quick ? 1 : 3) {
            let database = try postgres.databaseNow()
            let clustered = ["--cluster", postgres.url(database), "--node", "bench-\(round)"]
            var pair: (postgres: Double, sqlite: Double) = (0, 0)
            if round.isMultiple(of: 2) {
                pair.sqlite = try microsecondsPerAction([], "cluster-sqlite-\(round)")
                pair.postgres = try microsecondsPerAction(clustered, "cluster-postgres-\(round)")
            } else {
                pair.postgres = try microsecondsPerAction(clustered, "cluster-postgres-\(round)")
                pair.sqlite = try microsecondsPerAction([], "cluster-sqlite-\(round)")
            }
            onPostgres.append(pair.postgres)
            onSQLite.append(pair.sqlite)
            ratios.append(pair.postgres / pair.sqlite)
        }
        rows.append(Scenario(name: "cluster.postgres_full_us_per_action", value: Harness.median(onPostgres), unit: "µs", goal: "—", pass: nil))
        rows.append(Scenario(name: "cluster.sqlite_full_us_per_action", value: Harness.median(onSQLite), unit: "µs", goal: "—", pass: nil))
        let overhead = Harness.median(ratios)
        rows.append(Scenario(name: "cluster.overhead_ratio", value: overhead, unit: "×", goal: "≤ 3", pass: overhead <= 3))

        // Failover: two nodes with 5 s leases; the first holds ten keys and is killed (`kill -9`); how long until
        // the second answers an action on every one of them (clients retry every 50 ms).
        var failovers: [Double] = []
        for round in 0..<(quick ? 1 : 3) {
            let database = try postgres.databaseNow()
            func node(_ name: String) throws -> ServeProcess {
                try ServeProcess(binary: binary, app: counter, data: workspace.appendingPathComponent("failover-\(round)-\(name)"),
                                 open + ["--cluster", postgres.url(database), "--node", name, "--lease-seconds", "5"])
            }
            let first = try node("one"), second = try node("two")
            defer { first.stop(); second.stop() }
            let held = (0..<10).map { "f\($0)" }
            try Self.touchKeys(held, port: first.port)
            let clock = ContinuousClock()
            let killed = clock.now
            first.kill()
            var waiting = Set(held)
            while !waiting.isEmpty {
                for key in waiting.sorted() {
                    let response = try RawHTTP.request("POST", "/stores/\(key)/actions", port: second.port, headers: [:],
                                                       body: #"{"id":"after-\#(key)","action":{"type":"increment"}}"#, token: "")
                    if response.status == 200 { waiting.remove(key) }
                }
                if clock.now - killed > .seconds(Harness.stallSeconds) { Harness.stalled("the second node to take over \(waiting.sorted())") }
                if !waiting.isEmpty { usleep(50_000) }
            }
            failovers.append(Harness.milliseconds(clock.now - killed) / 1_000)
        }
        let failover = Harness.median(failovers)
        rows.append(Scenario(name: "cluster.failover_s", value: failover, unit: "s", goal: "≤ 10", pass: failover <= 10))
        return rows
    }
}
