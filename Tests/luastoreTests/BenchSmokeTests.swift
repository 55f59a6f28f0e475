import Foundation
import Testing

/// The benchmark program runs and writes its report. Times are not asserted: they belong to `scripts/bench`.
@Suite struct BenchSmokeTests {
    struct Report: Decodable {
        struct Scenario: Decodable {
            let name: String
            let value: Double
            let unit: String
            let goal: String
            let pass: Bool?
        }
        let scenarios: [Scenario]
    }

    @Test func quickRunWritesEveryScenario() async throws {
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("bench-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: report) }
        let process = Process()
        process.executableURL = CLI.buildFolder.appendingPathComponent("luastore-bench")
        process.arguments = ["--quick", "--json", report.path]
        process.standardOutput = Pipe()
        process.standardError = Pipe()
        try process.run()
        await withCheckedContinuation { continuation in
            Thread {
                process.waitUntilExit()
                continuation.resume()
            }.start()
        }
        #expect(process.terminationStatus == 0)
        let decoded = try JSONDecoder().decode(Report.self, from: Data(contentsOf: report))
        let names = Set(decoded.scenarios.map(\.name))
        for name in ["counter.lua_vs_swift_ratio", "counter.lua_ns_per_dispatch", "state_size.ratio_100k_vs_10",
                     "fanout.ratio_1000_vs_1", "reload.p50_ms", "reload.ratio_100k_vs_10", "memory.bytes_per_item",
                     "latency.p999_us"] {
            #expect(names.contains(name), "\(name) is reported")
        }
        #expect(decoded.scenarios.allSatisfy { $0.value.isFinite && $0.value > 0 })
    }
}
