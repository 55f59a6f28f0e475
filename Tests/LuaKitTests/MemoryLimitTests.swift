import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// Scripts that try to exhaust memory: the cap holds to the byte, tables and strings that grow without bound are a
/// memory error, a VM that caught one is still usable, and a finalizer never runs.
@Suite struct MemoryLimitTests {
    @Test func stringRepBeyondTwoGigabytesIsRefused() async throws {
        let error = try await expectFailure(.runtime, "return string.rep('x', 2^31)")
        #expect(error?.message == "resulting string too large")
    }

    @Test func stringRepBeyondTheCapIsAMemoryError() async throws {
        let error = try await expectFailure(.memory, "local s = string.rep('x', 2^30)\nreturn #s", limits: LimitsTests.memoryBound)
        #expect(error?.message == "not enough memory")
        #expect(error?.location == "hostile.lua:1")
    }

    /// The allocator cuts small blocks from slabs of its own and reuses freed ones; its count of live bytes stays
    /// exactly Lua's own, through churn of every size class, tables that grow from small blocks into large ones
    /// and shrink back, and strings; what was kept is intact after all that reuse; and the cap still holds for
    /// memory that reused blocks would have covered.
    @Test func keptBlocksLeaveTheCountExact() async throws {
        try await withVM(limits: LimitsTests.memoryBound) { vm throws in
            let churn = """
                local kept = {}
                for round = 1, 20 do
                  for i = 1, 5000 do
                    local t = {}
                    for k = 1, i % 40 do t[k] = k end         -- grows through the small classes and past them
                    t.name = "item " .. i                      -- a string of its own, a hash part
                    if i % 97 == 0 then kept[#kept + 1] = t end
                  end
                  for k = #kept, 1, -1 do if k % 3 == 0 then table.remove(kept, k) end end
                  for _, t in ipairs(kept) do                  -- shrinks some back into the small classes
                    if #t > 20 then
                      for k = #t, 4, -1 do t[k] = nil end
                      t.shrunk = true                          -- a rehash: the array part is made small again
                    end
                  end
                  collectgarbage()
                end
                local intact = 0
                for _, t in ipairs(kept) do
                  local i = tonumber(t.name:match("%d+"))
                  local length = i % 40 > 20 and 3 or i % 40
                  local whole = #t == length
                  for k = 1, length do whole = whole and t[k] == k end
                  if whole then intact = intact + 1 end
                end
                return #kept, intact
                """
            let kept = try vm.run(churn, chunkName: "churn.lua")
            #expect(kept.count == 2 && kept[0] == kept[1] && (kept[0].integer ?? 0) > 100, "\(kept)")
            let count = try #require(try vm.run("return collectgarbage('count')", chunkName: "count.lua").first?.number)
            // Lua counts in kilobytes, with the bytes as the fraction: exact for counts below 2^53.
            #expect(Int(count * 1024) == vm.memory.bytesInUse)
            let error = luaError { _ = try vm.run("local t = {}\nlocal i = 0\nwhile true do i = i + 1; t[i] = {i} end", chunkName: "hostile.lua") }
            #expect(error?.kind == .memory)
            #expect(vm.memory.bytesInUse < LimitsTests.memoryBound.memoryBytes)
        }
    }

    @Test func unboundedTableGrowthIsAMemoryError() async throws {
        let error = try await expectFailure(.memory, "local t = {}\nlocal i = 0\nwhile true do i = i + 1; t[i] = {i} end",
                                            limits: LimitsTests.memoryBound)
        #expect(error?.location == "hostile.lua:3")
    }

    @Test func memoryErrorsCaughtByPcallStillLeaveAUsableVM() async throws {
        try await withVM(limits: LimitsTests.quick) { vm throws in
            let result = try vm.run("local ok, e = pcall(string.rep, 'x', 1 << 30); return ok, e", chunkName: "m.lua")
            #expect(result == [false, "not enough memory"])
            #expect(vm.memory.bytesInUse < LimitsTests.quick.memoryBytes / 2)
        }
    }

    @Test func stringConcatenationGrowthIsAMemoryError() async throws {
        _ = try await expectFailure(.memory, "local s = 'x'\nwhile true do s = s .. s end", limits: LimitsTests.memoryBound)
    }

    /// A finalizer would run with hooks off, where no budget stops it: it never runs (nor when the VM closes).
    @Test func finalizerThatLoopsNeverRuns() async throws {
        try await withVM(limits: LimitsTests.quick) { vm throws in
            #expect(try vm.run("""
                for i = 1, 100 do setmetatable({}, {__gc = function() while true do end end}) end
                collectgarbage()
                return 1
                """, chunkName: "hostile.lua") == [1])
        }
    }
}
