import Foundation
@testable import LuaKit
import LuaStoreTestSupport
import Testing

/// The differential fuzzer (`Fuzz/pattern_fuzzer.lua`): random calls of `find`, `match`, `gmatch` and `gsub`
/// over patterns from the whole grammar, the sandbox's against Lua's own, results and error messages alike.
/// A bounded number of cases here; `scripts/fuzz-patterns N [SEED]` runs as many as asked
/// (`LUASTORE_FUZZ_CASES`, `LUASTORE_FUZZ_SEED`).
@Suite struct PatternFuzzTests {
    static let fuzzer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fuzz/pattern_fuzzer.lua")

    static var seeds: [Int64] {
        if let seed = ProcessInfo.processInfo.environment["LUASTORE_FUZZ_SEED"].flatMap(Int64.init) { return [seed] }
        return [1, 2, 3, 4]
    }

    static var cases: Int64 {
        ProcessInfo.processInfo.environment["LUASTORE_FUZZ_CASES"].flatMap(Int64.init).map { $0 / Int64(seeds.count) } ?? 5_000
    }

    @Test(arguments: seeds)
    func theSandboxAgreesWithLuaOnGeneratedCalls(seed: Int64) async throws {
        var limits = LuaLimits()
        limits.timeBudget = .seconds(3600) // the reference functions cannot be interrupted anyway; cases are small
        let outcome = try await withVM(limits: limits) { vm throws in
            let chunk = try vm.loadTrusted(try String(contentsOf: Self.fuzzer, encoding: .utf8), chunkName: "pattern_fuzzer.lua")
            let tables = try vm.load("""
                local reference = ...
                return reference, {
                  find = string.find, match = string.match, gmatch = string.gmatch, gsub = string.gsub,
                  format = string.format, tostring = tostring,
                }
                """, chunkName: "libraries.lua")
            let libraries = try vm.callForReferences(tables, arguments: [.reference(vm.referencePatternFunctions())])
            return try vm.call(chunk, arguments: [
                .reference(libraries[0]!), .reference(libraries[1]!), .value(.integer(seed)), .value(.integer(Self.cases)),
            ])
        }
        #expect(outcome.count == 1, "\(outcome.dropFirst().first?.string ?? "")")
        #expect(outcome.first == .integer(Self.cases))
    }
}
