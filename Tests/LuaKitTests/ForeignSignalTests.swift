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

    /// After a second without calls the watchdog rests (an idle VM costs no wake-ups); the next call wakes it,
    /// so an endless loop begun then is still stopped at its budget, not when the rest would have ended (2 s).
    @Test func aRestingWatchdogStillStopsTheNextCallOnTime() async {
        await #expect(processExitsWith: .success) {
            let thread = LuaThread(name: "resting-watchdog")
            let outcome: Int32 = thread.sync {
                var limits = LuaLimits()
                limits.timeBudget = .milliseconds(100)
                guard let vm = try? LuaVM(limits: limits) else { return 11 }
                guard vm.budgetEnforcement == .watchdog else { return 12 }
                guard (try? vm.run("return 1", chunkName: "wake.lua")) != nil else { return 13 }
                usleep(1_500_000) // the watchdog lies down
                let clock = ContinuousClock()
                let start = clock.now
                guard (try? vm.run("while true do end", chunkName: "spin.lua")) == nil else { return 14 }
                return clock.now - start < .milliseconds(900) ? 0 : 15
            }
            exit(outcome)
        }
    }
}

import Synchronization
private let foreignSignals = Atomic<Int>(0)
#endif
