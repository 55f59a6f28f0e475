import Foundation
import LuaKit

/// `luastore-bench [--quick] [--json FILE] [--only PREFIX] [--side both|first|second]
/// [--collector generational|incremental] [--serve-binary PATH]`: runs the benchmark scenarios and prints a table. Ratios are measured
/// within one run, alternating the two sides over several rounds (medians). `--side first` (the Lua or larger
/// side) or `second` runs one side only, for a profiler. `--collector` picks the apps' garbage collector.
/// `--serve-binary` names the built `luastore-serve` the `serve.*` rows run (without it they are left out).
var arguments = Array(CommandLine.arguments.dropFirst())
var quick = false
var jsonPath: String?
var only: String?
var sides = Harness.Sides.both
var collector = LuaLimits().garbageCollection
var serveBinary: URL?
while !arguments.isEmpty {
    switch arguments.removeFirst() {
    case "--quick": quick = true
    case "--json": jsonPath = arguments.isEmpty ? nil : arguments.removeFirst()
    case "--only": only = arguments.isEmpty ? nil : arguments.removeFirst()
    case "--side":
        guard let value = arguments.isEmpty ? nil : arguments.removeFirst(), let side = Harness.Sides(rawValue: value) else {
            FileHandle.standardError.write(Data("luastore-bench: --side takes both, first or second\n".utf8))
            exit(2)
        }
        sides = side
    case "--collector":
        switch arguments.isEmpty ? nil : arguments.removeFirst() {
        case "generational": collector = .generational()
        case "incremental": collector = .incremental()
        default:
            FileHandle.standardError.write(Data("luastore-bench: --collector takes generational or incremental\n".utf8))
            exit(2)
        }
    case "--serve-binary":
        serveBinary = arguments.isEmpty ? nil : URL(fileURLWithPath: arguments.removeFirst())
    case let other:
        FileHandle.standardError.write(Data("usage: luastore-bench [--quick] [--json FILE] [--only PREFIX] [--side both|first|second] [--collector generational|incremental] [--serve-binary PATH] (unknown: \(other))\n".utf8))
        exit(2)
    }
}

let workspace = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-bench-\(ProcessInfo.processInfo.processIdentifier)")
try FileManager.default.createDirectory(at: workspace, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: workspace) }

var scenarios = Scenarios(quick: quick, workspace: workspace)
scenarios.sides = sides
scenarios.collector = collector
scenarios.serveBinary = serveBinary
scenarios.only = only
var rows: [Scenario] = []
let groups: [(String, () async throws -> [Scenario])] = [
    ("counter", scenarios.counter), ("init", scenarios.startUp), ("state_size", scenarios.stateSize), ("lists", scenarios.lists),
    ("fanout", scenarios.fanout),
    ("reload", scenarios.reload), ("memory", scenarios.memoryAndLatency), ("strings", scenarios.strings),
    ("strings_scripts", scenarios.stringScripts), ("record", scenarios.journal), ("persist", scenarios.persistence), ("send", scenarios.send),
    ("plugins", scenarios.plugins), ("mounted", scenarios.mountedDispatch), ("stores", scenarios.manyStores),
    ("cli", scenarios.cli), ("inputs", scenarios.inputs), ("test", scenarios.specs),
    ("devtools", scenarios.devtools), ("serve", scenarios.serve), ("cluster", scenarios.cluster),
]
for (name, run) in groups where only.map({ name.hasPrefix($0) || $0.hasPrefix(name) }) ?? true {
    FileHandle.standardError.write(Data("bench: \(name)…\n".utf8))
    rows += try await run()
}

func format(_ value: Double) -> String {
    value >= 100 ? String(format: "%.0f", value) : String(format: "%.2f", value)
}

let nameWidth = max(10, rows.map(\.name.count).max() ?? 0)
print("| " + "scenario".padding(toLength: nameWidth, withPad: " ", startingAt: 0) + " | value | goal | pass |")
print("| " + String(repeating: "-", count: nameWidth) + " | ---: | --- | --- |")
for row in rows {
    let pass = row.pass.map { $0 ? "yes" : "NO" } ?? ""
    print("| \(row.name.padding(toLength: nameWidth, withPad: " ", startingAt: 0)) | \(format(row.value)) \(row.unit) | \(row.goal) | \(pass) |")
}
if let jsonPath {
    struct Report: Encodable { let scenarios: [Scenario] }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(Report(scenarios: rows)).write(to: URL(fileURLWithPath: jsonPath))
}
