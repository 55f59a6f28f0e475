import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// Scripts that try to hang, exhaust or crash the host. Each must leave the host alive, the VM usable for the
/// next call, and report a typed error naming what happened.
@Suite struct LimitsTests {
    /// Small memory, long time: for tests that must run out of memory before time (also under TSan).
    static var memoryBound: LuaLimits {
        var limits = LuaLimits()
        limits.timeBudget = .seconds(20)
        limits.memoryBytes = 16 << 20
        return limits
    }

    /// A budget the endless scripts here run out of quickly, and that a call returning at once never does, even on
    /// a loaded machine (the budget counts CPU time: a call kept waiting for a processor does not spend it; with a
    /// wall-clock budget, 100 ms once ran out on the check after a failure, beside busy loops). Each endless loop
    /// here spends all of it, so it is kept short: the suite runs beside busy loops too.
    static var quick: LuaLimits {
        var limits = LuaLimits()
        limits.timeBudget = .milliseconds(100)
        limits.memoryBytes = 16 << 20
        return limits
    }

    /// Both ways of enforcing the budget; every budget test runs under each.
    static let enforcements: [BudgetEnforcement] = [.watchdog, .countHook(instructions: 1000)]

    /// The calling thread's CPU time so far (what a budget counts).
    static func threadCPU() -> Duration {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
    }

    /// The calling thread's processor time so far, in user and in system mode (page faults count there).
    static func threadTimes() -> (user: Duration, system: Duration) {
        var usage = rusage()
        getrusage(__rusage_who_t(1), &usage) // (RUSAGE_THREAD, which Glibc's module does not import)
        func duration(_ time: timeval) -> Duration { .seconds(time.tv_sec) + .microseconds(time.tv_usec) }
        return (duration(usage.ru_utime), duration(usage.ru_stime))
    }

    static func quick(_ enforcement: BudgetEnforcement) -> LuaLimits {
        var limits = quick
        limits.budgetEnforcement = enforcement
        return limits
    }

    @Test(arguments: enforcements)
    func endlessLoopTimesOut(enforcement: BudgetEnforcement) async throws {
        let error = try await expectFailure(.timeout, "local n = 0\nwhile true do n = n + 1 end", limits: Self.quick(enforcement))
        #expect(error?.message == "time budget of 100 ms exceeded")
        #expect(error?.location == "hostile.lua:2")
    }

    /// The budget counts the thread's CPU time: a call that spends twice its budget waiting (here in a host
    /// function that sleeps, as a thread waits for a CPU on a busy machine) and then works briefly completes; one
    /// that waited past the wall clock's backstop (five budgets) stops at its next instruction.
    @Test(arguments: enforcements)
    func theBudgetCountsCPUTimeWithTheWallClockAsABackstop(enforcement: BudgetEnforcement) async throws {
        let script = "print('waiting') local n = 0 for i = 1, 300000 do n = n + i end return n"
        /// Sleeps `duration` whole (the watchdog's signal cuts a `usleep` short).
        @Sendable func sleep(_ duration: Duration) {
            let end = ContinuousClock.now + duration
            while ContinuousClock.now < end { usleep(10_000) }
        }
        var limits = Self.quick(enforcement)
        limits.timeBudget = .milliseconds(100)
        let waited = try await withVM(limits: limits, print: { _ in sleep(.milliseconds(250)) }) { vm throws in
            try vm.run(script, chunkName: "waits.lua")
        }
        #expect(waited == [.integer(45_000_150_000)])
        try await withVM(limits: limits, print: { _ in sleep(.milliseconds(700)) }) { vm throws in
            let error = luaError { _ = try vm.run(script, chunkName: "waits.lua") }
            #expect(error?.kind == .timeout, "\(String(describing: error))")
            #expect(try vm.run("return 1", chunkName: "after.lua") == [1])
        }
    }

    /// A host function that waits for another thread (`excludingFromBudget`) does not spend the call's budget,
    /// however long it waits: past the wall clock's backstop here, and the call still completes; its work after the
    /// wait is counted as ever.
    @Test(arguments: enforcements)
    func aHostsWaitIsNotTheCallsBudget(enforcement: BudgetEnforcement) async throws {
        var limits = Self.quick(enforcement)
        limits.timeBudget = .milliseconds(100)
        try await withVM(limits: limits) { vm throws in
            try vm.define(global: "wait") { [unowned vm] _ in
                vm.excludingFromBudget {
                    let end = ContinuousClock.now + .milliseconds(700) // (whole: the watchdog's signal cuts a usleep short)
                    while ContinuousClock.now < end { usleep(10_000) }
                }
                return []
            }
            let waited = try vm.run("wait() local n = 0 for i = 1, 300000 do n = n + i end return n", chunkName: "waits.lua")
            #expect(waited == [.integer(45_000_150_000)])
            let error = luaError { _ = try vm.run("wait() while true do end", chunkName: "waits.lua") }
            #expect(error?.kind == .timeout, "what the script does after the wait still has its budget")
        }
    }

    /// Standard functions that loop in C over a range the script picks hold the budget too: moving a trillion
    /// nothings stops at the budget (counted in the thread's CPU time, it ends within twice the budget), repeating
    /// nothing a trillion times is `""` at once, and repeating something huge is refused before anything is copied.
    @Test(arguments: enforcements)
    func longLoopsInsideStandardFunctionsStopAtTheBudget(enforcement: BudgetEnforcement) async throws {
        try await withVM(limits: Self.quick(enforcement)) { vm throws in
            for source in ["return table.move({}, 1, 1e12, 1, {})", "local t = {} return table.move(t, 1, math.maxinteger - 1, 2)",
                           "return table.move({}, -1e15, 1e15, 1, {})",
                           "return table.insert(setmetatable({}, {__len = function() return 1e12 end}), 1, 'x')",
                           "return table.remove(setmetatable({}, {__len = function() return 1e12 end}), 1)",
                           "return table.concat(setmetatable({}, {__index = rawlen}), '', 1, 1e12)",
                           // (2^30 equal elements, read and written through C functions: no Lua instruction runs)
                           "return table.sort(setmetatable({}, {__len = function() return 2^30 end, __index = rawlen, __newindex = rawequal}))"] {
                let started = Self.threadCPU()
                let error = luaError { _ = try vm.run(source, chunkName: "loop.lua") }
                #expect(error?.kind == .timeout || (source.contains("concat") && error?.kind == .memory), "\(source): \(String(describing: error))")
                #expect(Self.threadCPU() - started < .milliseconds(200), "\(source): within twice the budget")
                #expect(try vm.run("return table.move({1, 2}, 1, 2, 2)[3]", chunkName: "after.lua") == [2])
            }
            for source in ["return #(''):rep(math.maxinteger)", "return #(''):rep(1e15, '')", "return #(''):rep(math.maxinteger, '')"] {
                let started = Self.threadCPU()
                #expect(try vm.run(source, chunkName: "rep.lua") == [0], "\(source)")
                #expect(Self.threadCPU() - started < .milliseconds(100), "\(source)")
            }
            let huge = luaError { _ = try vm.run("return ('x'):rep(1e9)", chunkName: "rep.lua") }
            #expect(huge?.kind == .memory, "\(String(describing: huge))")
            let tooLarge = luaError { _ = try vm.run("return ('x'):rep(3e9)", chunkName: "rep.lua") }
            #expect(tooLarge?.message.hasSuffix("resulting string too large") == true, "\(String(describing: tooLarge))")
        }
    }

    /// One C call over a big string holds the budget too: `%q` of megabytes of control bytes (each written as an
    /// escape), a format string of megabytes, and the parse of a long chunk `load` is given (Lua's parser runs in
    /// C) ran half a second and more past any budget before the hook could fire; now each ends within twice the
    /// budget (in the thread's CPU time) — stopped by the budget's error, or done. What the same calls give is
    /// unchanged (`LuaCompatibilityTests`).
    @Test(arguments: enforcements)
    func longWorkInsideOneStandardCallStopsAtTheBudget(enforcement: BudgetEnforcement) async throws {
        var limits = Self.quick(enforcement)
        limits.timeBudget = .milliseconds(20)
        limits.memoryBytes = 256 << 20
        try await withVM(limits: limits) { vm throws in
            for (setup, call) in [("local s = ('\\0'):rep(2e7)", "string.format('%q', s)"),
                                  ("local s = ('\\1\\0012'):rep(6e6)", "string.format('%q', s)"),
                                  ("local s = ('%%'):rep(3e7)", "string.format(s)"),
                                  ("local s = ('a = 1; '):rep(4e6)", "load(s)"),
                                  ("local s = 'return {' .. ('1, '):rep(6e6) .. '}'", "load(s)")] {
                // (The big string is made in a call of its own, with time to spare: making it is no part of the work;
                // nor is collecting what the cases before left — the tens of megabytes a stopped parse had built —,
                // which a collector's step inside the call timed would otherwise do, in CI once 72 ms.)
                _ = try vm.withTimeBudget(atLeast: .seconds(30)) { () throws(LuaError) in
                    try vm.run("\(setup) big = s; collectgarbage()", chunkName: "setup.lua")
                }
                let started = Self.threadCPU(), startedIn = Self.threadTimes()
                let error = luaError { _ = try vm.run("local s = big; big = nil; return \(call)", chunkName: "call.lua") }
                let spent = Self.threadCPU() - started, spentIn = Self.threadTimes()
                #expect(error == nil || error?.kind == .timeout, "\(call) of \(setup): \(String(describing: error))")
                #expect(spent < .milliseconds(40), """
                    \(call) of \(setup): \(spent), within twice the budget (user \(spentIn.user - startedIn.user), \
                    system \(spentIn.system - startedIn.system))
                    """)
                #expect(try vm.run("return 1 + 1", chunkName: "after.lua") == [2])
            }
        }
    }

    /// The budget holds inside coroutines — nested, behind `pcall` inside them, through `wrap` — and a spent budget
    /// stops the whole call, not just the coroutine (resume does not return it as the coroutine's error).
    @Test(arguments: enforcements)
    func endlessLoopsInsideCoroutinesTimeOut(enforcement: BudgetEnforcement) async throws {
        for (source, line) in [
            ("local co = coroutine.create(function()\n  local n = 0\n  while true do n = n + 1 end\nend)\nlocal ok = coroutine.resume(co)\nreturn 'after'", 3),
            ("local f = coroutine.wrap(function()\n  pcall(function() while true do end end)\nend)\nreturn pcall(f)", 2),
            ("local inner = coroutine.wrap(function()\n  while true do end\nend)\nlocal outer = coroutine.create(function() inner() end)\nreturn coroutine.resume(outer)", 2),
        ] {
            let error = try await expectFailure(.timeout, source, limits: Self.quick(enforcement))
            #expect(error?.message == "time budget of 100 ms exceeded", "\(source)")
            #expect(error?.location == "hostile.lua:\(line)", "\(source)")
        }
    }

    /// SIGURGs that are not the watchdog's (sent by another process or thread, or while no call is over its
    /// deadline) interrupt nothing: a call within budget completes with its result.
    @Test func straySignalsStopNothing() async throws {
        let thread = LuaThread(name: "stray-signals")
        let vmThread = thread.sync { pthread_self() }
        let sender = Task.detached {
            while !Task.isCancelled {
                pthread_kill(vmThread, SIGURG)
                kill(getpid(), SIGURG)
                try? await Task.sleep(for: .microseconds(200))
            }
        }
        defer { sender.cancel() }
        let sum = try thread.sync { () throws(LuaError) -> [LuaValue] in
            var limits = LuaLimits()
            limits.timeBudget = .seconds(20)
            let vm = try LuaVM(limits: limits)
            return try vm.run("local n = 0 for i = 1, 3e7 do n = n + i % 7 end return n", chunkName: "busy.lua")
        }
        #expect(sum == [.integer((1...30_000_000).reduce(0) { $0 + $1 % 7 })])
    }

    /// Budgets are per VM: one thread's endless loop is stopped while another thread's VM goes on calling,
    /// undisturbed, at the same time.
    @Test func watchdogStopsOnlyTheCallOverItsBudget() async throws {
        let loopThread = LuaThread(name: "loops")
        let workThread = LuaThread(name: "works")
        let limits = Self.quick(.watchdog)
        async let looping: LuaError? = Task.detached {
            loopThread.sync { () -> LuaError? in
                guard let vm = try? LuaVM(limits: limits) else { return nil }
                return luaError { _ = try vm.run("while true do end", chunkName: "loop.lua") }
            }
        }.value
        // (The working VM's calls get a budget long enough that a busy machine cannot starve one of them past
        // it: what is tested is that the other VM's watchdog never stops them.)
        var workLimits = limits
        workLimits.timeBudget = .seconds(10)
        async let working: [LuaValue] = Task.detached { [workLimits] in
            try workThread.sync { () throws(LuaError) -> [LuaValue] in
                let vm = try LuaVM(limits: workLimits)
                var last: [LuaValue] = []
                let clock = ContinuousClock()
                let start = clock.now
                var round: Int64 = 0
                while clock.now - start < .milliseconds(300) {
                    round += 1
                    last = try vm.run("local n = 0 for i = 1, 1000 do n = n + i end return n + \(round)", chunkName: "ok.lua")
                }
                return last.map { $0 == .integer(500_500 + round) ? .boolean(true) : $0 }
            }
        }.value
        #expect(await looping?.kind == .timeout)
        #expect(try await working == [.boolean(true)])
    }

    /// `restartbudget()` gives each step of a trusted host loop a budget of its own: 25 steps that each spin for a
    /// twentieth of the budget (of the thread's CPU time, as the budget counts, so load on the machine cannot
    /// shorten them; each is a hundredth of the wall clock's backstop, so a thread given 1 % of a processor still
    /// ends it in time) pass with it and time out without it; scripts cannot see it.
    @Test(arguments: enforcements)
    func trustedLoopsGiveEachStepItsOwnBudget(enforcement: BudgetEnforcement) async throws {
        var limits = Self.quick(enforcement)
        limits.timeBudget = .seconds(1)
        try await withVM(limits: limits) { vm throws in
            try vm.define(global: "elapsed") { _ in
                var now = timespec()
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
                return [.number(Double(now.tv_sec) + Double(now.tv_nsec) / 1e9)]
            }
            let step = try vm.load("local start = elapsed() while elapsed() - start < 0.05 do end", chunkName: "step.lua")
            let loop = try vm.loadTrusted(
                "local step, restart = ... for i = 1, 25 do if restart then restartbudget() end step() end return true",
                chunkName: "loop")
            #expect(try vm.call(loop, arguments: [.reference(step), .value(true)]) == [true])
            let error = luaError { try vm.call(loop, arguments: [.reference(step), .value(false)]) }
            #expect(error?.kind == .timeout)
            #expect(try vm.run("return (function() return restartbudget end)()", chunkName: "script.lua") == [.nil], "hidden from scripts")
        }
    }

    /// `within(account, ms, bytes, f, ...)` runs `f` inside tighter limits for trusted code: its own time budget
    /// (named in the timeout), its own allowance of memory, both put back after it — when it fails too — and an
    /// account of its calls (begun, returned, allocations, one in 16 timed); scripts cannot see it.
    @Test func trustedCodeRunsAFunctionWithinLimitsOfItsOwn() async throws {
        var limits = Self.quick(.watchdog)
        limits.timeBudget = .seconds(10)
        limits.memoryBytes = 64 << 20
        try await withVM(limits: limits) { vm throws in
            let spin = try vm.load("local kind = ... if kind == 'spin' then while true do end elseif kind == 'grow' then local t = {} for i = 1, 1e6 do t[i] = i end end return kind", chunkName: "plugin.lua")
            let run = try vm.loadTrusted("""
                local f, kind, ms, bytes, account = ...
                return within(account, ms, bytes, f, kind)
                """, chunkName: "runner")
            let read = try vm.loadTrusted("return readaccount(...)", chunkName: "reader")
            let account = try #require(try vm.callForReferences(try vm.loadTrusted("return newaccount()", chunkName: "maker"), arguments: []).first ?? nil)
            #expect(try vm.call(run, arguments: [.reference(spin), .value("ok"), .value(1000), .value(.integer(2 << 20)), .reference(account)]) == ["ok"])
            let timeout = luaError { try vm.call(run, arguments: [.reference(spin), .value("spin"), .value(1000), .value(0), .reference(account)]) }
            #expect(timeout?.kind == .timeout)
            #expect(timeout?.message == "time budget of 1000 ms exceeded", "\(String(describing: timeout))")
            let memory = luaError { try vm.call(run, arguments: [.reference(spin), .value("grow"), .value(0), .value(.integer(2 << 20)), .reference(account)]) }
            #expect(memory?.kind == .memory, "\(String(describing: memory))")
            // Both limits are back: the same work fits the VM's 64 MiB and 10 s.
            #expect(try vm.call(run, arguments: [.reference(spin), .value("grow"), .value(0), .value(0), .reference(account)]).first == "grow")
            let counted = try vm.call(read, arguments: [.reference(account)]).first ?? .nil
            #expect(counted["begun"] == 4)
            #expect(counted["returned"] == 2)
            #expect(counted["timed"] == 1, "the first call of 16 is timed")
            #expect((counted["nanoseconds"].integer ?? 0) > 0)
            #expect((counted["allocations"].integer ?? 0) > 0)
            #expect(try vm.run("return (function() return within end)()", chunkName: "script.lua") == [.nil], "hidden from scripts")
        }
    }

    /// `istable` and `isstring` answer what `type(v) == "table"` and `== "string"` would, for trusted code only.
    @Test func trustedCodeHasTypeTestsThatMakeNoString() async throws {
        try await withVM { vm throws in
            let probe = try vm.loadTrusted(
                "return istable({}), istable('t'), istable(nil), isstring('s'), isstring(1), isstring({})", chunkName: "probe")
            #expect(try vm.call(probe) == [true, false, false, true, false, false])
            for name in ["istable", "isstring"] {
                #expect(try vm.run("return (function() return \(name) end)()", chunkName: "script.lua") == [.nil], "hidden from scripts")
            }
        }
    }

    /// Counting is exact and repeatable: a loop of n iterations costs a + b·n instructions, the same call
    /// counts the same twice, the budget still holds while counting, and afterwards enforcement is as before.
    @Test(arguments: enforcements)
    func instructionsAreCountedExactly(enforcement: BudgetEnforcement) async throws {
        try await withVM(limits: Self.quick(enforcement)) { vm in
            let loop = try vm.load("local n = ... local x = 0 for i = 1, n do x = x + i end return x", chunkName: "loop.lua")
            func count(_ n: Int64) throws -> Int {
                try vm.countingInstructions { () throws(LuaError) in try vm.call(loop, .integer(n)) }.instructions
            }
            let zero = try count(0), ten = try count(10), twenty = try count(20)
            #expect(zero > 0)
            #expect(twenty - ten == ten - zero, "linear in the iterations")
            #expect(try count(10) == ten, "repeatable")
            let error = luaError { _ = try vm.countingInstructions { () throws(LuaError) in try vm.run("while true do end", chunkName: "spin.lua") } }
            #expect(error?.kind == .timeout)
            // (A VM asked for the watchdog uses the count hook once another SIGURG handler replaced LuaKit's, as
            // the serialized SignalHandler suite does while this one may run: only the count hook is certain.)
            if case .countHook = enforcement { #expect(vm.budgetEnforcement == enforcement) }
            #expect(luaError { _ = try vm.run("while true do end", chunkName: "spin.lua") }?.kind == .timeout)
            #expect(try vm.run("return 1 + 1", chunkName: "after.lua") == [2])
        }
    }

    @Test(arguments: [
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function() return 'swallowed' end) end",
        "local function f() while true do end end\nwhile true do pcall(pcall, f) end",
        "while true do pcall(error) end",
        "xpcall(function() while true do end end, function() while true do end end)",
        "local t = setmetatable({}, {__close = function() while true do end end})\ndo local x <close> = t\nwhile true do end end",
        "while true do local ok = pcall(string.rep, 'x', 10) end",
        "table.sort({3, 2, 1, 5, 4}, function(a, b) while true do end end)",
        "local t = setmetatable({}, {__index = function(t, k) while true do end end}) return t.x",
        "string.gsub(string.rep('a', 1000), 'a', function() while true do end end)",
    ], enforcements)
    func budgetCannotBeSwallowed(source: String, enforcement: BudgetEnforcement) async throws {
        _ = try await expectFailure(.timeout, source, limits: Self.quick(enforcement))
    }

    @Test(arguments: [
        "local t = setmetatable({}, {}); getmetatable(t).__index = function(t, k) return t[k] end; return t.x",
        "local t = setmetatable({}, {}); getmetatable(t).__tostring = function(t) return tostring(t) end; return tostring(t)",
        "local mt = {}; mt.__add = function(a, b) return a + b end; local t = setmetatable({}, mt); return t + 1",
        "local mt = {}; mt.__lt = function(a, b) return a < b end; local t = setmetatable({}, mt); return t < t",
    ])
    func recursionThroughMetamethodsIsAnError(source: String) async throws {
        let error = try await expectFailure(.runtime, source)
        #expect(error?.message.contains("stack overflow") == true, "\(String(describing: error))")
    }

    /// Under either collector, a script may make many times the cap in short-lived garbage (it is collected
    /// as it goes), while live data beyond the cap is still a memory error and the VM stays usable.
    @Test(arguments: [GarbageCollection.generational(), .incremental(), .generational(minorMultiplier: 5, majorMultiplier: 50),
                      .incremental(pause: 1000, stepMultiplier: 1000)])
    func bothCollectorsFreeGarbageAndKeepTheCap(collector: GarbageCollection) async throws {
        var limits = Self.memoryBound
        limits.garbageCollection = collector
        try await withVM(limits: limits) { vm throws in
            let churn = "local kept = {} for i = 1, 400000 do local t = { i, tostring(i), { i } } if i % 1000 == 0 then kept[#kept + 1] = t end end return #kept"
            #expect(try vm.run(churn, chunkName: "churn.lua") == [400])
            #expect(vm.memory.peakBytes < limits.memoryBytes / 2, "collected as it went, not by emergency collections at the cap")
            // Long-lived data replaced again and again (old garbage, for the generational collector): about a
            // third of the cap is live at any time, many times the cap is allocated, nothing fails.
            let replace = "local keep for round = 1, 15 do local t = {} for i = 1, 50000 do t[i] = { i } end keep = t end return #keep"
            #expect(try vm.run(replace, chunkName: "replace.lua") == [50000])
            let error = luaError { _ = try vm.run("local t = {}\nlocal i = 0\nwhile true do i = i + 1; t[i] = {i} end", chunkName: "hostile.lua") }
            #expect(error?.kind == .memory)
            #expect(try vm.run(churn, chunkName: "churn.lua") == [400], "usable after the memory error")
        }
    }

    @Test(arguments: [
        ("error()", "(error object is a nil value)"),
        ("error(nil)", "(error object is a nil value)"),
        ("error({code = 1})", "(error object is a table value)"),
        ("error(setmetatable({}, {__tostring = function() while true do end end}))", "(error object is a table value)"),
        ("error(42)", "42"),
        ("error(true)", "(error object is a boolean value)"),
    ])
    func oddErrorValuesAreReported(source: String, message: String) async throws {
        let error = try await expectFailure(.runtime, source)
        #expect(error?.message == message)
        #expect(error?.location == "hostile.lua:1")
    }

    @Test func tenMegabyteErrorMessageIsCut() async throws {
        var limits = LuaLimits()
        limits.timeBudget = .seconds(5) // (making 10 MB on a loaded machine is not what this times)
        let error = try await expectFailure(.runtime, "error(string.rep('x', 10 * 1024 * 1024))", limits: limits)
        #expect((error?.message.utf8.count ?? .max) < 5000)
        #expect(error?.message.hasSuffix(" bytes in all)") == true)
        #expect(error?.message.hasPrefix("xxxx") == true)
    }

    @Test(arguments: [
        "local r = string.find(string.rep('a', 40), string.rep('a*', 30) .. 'b')",
        "local r = string.match(string.rep('a', 5000), '.-.-.-.-.-.-b')",
        "local r = string.gsub(string.rep('a', 40), string.rep('a*', 30) .. 'b', 'x')",
        "for w in string.gmatch(string.rep('ab', 2000), '(.-)(.-)(.-)(.-)c') do end",
        "local r = ('a'):rep(60):find(('a?'):rep(60) .. ('a'):rep(60) .. 'b')",
        "local ok = pcall(string.find, string.rep('a', 40), string.rep('a*', 30) .. 'b'); local x = 1",
    ])
    // (Each of these takes stock Lua longer than 20 s — exponential or of a high degree — so none can finish
    // within the budget on any machine, however fast or idle: `(a*)*b` on 3,000 a's, once here, is quadratic
    // and took stock Lua 43 ms.)
    func pathologicalPatternsStopAtTheBudget(source: String) async throws {
        let error = try await expectFailure(.timeout, source)
        #expect(error?.location == "hostile.lua:1")
    }

    /// Long plain searches give Lua's answers. (That they take linear time is a benchmark row,
    /// `strings.plain_find_linearity_ratio`: a deadline in a unit test measures the machine's load, not the
    /// algorithm.)
    @Test func longPlainSearchesGiveLuasAnswers() async throws {
        var limits = Self.quick
        limits.timeBudget = .seconds(30)
        try await withVM(limits: limits) { vm throws in
            let result = try vm.run("""
                local s = string.rep('a', 2000000)
                return s:find(string.rep('a', 100000) .. 'b', 1, true), s:find(string.rep('a', 1000), 1, true)
                """, chunkName: "plain.lua")
            #expect(result == [.nil, 1, 1000])
            // Found only after the first-byte scan has spent its share and memmem took over: the same answer as
            // Lua's own function.
            let late = try vm.run("""
                local s, needle = string.rep('a', 50000) .. 'b' .. string.rep('a', 10), string.rep('a', 1000) .. 'b'
                local i, j = s:find(needle, 1, true)
                local k, l = s:find(needle, 2, true)
                return i, j, k, l, s:find('aab', 40000, true)
                """, chunkName: "late.lua")
            #expect(late == [49001, 50001, 49001, 50001, 49999, 50001])
        }
    }

}

/// Tests that read or change which `SIGURG` handler is installed, one at a time (the handler is process-wide).
extension LimitsTests {
    @Suite(.serialized) struct SignalHandler {
        /// Outside ThreadSanitizer (which holds signals back while the interpreter runs) the watchdog is what
        /// VMs use unless told otherwise; asked for the count hook, they use it.
        @Test func watchdogIsTheDefault() async throws {
            let underTSan = ProcessInfo.processInfo.environment["TSAN_OPTIONS"] != nil
            try await withVM { vm in
                #expect(vm.budgetEnforcement == (underTSan ? .countHook(instructions: 1000) : .watchdog))
            }
            try await withVM(limits: LimitsTests.quick(.countHook(instructions: 50))) { vm in
                #expect(vm.budgetEnforcement == .countHook(instructions: 50))
            }
        }

        /// A VM made after the host replaced the `SIGURG` handler would never be stopped by the watchdog, so it
        /// uses the count hook (and still stops an endless loop). The replacement here forwards to the watchdog's
        /// handler, so VMs made before it keep working meanwhile.
        @Test func vmsMadeAfterTheHandlerWasReplacedUseTheCountHook() async throws {
            try await withVM { _ in } // the watchdog and its handler are in place
            var replacement = sigaction()
            replacement.__sigaction_handler.sa_sigaction = { signal, info, context in
                replacedURGAction.__sigaction_handler.sa_sigaction?(signal, info, context)
            }
            replacement.sa_flags = SA_SIGINFO | SA_RESTART
            var watchdogAction = sigaction()
            sigaction(SIGURG, nil, &watchdogAction)
            replacedURGAction = watchdogAction
            sigaction(SIGURG, &replacement, nil)
            defer { sigaction(SIGURG, &watchdogAction, nil) }
            let error = try await withVM(limits: LimitsTests.quick(.watchdog)) { vm in
                #expect(vm.budgetEnforcement == .countHook(instructions: 1000))
                return luaError { _ = try vm.run("while true do end", chunkName: "spin.lua") }
            }
            #expect(error?.kind == .timeout)
        }
    }
}

/// The watchdog's `SIGURG` action while a test has replaced it: written before the replacement is installed,
/// then only read, by the replacement (a signal handler may take no lock).
nonisolated(unsafe) private var replacedURGAction = sigaction()

/// Runs `source`, expects a failure of `kind`, then checks the VM still serves a normal call (the limits' suites).
func expectFailure(_ kind: LuaError.Kind, _ source: String, limits: LuaLimits = LimitsTests.quick) async throws -> LuaError? {
    try await withVM(limits: limits) { vm throws in
        let error = luaError { _ = try vm.run(source, chunkName: "hostile.lua") }
        #expect(error?.kind == kind, "\(error.map(String.init(describing:)) ?? "no error")")
        #expect(try vm.run("local t = {} for i = 1, 100 do t[i] = i end return #t", chunkName: "after.lua") == [100])
        return error
    }
}
