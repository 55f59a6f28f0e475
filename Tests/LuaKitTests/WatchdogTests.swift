import Foundation
@testable import LuaKit
import LuaStoreTestSupport
import Testing

#if os(Linux)
import Glibc

/// The watchdog watches threads, not VMs: however many VMs a thread runs (10,000 stores on a pool of two
/// threads), each of its looks reads one watch per thread, and making a VM adds nothing for it to read. Counted in
/// a fresh process (an exit test), where no other test's threads come and go.
@Suite struct WatchdogTests {
    /// A call's thread is watched for the earliest deadline among the calls running on it: a VM with a long budget
    /// whose host function runs another VM's endless loop (a short budget) on the same thread sees that loop
    /// stopped at the short budget, and goes on to return (were the long deadline the thread's, the loop would run
    /// until it passed, and stop both calls).
    @Test func aCallInsideAnotherVMsCallStopsAtItsOwnBudget() async throws {
        var outerLimits = LuaLimits()
        outerLimits.timeBudget = .seconds(30)
        var innerLimits = LuaLimits()
        innerLimits.timeBudget = .milliseconds(200)
        try await withVM(limits: outerLimits) { outer in
            let inner = try LuaVM(limits: innerLimits)
            try outer.define(global: "spin") { _ in
                let error = luaError { _ = try inner.run("while true do end", chunkName: "inner.lua") }
                return [.string(error.map { "\($0.kind)" } ?? "returned")]
            }
            #expect(try outer.run("local outcome = spin() return outcome, 1 + 1", chunkName: "outer.lua") == ["timeout", 2])
            #expect(try inner.run("return 'after'", chunkName: "after.lua") == ["after"])
        }
    }

    @Test func manyVMsOnOneThreadAreOneWatchThatGoesWithTheThread() async {
        await #expect(processExitsWith: .success) {
            guard LuaVM.watchedThreadCount == 0 else { exit(10) }
            var limits = LuaLimits()
            limits.timeBudget = .milliseconds(200)
            /// Whether an endless loop in `vm` stops at its budget.
            func stopsAtItsBudget(_ vm: LuaVM) -> Bool {
                do {
                    _ = try vm.run("while true do end", chunkName: "spin.lua")
                    return false
                } catch {
                    return error.kind == .timeout
                }
            }
            var crowded: LuaThread? = LuaThread(name: "many-vms")
            let many: Int32 = crowded!.sync {
                var vms: [LuaVM] = []
                for index in 0..<300 {
                    guard let vm = try? LuaVM(limits: limits) else { return 11 }
                    guard (try? vm.run("return \(index)", chunkName: "one.lua")) == [.integer(Int64(index))] else { return 12 }
                    vms.append(vm)
                }
                guard vms[0].budgetEnforcement == .watchdog else { return 13 }
                guard LuaVM.watchedThreadCount == 1 else { return 14 }
                return stopsAtItsBudget(vms[150]) && stopsAtItsBudget(vms[299]) ? 0 : 15
            }
            guard many == 0 else { exit(many) }
            let other = LuaThread(name: "one-vm")
            let second: Int32 = other.sync {
                guard let vm = try? LuaVM(limits: limits) else { return 16 }
                guard (try? vm.run("return 1", chunkName: "one.lua")) == [1] else { return 17 }
                return LuaVM.watchedThreadCount == 2 ? 0 : 18
            }
            guard second == 0 else { exit(second) }
            crowded = nil // its thread ends, and its watch goes with it
            for _ in 0..<4_000 where LuaVM.watchedThreadCount != 1 { usleep(5_000) } // (20 s at most, for a loaded machine)
            guard LuaVM.watchedThreadCount == 1 else { exit(30 + Int32(LuaVM.watchedThreadCount)) }
            // The thread left is still watched: a new VM's endless loop there stops at its budget.
            let stillWatched: Int32 = other.sync {
                guard let vm = try? LuaVM(limits: limits) else { return 21 }
                return stopsAtItsBudget(vm) ? 0 : 22
            }
            exit(stillWatched)
        }
    }
}
#endif
