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

    static var quick: LuaLimits {
        var limits = LuaLimits()
        limits.timeBudget = .milliseconds(100)
        limits.memoryBytes = 16 << 20
        return limits
    }

    /// Runs `source`, expects a failure of `kind`, then checks the VM still serves a normal call.
    func expectFailure(_ kind: LuaError.Kind, _ source: String, limits: LuaLimits = quick) async throws -> LuaError? {
        try await withVM(limits: limits) { vm throws in
            let error = luaError { _ = try vm.run(source, chunkName: "hostile.lua") }
            #expect(error?.kind == kind, "\(error.map(String.init(describing:)) ?? "no error")")
            #expect(try vm.run("local t = {} for i = 1, 100 do t[i] = i end return #t", chunkName: "after.lua") == [100])
            return error
        }
    }

    @Test func endlessLoopTimesOut() async throws {
        let error = try await expectFailure(.timeout, "local n = 0\nwhile true do n = n + 1 end")
        #expect(error?.message == "time budget of 100 ms exceeded")
        #expect(error?.location == "hostile.lua:2")
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
    ])
    func budgetCannotBeSwallowed(source: String) async throws {
        _ = try await expectFailure(.timeout, source)
    }

    @Test func deepLuaRecursionIsAnError() async throws {
        let error = try await expectFailure(.runtime, "local function f(n) return 1 + f(n + 1) end\nreturn f(1)",
                                            limits: { var l = Self.quick; l.memoryBytes = 64 << 20; l.timeBudget = .seconds(2); return l }())
        #expect(error?.message.contains("stack overflow") == true)
        #expect(error?.location == "hostile.lua:1")
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

    @Test func stringRepBeyondTwoGigabytesIsRefused() async throws {
        let error = try await expectFailure(.runtime, "return string.rep('x', 2^31)")
        #expect(error?.message == "resulting string too large")
    }

    @Test func stringRepBeyondTheCapIsAMemoryError() async throws {
        let error = try await expectFailure(.memory, "local s = string.rep('x', 2^30)\nreturn #s", limits: Self.memoryBound)
        #expect(error?.message == "not enough memory")
        #expect(error?.location == "hostile.lua:1")
    }

    @Test func unboundedTableGrowthIsAMemoryError() async throws {
        let error = try await expectFailure(.memory, "local t = {}\nlocal i = 0\nwhile true do i = i + 1; t[i] = {i} end",
                                            limits: Self.memoryBound)
        #expect(error?.location == "hostile.lua:3")
    }

    @Test func memoryErrorsCaughtByPcallStillLeaveAUsableVM() async throws {
        try await withVM(limits: Self.quick) { vm throws in
            let result = try vm.run("local ok, e = pcall(string.rep, 'x', 1 << 30); return ok, e", chunkName: "m.lua")
            #expect(result == [false, "not enough memory"])
            #expect(vm.memory.bytesInUse < Self.quick.memoryBytes / 2)
        }
    }

    @Test func stringConcatenationGrowthIsAMemoryError() async throws {
        _ = try await expectFailure(.memory, "local s = 'x'\nwhile true do s = s .. s end", limits: Self.memoryBound)
    }

    @Test func finalizerThatLoopsIsRefused() async throws {
        let error = try await expectFailure(.runtime, "setmetatable({}, {__gc = function() while true do end end})")
        #expect(error?.message.contains("__gc") == true)
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
        let error = try await expectFailure(.runtime, "error(string.rep('x', 10 * 1024 * 1024))", limits: LuaLimits())
        #expect((error?.message.utf8.count ?? .max) < 5000)
        #expect(error?.message.hasSuffix(" bytes in all)") == true)
        #expect(error?.message.hasPrefix("xxxx") == true)
    }

    @Test(arguments: [
        "local r = string.find(string.rep('a', 40), string.rep('a*', 30) .. 'b')",
        "local r = string.match(string.rep('a', 5000), '.-.-.-.-.-.-b')",
        "local r = string.gsub(string.rep('a', 3000), '(a*)*b', 'x')",
        "for w in string.gmatch(string.rep('ab', 2000), '(.-)(.-)(.-)(.-)c') do end",
        "local r = ('a'):rep(60):find(('a?'):rep(60) .. ('a'):rep(60) .. 'b')",
        "local ok = pcall(string.find, string.rep('a', 40), string.rep('a*', 30) .. 'b'); local x = 1",
    ])
    func pathologicalPatternsStopAtTheBudget(source: String) async throws {
        let error = try await expectFailure(.timeout, source)
        #expect(error?.location == "hostile.lua:1")
    }

    @Test func longPlainSearchesAreLinear() async throws {
        try await withVM(limits: Self.quick) { vm throws in
            let result = try vm.run("""
                local s = string.rep('a', 2000000)
                return s:find(string.rep('a', 100000) .. 'b', 1, true), s:find(string.rep('a', 1000), 1, true)
                """, chunkName: "plain.lua")
            #expect(result == [.nil, 1, 1000])
        }
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
