import Foundation
import LocalPostgres
import LuaStoreTestSupport
import Testing

/// The bench's `serve.*` and `cluster.*` rows run against the built `luastore-serve` and report a number each. Times are not
/// asserted: they belong to `scripts/bench`, in a release build.
@Suite(.serialized) struct ServeBenchSmokeTests {
    struct Report: Decodable {
        struct Scenario: Decodable {
            let name: String
            let value: Double
        }
        let scenarios: [Scenario]
    }

    @Test func quickServeRowsAreReported() async throws {
        let values = try await rows(of: "serve")
        for name in ["serve.ws_actions_per_second", "serve.p99_ms", "serve.p99_ms_quarter_load", "serve.p50_ms", "serve.cpu_us_per_action", "serve.resume_ms", "serve.resume_vs_fresh_ratio"] {
            let value = values[name] ?? 0
            #expect(value > 0, "\(name) is reported, above 0: \(value)")
        }
        // (A difference of two readings of the server's resident memory: it may come out at 0.)
        #expect(values["serve.kib_per_hibernated_key"].map { $0 >= 0 } == true)
    }

    /// The `cluster.*` rows start a PostgreSQL of their own, and a node they kill.
    @Test(.enabled(if: PostgresServer.unavailable == nil, "PostgreSQL's server is not installed"))
    func quickClusterRowsAreReported() async throws {
        let values = try await rows(of: "cluster")
        for name in ["cluster.postgres_full_us_per_action", "cluster.sqlite_full_us_per_action", "cluster.overhead_ratio", "cluster.failover_s"] {
            let value = values[name] ?? 0
            #expect(value > 0, "\(name) is reported, above 0: \(value)")
        }
        // (Nothing is taken over before the lease of 5 s has expired.)
        #expect((values["cluster.failover_s"] ?? 0) >= 1, "\(values)")
    }

    /// Runs `luastore-bench --quick --only GROUP` against the built `luastore-serve`; its rows by name.
    private func rows(of group: String) async throws -> [String: Double] {
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("serve-bench-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: report) }
        let run = try await runChildProcess(CLI.buildFolder.appendingPathComponent("luastore-bench"),
                                            ["--quick", "--only", group, "--json", report.path,
                                             "--serve-binary", CLI.buildFolder.appendingPathComponent("luastore-serve").path],
                                            environment: CLI.environment, timeout: .seconds(600))
        #expect(run.status == 0, "\(run.errors)")
        let rows = try JSONDecoder().decode(Report.self, from: Data(contentsOf: report)).scenarios
        return Dictionary(rows.map { ($0.name, $0.value) }) { first, _ in first }
    }
}
