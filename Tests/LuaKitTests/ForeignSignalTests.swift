import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

#if os(Linux)
import Glibc

/// A SIGURG handler the host program installed before its first VM keeps receiving the SIGURGs that are not the
/// watchdog's, and the watchdog still stops scripts. In a fresh process (an exit test), since this one has had
/// VMs, and handlers, for a while.
@Suite struct ForeignSignalTests {
    @Test func aHandlerInstalledBeforeTheFirstVMStillGetsItsSignals() async {
        await #expect(processExitsWith: .success) {
            nonisolated(unsafe) var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in foreignSignals.add(1, ordering: .relaxed) }
            sigemptyset(&action.sa_mask)
            guard sigaction(SIGURG, &action, nil) == 0 else { exit(10) }
            let thread = LuaThread(name: "foreign-signal")
            let outcome: Int32 = thread.sync {
                var limits = LuaLimits()
                limits.timeBudget = .milliseconds(100)
                guard let vm = try? LuaVM(limits: limits) else { return 11 }
                guard vm.budgetEnforcement == .watchdog else { return 12 }
                // The watchdog stops an endless loop (its SIGURG is its own, not the host's)…
                let stopped = (try? vm.run("while true do end", chunkName: "spin.lua")) == nil
                guard stopped else { return 13 }
                // …and a SIGURG from elsewhere reaches the host's handler.
                kill(getpid(), SIGURG)
                for _ in 0..<200 where foreignSignals.load(ordering: .relaxed) == 0 { usleep(5_000) }
                return foreignSignals.load(ordering: .relaxed) >= 1 ? 0 : 14
            }
            exit(outcome)
        }
    }

    /// Without calls the watchdog looks less and less often (an idle VM costs next to no wake-ups), up to once
    /// every 2 s; the next call wakes it, so an endless loop begun after a quiet spell of any length is still
    /// stopped at its budget, not when the watchdog would have looked next.
    @Test func aRestingWatchdogStillStopsTheNextCallOnTime() async {
        await #expect(processExitsWith: .success) {
            let thread = LuaThread(name: "resting-watchdog")
            let outcome: Int32 = thread.sync {
                var limits = LuaLimits()
                limits.timeBudget = .milliseconds(100)
                guard let vm = try? LuaVM(limits: limits) else { return 11 }
                guard vm.budgetEnforcement == .watchdog else { return 12 }
                // Quiet spells: while the watchdog's waits grow (its next look 0.3 s and 1.3 s away), and rested.
                for quiet: UInt32 in [170_000, 700_000, 2_700_000] {
                    guard (try? vm.run("return 1", chunkName: "wake.lua")) != nil else { return 13 }
                    usleep(quiet)
                    let clock = ContinuousClock()
                    let start = clock.now
                    guard (try? vm.run("while true do end", chunkName: "spin.lua")) == nil else { return 14 }
                    guard clock.now - start < .milliseconds(900) else { return 15 }
                }
                return 0
            }
            exit(outcome)
        }
    }
}

import Synchronization
private let foreignSignals = Atomic<Int>(0)
#endif
