import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing
import LuaStoreConcurrency

/// Determinism, stability under load, and the thread a VM lives on.
@Suite(.tags(.concurrency)) struct RuntimeTests {
    static let deterministicScript = """
        local out = {}
        local t = {}
        for i = 1, 200 do t['k' .. i] = i * 3 end
        for k, v in sortedpairs(t) do out[#out + 1] = k .. '=' .. v end
        for i = 1, 20 do out[#out + 1] = math.random(1, 1000) end
        out[#out + 1] = tostring({}) .. tostring(print) .. string.format('%s %5.2f %q', {}, math.pi, 'x\\ny')
        out[#out + 1] = select(2, pcall(error, {}))  and 'caught' or 'none'
        out[#out + 1] = collectgarbage('count') > 0 and 'heap' or 'none'
        local words = {}
        for w in ('the quick brown fox'):gmatch('%a+') do words[#words + 1] = w:upper() end
        out[#out + 1] = table.concat(words, ',')
        return table.concat(out, ' '), {list = out, nested = {t = t}}
        """

    @Test func twoFreshVMsGiveIdenticalResults() async throws {
        let first = try await withVM { vm throws in try vm.run(Self.deterministicScript, chunkName: "d.lua") }
        let second = try await withVM { vm throws in try vm.run(Self.deterministicScript, chunkName: "d.lua") }
        #expect(first == second)
        let firstJSON = try JSONEncoder.sorted.encode(first)
        let secondJSON = try JSONEncoder.sorted.encode(second)
        #expect(firstJSON == secondJSON, "byte-identical")
        // (Identities, not addresses: the same in every VM.)
        #expect(first.first?.string?.contains("table: 0x00000000000001function: 0x00000000000002table: 0x00000000000003") == true)
    }

    /// Runs `soakWorker` alone in a child process, so that its memory readings see no other test.
    @Test(.startsChildProcesses) func soakOfMixedCallsLeavesNoGrowth() async throws {
        let run = try await runChildProcess(
            URL(fileURLWithPath: CommandLine.arguments[0]), ["--testing-library", "swift-testing", "--filter", "soakWorker"],
            environment: ["LUAKIT_SOAK_WORKER": "1"], timeout: .seconds(300))
        let log = run.output + run.errors
        #expect(run.status == 0, "\(log)")
        #expect(log.contains("soakWorker() passed"), "\(log)")
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["LUAKIT_SOAK_WORKER"] != nil))
    func soakWorker() async throws {
        var limits = LuaLimits()
        // (Long enough that a call which returns at once never runs out of it on a loaded machine — 20 ms did,
        // under the thread sanitizer beside a build — and short enough for the ten endless loops below.)
        limits.timeBudget = .milliseconds(250)
        limits.memoryBytes = 8 << 20
        try await withVM(limits: limits) { vm throws in
            let scripts = [
                "local t = {} for i = 1, 50 do t[i] = {i, tostring(i)} end return #t",
                "error('boom')",
                "local x = nil; return x.field",
                "while true do end",
                "local s = string.rep('x', 1 << 24) return #s",
                "return ('k=v; a=b'):gsub('(%w+)=(%w+)', '%2=%1')",
                "return undeclared_thing",
                "return {a = {b = {c = 'd'}}}",
                "local ok, e = pcall(error, 'inner') return ok, e",
                "return {f = print}",
            ]
            let chunks = try scripts.enumerated().map { index, source in try vm.load(source, chunkName: "soak\(index).lua") }
            func round(_ count: Int) {
                for index in 0..<count {
                    let chunk = chunks[index % chunks.count]
                    _ = try? vm.call(chunk, arguments: index % 7 == 0 ? [.value(["payload": .string(String(index))])] : [])
                }
            }
            let quickChunks = chunks.enumerated().filter { $0.offset != 3 }.map(\.element)
            func quickRound(_ count: Int) {
                for index in 0..<count { _ = try? vm.call(quickChunks[index % quickChunks.count], arguments: []) }
            }
            round(20)
            quickRound(1000)
            vm.collectGarbage()
            let heapBefore = vm.memory.bytesInUse
            let residentBefore = residentMemory()
            round(100)                  // includes 10 time-outs of 250 ms each
            quickRound(9_900)
            vm.collectGarbage()
            #expect(vm.stackDepth == 0)
            #expect(vm.memory.bytesInUse <= heapBefore + 16 << 10, "Lua heap \(heapBefore) → \(vm.memory.bytesInUse)")
            // (Under the thread sanitizer — where the watchdog is off, so the VM counts instructions — resident
            // memory grows by ≈ 50 KiB for each 16 MiB `rep` the cap refuses in the sandbox's own `rep`, and by
            // nothing in a plain build, which this checks: the sanitizer's allocator and shadow memory, not the VM.)
            if vm.budgetEnforcement == .watchdog {
                #expect(residentMemory() <= residentBefore + 4 << 20, "resident memory \(residentBefore) → \(residentMemory())")
            }
            #expect(try vm.run("return 1", chunkName: "after.lua") == [1])
        }
    }

    @Test func threadRunsJobsInOrderAndSyncReturnsResults() throws {
        let thread = LuaThread(name: "order")
        let seen = Protected<[Int]>([])
        for index in 0..<1000 { thread.async { seen.withLock { $0.append(index) } } }
        let onThread = thread.sync { thread.isCurrent }
        #expect(onThread)
        #expect(!thread.isCurrent)
        #expect(seen.withLock { $0 } == Array(0..<1000))
        struct Failure: Error {}
        #expect(throws: Failure.self) { try thread.sync { () throws(Failure) in throw Failure() } }
        #expect(thread.sync { thread.sync { 7 } } == 7, "sync on the thread itself runs in place")
        #expect(thread.sync { LuaThread.currentStackSize } == LuaThread.defaultStackSize)
        #expect(LuaThread.currentStackSize == 0)
    }

    /// A job may hold the last reference to what owns its thread (a store whose last job ran): released once run,
    /// it ends the owner, whose thread then stops — on that thread, without waiting for itself (it deadlocked: the
    /// jobs run were released while the thread held its queue's lock, which stopping takes).
    @Test func aJobHoldingTheLastReferenceToItsThreadsOwnerEndsIt() async throws {
        final class Owner: Sendable {
            let thread = Protected<LuaThread?>(LuaThread(name: "owned"))
            let ended: DispatchSemaphore
            init(ended: DispatchSemaphore) { self.ended = ended }
            deinit {
                thread.withLock { $0 = nil } // (the last reference: the thread stops here)
                ended.signal()
            }
        }
        let ended = DispatchSemaphore(value: 0)
        do {
            let owner = Owner(ended: ended)
            owner.thread.withLock { $0 }?.async { [owner] in _ = owner }
        }
        let stopped = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: ended.wait(timeout: .now() + 30) == .success) }
        }
        #expect(stopped, "the owner's end (and its thread's stop) did not finish within 30 s")
    }

    @Test func performRunsOnTheThreadAndResumesTheCaller() async throws {
        let thread = LuaThread(name: "perform")
        for index in 0..<100 { thread.async { _ = index } }
        #expect(await thread.perform { thread.isCurrent }, "the body runs on the thread, after the jobs before it")
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await thread.perform { () throws(Failure) in throw Failure() } }
        let nested = await thread.perform { thread.sync { 7 } }
        #expect(nested == 7)
        var touched = [Int]() // a body that is not Sendable, holding the caller's variables
        await thread.perform { touched.append(LuaThread.currentStackSize) }
        #expect(touched == [LuaThread.defaultStackSize])
    }

    /// Out of jobs, a thread watches for the next one for `LuaThread.spinWindow`, then sleeps: jobs from many
    /// submitters all run, in each submitter's order, whether they find it working, watching or asleep; and
    /// after a burst of ten thousand jobs an idle thread uses next to no processor time.
    @Test func threadWatchesBrieflyThenSleeps() async throws {
        let thread = LuaThread(name: "watching")
        let seen = Protected<[[Int]]>(Array(repeating: [], count: 4))
        await withTaskGroup(of: Void.self) { group in
            for submitter in 0..<4 {
                group.addTask {
                    for index in 0..<300 {
                        thread.async { seen.withLock { $0[submitter].append(index) } }
                        // Now and then longer than the watch, so that the next job finds the thread asleep.
                        if index % 50 == submitter { try? await Task.sleep(for: .milliseconds(2)) }
                    }
                }
            }
        }
        thread.sync {}
        #expect(seen.withLock { $0 } == Array(repeating: Array(0..<300), count: 4))

        for _ in 0..<10_000 { thread.async {} }
        func processorTime() -> Duration {
            thread.sync {
                var time = timespec()
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
                return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
            }
        }
        let before = processorTime()
        try await Task.sleep(for: .milliseconds(300))
        let idle = processorTime() - before
        #expect(idle < .milliseconds(30), "a thread idle for 300 ms used \(idle) of processor time")
    }

    @Test func manyThreadsEachWithAVM() async throws {
        let results = Protected<[Int]>([])
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    let thread = LuaThread(name: "worker\(worker)")
                    let value = try? thread.sync { () throws -> Int in
                        let vm = try LuaVM(limits: .unhurried)
                        let sum = try vm.run("local s = 0 for i = 1, \(worker * 100) do s = s + i end return s", chunkName: "w.lua")
                        return Int(sum.first?.integer ?? -1)
                    }
                    results.withLock { $0.append(value ?? -1) }
                }
            }
        }
        #expect(results.withLock { $0.sorted() } == (0..<8).map { $0 * 100 * ($0 * 100 + 1) / 2 })
    }

    @Test func errorsCarryATraceback() async throws {
        let error = try await withVM { vm throws in
            luaError { _ = try vm.run("local function inner() error('deep') end\nlocal function outer() inner() end\nouter()", chunkName: "tb.lua") }
        }
        #expect(error?.location == "tb.lua:1")
        #expect(error?.traceback?.contains("tb.lua:2: in") == true)
        #expect(error?.description == "tb.lua:1: deep")
    }
}

extension JSONEncoder {
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }
}

/// The process's resident memory in bytes (`VmRSS` in `/proc/self/status`).
func residentMemory() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])
    else { return 0 }
    return kilobytes * 1024
}
