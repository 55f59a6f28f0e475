import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// Scripts that try to overflow a stack: deep recursion in Lua, through pcall and in xpcall's handler, and source
/// nested past the parser's limit are each an error, and the VM goes on.
@Suite struct StackLimitTests {
    /// Lua 5.4.4 overflows the C stack (a crash) on a deep chain of coroutine.close calls; the sandbox's close
    /// stops the chain with an error instead.
    @Test func deepChainsOfCoroutineCloseAreAnError() async throws {
        var limits = LuaLimits()
        limits.timeBudget = .seconds(60)
        limits.memoryBytes = 512 << 20
        try await withVM(limits: limits) { vm throws in
            let result = try vm.run("""
                local coro = false
                for i = 1, 20000 do
                  local previous = coro
                  coro = coroutine.create(function()
                    local cc <close> = setmetatable({}, { __close = function()
                      if previous then assert(coroutine.close(previous)) end
                    end })
                    coroutine.yield()
                  end)
                  assert(coroutine.resume(coro))
                end
                return coroutine.close(coro)
                """, chunkName: "chain.lua")
            #expect(result.first == false)
            #expect(result.last?.string?.hasSuffix("coroutine.close: nested more than 64 deep (deeper chains overflow Lua 5.4.4's C stack)") == true)
            #expect(try vm.run("return 1 + 1", chunkName: "after.lua") == [2])
        }
    }

    @Test func deepLuaRecursionIsAnError() async throws {
        let error = try await expectFailure(.runtime, "local function f(n) return 1 + f(n + 1) end\nreturn f(1)",
                                            limits: { var l = LimitsTests.quick; l.memoryBytes = 64 << 20; l.timeBudget = .seconds(2); return l }())
        #expect(error?.message.contains("stack overflow") == true)
        #expect(error?.location == "hostile.lua:1")
    }

    @Test func deeplyNestedSourceIsASyntaxError() async throws {
        let source = "return " + String(repeating: "(", count: 5000) + "1" + String(repeating: ")", count: 5000)
        let error = try await expectFailure(.syntax, source)
        #expect(error?.chunkName == "hostile.lua")
    }

    @Test func recursionThroughPcallIsAnError() async throws {
        let error = try await expectFailure(.runtime, "local function f() local ok, e = pcall(f) error(e, 0) end\nf()")
        #expect(error?.message.contains("stack overflow") == true)
    }

    @Test func errorInsideXpcallHandlerChainDoesNotCrash() async throws {
        // Lua 5.4.4 can overflow its stack handling a C-stack overflow inside a message handler;
        // the sandbox's xpcall runs handlers after unwinding, so this is an ordinary error.
        _ = try await expectFailure(.runtime, "local function loop() assert(pcall(loop)) end\nlocal ok, e = xpcall(loop, loop)\nerror(e)")
    }
}
