import Foundation
import LuaStoreTestSupport
import Testing

/// The bench's `serve.*` rows run against the built `luastore-serve` and report a number each. Times are not
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
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("serve-bench-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: report) }
        let run = try await runChildProcess(CLI.buildFolder.appendingPathComponent("luastore-bench"),
                                            ["--quick", "--only", "serve", "--json", report.path,
                                             "--serve-binary", CLI.buildFolder.appendingPathComponent("luastore-serve").path],
                                            environment: CLI.environment, timeout: .seconds(600))
        #expect(run.status == 0, "\(run.errors)")
        let rows = try JSONDecoder().decode(Report.self, from: Data(contentsOf: report)).scenarios
        let values = Dictionary(rows.map { ($0.name, $0.value) }) { first, _ in first }
        for name in ["serve.ws_actions_per_second", "serve.p99_ms", "serve.p99_ms_quarter_load", "serve.p50_ms", "serve.resume_ms", "serve.resume_vs_fresh_ratio"] {
            let value = values[name] ?? 0
            #expect(value > 0, "\(name) is reported, above 0: \(value)")
        }
        // (A difference of two readings of the server's resident memory: it may come out at 0.)
        #expect(values["serve.kib_per_hibernated_key"].map { $0 >= 0 } == true)
    }
}
