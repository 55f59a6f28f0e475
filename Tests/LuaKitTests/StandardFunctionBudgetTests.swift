import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// Every function a script can reach is accounted for: it either does work bounded by what it is given (its
/// arguments, the stack, the memory cap — refused at once past them), or it holds the time budget itself (C loops
/// that read the clock, or Lua code, which the hook interrupts). A function added later that is not classified
/// here fails the first test, so it gets a look before it ships (issue "Nothing lost, second sweep", item 5).
@Suite struct StandardFunctionBudgetTests {
    /// Why a function cannot outlive the budget.
    enum Bound {
        /// Constant work, or work linear in its arguments (which are values already made).
        case arguments
        /// Work linear in a string or table the memory cap bounds, or in the stack (`unpack`, `byte`).
        case memory
        /// It reads the clock in its loops (`CLuaGuard`: patterns.c, strings.c, tables.c, format.c), hands Lua's
        /// parser a long chunk in pieces the hook can stop between (`load`, `loadfile`, `dofile`), or is the
        /// coroutine / protected-call machinery the budget is built into.
        case checksBudget
        /// Lua code (the sandbox's own), which the budget's hook interrupts; what it calls is classified here.
        case luaCode
    }

    static let classified: [String: Bound] = [
        "assert": .arguments, "collectgarbage": .memory, "dofile": .checksBudget, "error": .arguments, "getmetatable": .arguments,
        "ipairs": .arguments, "load": .checksBudget, "loadfile": .checksBudget, "next": .arguments, "pairs": .arguments,
        "pcall": .checksBudget, "print": .memory, "rawequal": .arguments, "rawget": .arguments, "rawlen": .arguments,
        "rawset": .arguments, "require": .memory, "select": .arguments, "setmetatable": .luaCode, "sortedpairs": .luaCode,
        "tonumber": .memory, "tostring": .memory, "type": .arguments, "warn": .arguments, "xpcall": .checksBudget,
        "coroutine.close": .checksBudget, "coroutine.create": .arguments, "coroutine.isyieldable": .arguments,
        "coroutine.resume": .checksBudget, "coroutine.running": .arguments, "coroutine.status": .arguments,
        "coroutine.wrap": .checksBudget, "coroutine.yield": .arguments, "package.searchpath": .luaCode,
        "debug.getinfo": .checksBudget, "debug.getmetatable": .arguments, "debug.traceback": .memory,
        "io.close": .arguments, "io.flush": .arguments, "io.input": .arguments, "io.lines": .arguments, "io.open": .arguments, "io.output": .arguments,
        "io.popen": .arguments, "io.read": .arguments, "io.tmpfile": .arguments, "io.type": .arguments, "io.write": .memory,
        "math.abs": .arguments, "math.acos": .arguments, "math.asin": .arguments, "math.atan": .arguments, "math.atan2": .arguments,
        "math.ceil": .arguments, "math.cos": .arguments, "math.cosh": .arguments, "math.deg": .arguments, "math.exp": .arguments,
        "math.floor": .arguments, "math.fmod": .arguments, "math.frexp": .arguments, "math.ldexp": .arguments, "math.log": .arguments,
        "math.log10": .arguments, "math.max": .arguments, "math.min": .arguments, "math.modf": .arguments, "math.pow": .arguments,
        "math.rad": .arguments, "math.random": .arguments, "math.randomseed": .arguments, "math.sin": .arguments,
        "math.sinh": .arguments, "math.sqrt": .arguments, "math.tan": .arguments, "math.tanh": .arguments,
        "math.tointeger": .arguments, "math.type": .arguments, "math.ult": .arguments,
        "string.byte": .memory, "string.char": .arguments, "string.dump": .memory, "string.find": .checksBudget, "string.format": .checksBudget,
        "string.gmatch": .checksBudget, "string.gsub": .checksBudget, "string.len": .arguments, "string.lower": .memory,
        "string.match": .checksBudget, "string.pack": .memory, "string.packsize": .memory, "string.rep": .checksBudget,
        "string.reverse": .memory, "string.sub": .memory, "string.unpack": .memory, "string.upper": .memory,
        "table.concat": .checksBudget, "table.insert": .checksBudget, "table.move": .checksBudget, "table.pack": .arguments,
        "table.remove": .checksBudget, "table.sort": .checksBudget, "table.unpack": .memory,
        "utf8.char": .arguments, "utf8.codepoint": .memory, "utf8.codes": .arguments, "utf8.len": .memory, "utf8.offset": .memory,
        "io.stdout:write": .memory, "io.stdout:flush": .arguments, "io.stdout:setvbuf": .arguments, "io.stdout:close": .arguments,
        "io.stdout:lines": .arguments, "io.stdout:read": .arguments, "io.stdout:seek": .arguments,
        // (`LuaLimits.system`: `luakit` and `luastore test`; a format is as long as the memory cap lets it be)
        "os.clock": .arguments, "os.date": .memory, "os.difftime": .arguments, "os.getenv": .arguments, "os.time": .arguments,
        "os.exit": .arguments, "os.execute": .arguments, "os.remove": .arguments, "os.rename": .arguments,
        "os.tmpname": .arguments, "os.setlocale": .arguments,
    ]

    /// The functions reachable from a script's environment: its globals and the tables in them, two levels down,
    /// and the methods of the output files — in a store's VM and in one given the system (`os`).
    @Test(arguments: [SystemAccess.none, .system]) func everyReachableFunctionIsClassified(system: SystemAccess) async throws {
        var limits = LuaLimits.unhurried
        limits.system = system
        let names = try await withVM(limits: limits) { vm throws -> [String] in
            let listed = try vm.run("""
                local seen, out = {}, {}
                local function walk(t, prefix, depth)
                  if seen[t] or depth > 2 then return end
                  seen[t] = true
                  for k, v in sortedpairs(t) do
                    if type(k) == "string" then
                      local name = prefix == "" and k or prefix .. "." .. k
                      if type(v) == "function" then out[#out + 1] = name
                      elseif type(v) == "table" then walk(v, name, depth + 1) end
                    end
                  end
                end
                walk(_G, "", 0)
                for _, method in ipairs({ "write", "flush", "setvbuf", "close", "lines", "read", "seek" }) do
                  if type(io.stdout[method]) == "function" then out[#out + 1] = "io.stdout:" .. method end
                end
                return table.concat(out, " ")
                """, chunkName: "walk.lua")
            return listed.first?.string?.split(separator: " ").map(String.init) ?? []
        }
        #expect(names.count > 90, "\(names)")
        let unclassified = names.filter { Self.classified[$0] == nil }
        #expect(unclassified.isEmpty, "reachable but not classified (does it hold the budget?): \(unclassified)")
        let gone = Self.classified.keys.filter { !names.contains($0) && !$0.hasPrefix("math.") && (system == .system || !$0.hasPrefix("os.")) }
        #expect(gone.isEmpty, "classified but no longer reachable: \(gone.sorted())")
    }

    /// What a `.memory` function is given past the cap is refused at once, and what the stack bounds is refused as
    /// Lua refuses it; the VM serves the next call.
    @Test(arguments: [
        "return #('x'):rep(1e8)", "return ('x'):rep(1e7):upper():lower():reverse():sub(2)", "return table.unpack({}, 1, 1e8)",
        "return ('x'):rep(1e7):byte(1, -1)", "return utf8.codepoint(('x'):rep(1e7), 1, -1)", "return string.pack(('i8'):rep(1e7))",
        "local t = {} for i = 1, 1e8 do t[i] = i end", "return table.sort(setmetatable({}, {__len = function() return 1e12 end}))",
    ])
    func whatTheMemoryCapOrTheStackBoundsIsRefusedAtOnce(source: String) async throws {
        var limits = LuaLimits()
        limits.memoryBytes = 16 << 20
        limits.timeBudget = .seconds(2)
        try await withVM(limits: limits) { vm throws in
            let started = ContinuousClock.now
            let error = luaError { _ = try vm.run(source, chunkName: "big.lua") }
            #expect(error != nil, "\(source)")
            #expect(ContinuousClock.now - started < .seconds(12), "\(source): \(String(describing: error))")
            #expect(try vm.run("return 1 + 1", chunkName: "after.lua") == [2])
        }
    }
}
