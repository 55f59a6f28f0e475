import Foundation
import LuaKit

/// The sandbox's string library, measured inside one VM.
extension Scenarios {
    /// `strings.plain_find_linearity_ratio`: a plain `find` of a needle that is never found (a long run of
    /// `a`s and a `b`) in a subject twice as long takes twice as long — the search is linear, however the
    /// needle and subject are shaped (a naive search of this needle would be quadratic).
    func strings() async throws -> [Scenario] {
        let size = quick ? 200_000 : 2_000_000
        let thread = LuaThread(name: "bench-strings")
        return try await withTaskExecutorPreference(thread) { () throws -> [Scenario] in
            var limits = LuaLimits()
            limits.timeBudget = .seconds(60)
            let vm = try LuaVM(limits: limits)
            let search = try vm.load("""
                local size = ...
                local subject, needle = string.rep('a', size), string.rep('a', 100000) .. 'b'
                return function() return subject:find(needle, 1, true) end
                """, chunkName: "plain_find.lua")
            let small = try vm.callForReferences(search, arguments: [.value(.integer(Int64(size)))])[0]!
            let large = try vm.callForReferences(search, arguments: [.value(.integer(Int64(size * 2)))])[0]!
            let times = try await Harness.alternate(
                rounds: rounds,
                { try Harness.nanosecondsSync(operations: 1) { _ = try vm.call(large) } },
                { try Harness.nanosecondsSync(operations: 1) { _ = try vm.call(small) } })
            return [
                Scenario(name: "strings.plain_find_linearity_ratio", value: times.ratio, unit: "×",
                         goal: "≤ 2.5 (2 is linear)", pass: times.ratio <= 2.5),
            ]
        }
    }
}
