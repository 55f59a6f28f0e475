import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing
import LuaStoreConcurrency

/// What a script can and cannot reach.
@Suite struct SandboxTests {
    /// A missing library is a global nobody set, as in Lua: reading it gives nil, anywhere (a function probing for
    /// an optional library, `if jit then`, works).
    @Test(arguments: ["os", "utf8x", "arg", "jit"])
    func missingLibrariesAreNil(name: String) async throws {
        try await withVM { vm throws in
            #expect(try vm.run("local function probe()\n  return \(name)\nend\nreturn probe() == nil", chunkName: "probe.lua") == [true])
            #expect(try vm.run("return \(name) == nil, rawget(_G, '\(name)') == nil", chunkName: "probe.lua") == [true, true])
        }
    }

    /// `debug.getinfo` of a level deep in a deep stack walks the stack from its top for each level it counts (the
    /// frames a script is not shown are not counted), and stops at the time budget like any long work in C.
    @Test func getinfoDeepInADeepStackStopsAtTheBudget() async throws {
        var limits = LuaLimits.unhurried
        limits.timeBudget = .milliseconds(100)
        let error = try await withVM(limits: limits) { vm throws in
            luaError { _ = try vm.run("""
                local function down(n) if n == 0 then return debug.getinfo(150000, "l") end local info = down(n - 1) return info end
                return down(160000)
                """, chunkName: "deep.lua") }
        }
        #expect(error?.kind == .timeout, "\(String(describing: error))")
        #expect(error?.message == "time budget of 100 ms exceeded")
    }

    /// Of the debug library scripts get `traceback`, `getinfo` and `getmetatable` (past `__metatable` only for
    /// metatables scripts set: the host's stay protected), read-only (also through `require("debug")`).
    @Test func debugOffersTracebackGetinfoAndGetmetatable() async throws {
        try await withVM { vm throws in
            let results = try vm.run("""
                local function where() return debug.traceback("here", 1) end
                local names = {}
                for name in sortedpairs(debug) do names[#names + 1] = name end
                local mt = {}
                local plain = debug.getmetatable(setmetatable({}, mt)) == mt
                local lockedmt = { __metatable = "locked" }
                local locked = debug.getmetatable(setmetatable({}, lockedmt)) == lockedmt
                return where(), table.concat(names, ","), require("debug") == debug, debug.getlocal, debug.sethook,
                  plain, locked, debug.getmetatable(string) == getmetatable(string), debug.getmetatable(_ENV), debug.getmetatable("").__index == string
                """, chunkName: "trace.lua")
            #expect(results == ["here\nstack traceback:\n\ttrace.lua:1: in local 'where'\n\ttrace.lua:8: in main chunk",
                                "getinfo,getmetatable,traceback", true, nil, nil, true, true, true, false, true])
            let write = luaError { _ = try vm.run("debug.getregistry = function() end", chunkName: "w.lua") }
            #expect(write?.message == "cannot modify read-only table 'debug' (field 'getregistry')")
        }
    }

    @Test func osExitAndIoOpenFailWithoutHarm() async throws {
        try await withVM { vm throws in
            let exit = luaError { _ = try vm.run("os.exit(3)", chunkName: "exit.lua") }
            #expect(exit?.message == "attempt to index a nil value (global 'os')")
            let open = luaError { _ = try vm.run("local file = io.open('/etc/passwd')\nreturn file", chunkName: "open.lua") }
            #expect(open?.message == "io.open: not available in the sandbox (no files; io.write and print write to the output)")
            #expect(open?.location == "open.lua:1")
            // (The standard files stay open, as Lua's: closing one answers why not.)
            #expect(try vm.run("return io.stdout:close()", chunkName: "close.lua") == [nil, "cannot close standard file"])
            #expect(try vm.run("return io.close()", chunkName: "close.lua") == [nil, "cannot close standard file"])
            for call in ["io.popen('ls')", "io.read()", "io.lines('x')", "io.input('x')", "io.output('out.txt')",
                         "io.stdin:read()", "io.input():read()", "io.stdin:lines()"] {
                let refused = luaError { _ = try vm.run("return \(call)", chunkName: "io.lua") }
                #expect(refused?.message.contains(": not available in the sandbox (no files;") == true, "\(call): \(String(describing: refused))")
            }
            // (The standard output is open to write only: read, it answers as Lua's does.)
            #expect(try vm.run("return io.stdout:read()", chunkName: "read.lua") == [nil, "Bad file descriptor", 9])
            // (The standard files are there, as in Lua: the default input reads nothing, the default output is print's.)
            #expect(try vm.run("return io.type(io.stdin), io.input() == io.stdin, io.output() == io.stdout", chunkName: "std.lua")
                    == ["file", true, true])
            let write = luaError { _ = try vm.run("io.stdout.write = print", chunkName: "w.lua") }
            #expect(write?.message == "attempt to index a FILE* value (field 'stdout')", "a file is a userdata, as Lua's")
            #expect(try vm.run("return type(io.stdout), type(io.stdin), io.type(io.stderr)", chunkName: "t.lua") == ["userdata", "userdata", "file"])
            #expect(try vm.run("return 40 + 2", chunkName: "next.lua") == [42])
        }
    }

    /// Where the host gives the system (`LuaLimits.system`, as `luakit` and `luastore test` do), `os` is Lua's clock,
    /// dates and environment (the differential fixture `os` holds them to stock Lua), in a table as writable as
    /// Lua's; what would end or change the process, or touch files, raises naming the function, and the VM goes on.
    @Test func osWithTheSystemKeepsTheProcessWhole() async throws {
        var limits = LuaLimits.unhurried
        limits.system = .system
        try await withVM(limits: limits) { vm throws in
            #expect(try vm.run("return math.type(os.time()), os.date('!%Y', 0), require('os') == os", chunkName: "os.lua") == ["integer", "1970", true])
            for name in ["exit", "execute", "remove", "rename", "tmpname", "setlocale"] {
                let refused = luaError { _ = try vm.run("os.\(name)('x')", chunkName: "os.lua") }
                #expect(refused?.message == "os.\(name) is not available in the sandbox (a script may not end or change the process, nor touch files)")
                #expect(refused?.location == "os.lua:1")
            }
            // (Its tables are Lua's, as writable as in Lua: a spec stubs `os.time`, as luassert does.)
            #expect(try vm.run("local real = os.time; os.time = function() return 0 end; local stubbed = os.time(); os.time = real; return stubbed",
                               chunkName: "w.lua") == [0])
            #expect(try vm.run("return math.type(os.time())", chunkName: "next.lua") == ["integer"])
        }
        try await withVM { vm throws in // (by default: none, as a store has)
            let required = luaError { _ = try vm.run("return require('os')", chunkName: "os.lua") }
            #expect(required?.message.contains("module 'os' is not available in the sandbox") == true, "\(String(describing: required))")
        }
    }

    /// `io.write` and `io.stdout:write` write to the output `print` writes to, lines as they end; `warn` is off
    /// until "@on", as in the stand-alone `lua`.
    @Test func ioWriteAndWarnWriteToTheOutput() async throws {
        let lines = Protected<[String]>([])
        try await withVM(print: { line in lines.withLock { $0.append(line) } }) { vm throws in
            _ = try vm.run("""
                io.write("a", 1, " ", 2.5, " ", 3.0)
                print(" and print")
                io.stdout:write("two\\nlines"):write("\\n")
                warn("hidden"); warn("@on"); warn("shown ", 1); warn("@off"); warn("hidden")
                io.stderr:write("unfinished")
                """, chunkName: "write.lua")
        }
        #expect(lines.withLock { $0 } == ["a1 2.5 3 and print", "two", "lines", "Lua warning: shown 1", "unfinished"])
    }

    /// `string.dump` is Lua's (a function's bytecode, as a string: through the library and the string metatable);
    /// what it makes cannot be loaded back — scripts load source text only.
    @Test func stringDumpDumpsAndItsChunksAreRefused() async throws {
        try await withVM { vm throws in
            let dumped = try vm.run("""
                local f = function(a, b) return a + b end
                local bytes = string.dump(f)
                return bytes:sub(1, 4) == "\\27Lua", ("").dump == string.dump, #string.dump(f, true) <= #bytes, load(bytes)
                """, chunkName: "dump.lua")
            #expect(dumped == [true, true, true, .nil, "attempt to load a binary chunk (scripts load source text only)"])
            let notAFunction = luaError { _ = try vm.run("return string.dump(string.len)", chunkName: "dump.lua") }
            #expect(notAFunction?.message == "unable to dump given function", "\(String(describing: notAFunction))")
            #expect(try vm.run("return getmetatable('').__index == string", chunkName: "meta.lua") == [true])
            let write = luaError { _ = try vm.run("getmetatable('').__index = {}", chunkName: "meta.lua") }
            #expect(write?.message == "cannot modify read-only table 'the string metatable' (field '__index')")
        }
    }

    /// Globals are Lua's: assigning one sets it (`x = …`, `_G.x = …`, `rawset(_G, …)`, `function f() end`, and
    /// `load`'s chunks too), the namespace's chunks see it, `pairs(_G)` and `next` list it, and reading one nobody
    /// set is nil (an arithmetic on it fails with Lua's own words).
    @Test func globalsAreLuas() async throws {
        try await withVM { vm throws in
            _ = try vm.run("local x = 1\ncounter = x\n_G.other = 2\nrawset(_G, 'third', 3)\nfunction helper() return 4 end\nload('fifth = 5')()",
                           chunkName: "app.lua")
            #expect(try vm.run("return counter, other, third, helper(), fifth, rawget(_G, 'counter'), _G == _ENV", chunkName: "next.lua")
                    == [1, 2, 3, 4, 5, 1, true])
            #expect(try vm.run("""
                local seen = {}
                for name, value in pairs(_G) do if name == "counter" or name == "print" then seen[name] = type(value) end end
                local k, n = nil, 0
                repeat k = next(_G, k); if k == "third" then n = n + 1 end until k == nil
                counter = nil
                return seen.counter, seen.print, n, counter, rawget(_G, "counter")
                """, chunkName: "walk.lua") == ["number", "function", 1, .nil, .nil])
            let read = luaError { _ = try vm.run("local function f()\n  return missing + 1\nend\nreturn f()", chunkName: "app.lua") }
            #expect(read?.message == "attempt to perform arithmetic on a nil value (global 'missing')")
            #expect(read?.location == "app.lua:2")
        }
    }

    /// Once locked (as a store locks its VM when its app has loaded), a global is set only while a module loads —
    /// a `require` inside a function too; anywhere else the assignment fails naming its line, whatever its form,
    /// and changes nothing. Reading stays as it was.
    @Test func lockedGlobalsAreSetOnlyAsModulesLoad() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("loadedAt = (loadedAt or 0) + 1\nfunction fromModule() return 'module' end\nreturn {}".utf8)
            .write(to: folder.appendingPathComponent("setter.lua"))
        try await withVM(moduleRoot: folder) { vm throws in
            _ = try vm.run("before = 1", chunkName: "app.lua")
            try vm.lockGlobals()
            for (line, statement) in ["before = 2", "fresh = 1", "_G.fresh = 1", "rawset(_G, 'fresh', 1)", "function fresh() end",
                                      "load('fresh = 1')()", "before = nil"].enumerated() {
                let error = luaError { _ = try vm.run(String(repeating: "\n", count: line) + statement, chunkName: "reduce.lua") }
                #expect(error?.message.hasPrefix("cannot set global '\(statement.contains("before") ? "before" : "fresh")' while the store runs") == true,
                        "\(statement): \(String(describing: error))")
                #expect(error?.location == (statement.hasPrefix("load") ? "[string \"fresh = 1\"]:1" : "reduce.lua:\(line + 1)"),
                        "\(statement): \(String(describing: error))")
            }
            #expect(try vm.run("return before, fresh, (function() return require('setter') and fromModule() end)(), loadedAt",
                               chunkName: "reduce.lua") == [1, .nil, "module", 1])
        }
    }

    /// A namespace may ask for strict globals (`strict.lua`'s rule): a function that reads a global nobody set or
    /// assigns a new one fails naming it; its chunks' top level may do both; another namespace is not strict.
    @Test func aNamespaceMayAskForStrictGlobals() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("""
            declared = 1
            local probe = maybe -- (the top level may probe)
            return {
              read = function() return missing end,
              write = function() brandNew = 1 end,
              known = function() declared = declared + 1; return declared end,
            }
            """.utf8).write(to: folder.appendingPathComponent("strictmod.lua"))
        try await withVM(moduleRoot: folder) { vm throws in
            let strict = try vm.require("strictmod", in: try vm.makeNamespace(strictGlobals: true))
            let read = luaError { _ = try vm.call(try #require(try vm.field("read", of: strict))) }
            #expect(read?.message == "undeclared global 'missing'")
            #expect(read?.location == "strictmod.lua:4")
            let write = luaError { _ = try vm.call(try #require(try vm.field("write", of: strict))) }
            #expect(write?.message == "assignment to undeclared global 'brandNew' (declare it with 'local')")
            #expect(try vm.call(try #require(try vm.field("known", of: strict))) == [2])
            let plain = try vm.require("strictmod", in: try vm.makeNamespace())
            #expect(try vm.call(try #require(try vm.field("read", of: plain))) == [.nil])
        }
    }

    /// After `sealRawWrites`, `rawset` refuses tables whose `__metatable` is the marker (they change only
    /// through their metamethods); other tables, protected or not, are unaffected.
    @Test func sealedTablesRefuseRawset() async throws {
        try await withVM { vm throws in
            try vm.sealRawWrites(metatableMarker: "host state")
            let error = luaError { _ = try vm.run("""
                local writes = 0
                local t = setmetatable({}, { __metatable = "host state", __newindex = function() writes = writes + 1 end })
                t.x = 1
                rawset(t, "y", 2)
                """, chunkName: "sealed.lua") }
            #expect(error?.message == "rawset: this table can be changed only by assignment (it is a host state)")
            #expect(error?.location == "sealed.lua:4")
            #expect(try vm.run("""
                local other = setmetatable({}, { __metatable = "something else" })
                rawset(other, "y", 2)
                local plain = {}
                rawset(plain, "z", 3)
                return rawget(other, "y") + plain.z
                """, chunkName: "open.lua") == [5])
        }
    }

    /// In a store a library takes additions, never replacements: assigning or `rawset`ting a standard function
    /// another value, or removing it, is refused naming it and the line; a new field, or a field assigned the value
    /// it has, is the namespace's; the metatable stays the host's.
    @Test func libraryTablesTakeAdditionsNotReplacements() async throws {
        try await withVM { vm throws in
            let assign = luaError { _ = try vm.run("string.upper = function() return 'pwned' end", chunkName: "t.lua") }
            #expect(assign?.message.hasPrefix("cannot replace string.upper: Lua's standard functions stay as they are in a store") == true)
            #expect(assign?.location == "t.lua:1")
            let raw = luaError { _ = try vm.run("rawset(string, 'upper', print)", chunkName: "t.lua") }
            #expect(raw?.message.hasPrefix("cannot replace string.upper:") == true)
            #expect(raw?.location == "t.lua:1")
            let removed = luaError { _ = try vm.run("\ntable.insert = nil", chunkName: "t.lua") }
            #expect(removed?.message.hasPrefix("cannot remove table.insert:") == true)
            #expect(removed?.location == "t.lua:2")
            #expect(try vm.run("math.tau = 6.28; math.pi = math.pi; rawset(math, 'e', 2.72); return math.tau, rawget(math, 'e'), ('x'):upper()",
                               chunkName: "t.lua") == [6.28, 2.72, "X"])
            let meta = luaError { _ = try vm.run("setmetatable(table, {})", chunkName: "t.lua") }
            #expect(meta?.message == "cannot change the metatable of a read-only table")
            #expect(try vm.run("return getmetatable(string)", chunkName: "t.lua") == [false])
        }
    }

    /// A namespace may replace its own globals (`string = …`, as in Lua), never the libraries themselves: method
    /// calls on strings and every other namespace keep Lua's.
    @Test func oneScriptCannotDamageWhatTheNextSees() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("return string.upper('ok')".utf8).write(to: folder.appendingPathComponent("other.lua"))
        try await withVM(moduleRoot: folder) { vm throws in
            _ = try vm.run("""
                string = { upper = function() return 'pwned' end }
                """, chunkName: "evil.lua")
            _ = try? vm.run("pcall(rawset, getmetatable('').__index, 'upper', print); pcall(function() getmetatable('').__index.upper = nil end)",
                            chunkName: "evil2.lua")
            #expect(try vm.run("return string.upper('ok'), ('ok'):upper()", chunkName: "next.lua") == ["pwned", "OK"])
            #expect(try vm.value(of: try vm.require("other", in: try vm.makeNamespace())) == "OK")
        }
    }

    /// The chunks of one namespace share its globals, as Lua's share `_G`; another namespace has its own.
    @Test func chunksOfANamespaceShareItsGlobals() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("return { shared = shared, print = type(print) }".utf8).write(to: folder.appendingPathComponent("reader.lua"))
        try await withVM(moduleRoot: folder) { vm throws in
            _ = try vm.run("rawset(_ENV, 'shared', 42); print = nil", chunkName: "a.lua")
            #expect(try vm.run("return (function() return shared end)(), type(print), _G == _ENV", chunkName: "b.lua") == [42, "nil", true])
            #expect(try vm.value(of: try vm.require("reader")) == ["shared": 42, "print": "nil"])
            #expect(try vm.value(of: try vm.require("reader", in: try vm.makeNamespace())) == ["print": "function"])
        }
    }

    /// A finalizer stays in its metatable but never runs (it would run where no budget can stop it, when the
    /// collector decides), however `__gc` got there; weak tables are weak as in Lua by default.
    @Test func finalizersNeverRunAndWeakTablesAreWeak() async throws {
        try await withVM { vm throws in
            let results = try vm.run("""
                local runs = 0
                local mt = { __gc = function() runs = runs + 1 end }
                local object = setmetatable({}, mt)
                local late = setmetatable({}, {})
                rawset(getmetatable(late), '__gc', function() runs = runs + 1 end)
                object, late = nil, nil
                for i = 1, 3 do collectgarbage() end
                local weak = setmetatable({}, { __mode = 'v' })
                weak[1] = {}
                collectgarbage()
                return runs, type(mt.__gc), weak[1]
                """, chunkName: "gc.lua")
            #expect(results == [0, "function", nil])
            #expect(try vm.run("return setmetatable({}, {__index = {x = 1}}).x", chunkName: "ok.lua") == [1])
        }
    }

    /// Where weak tables are kept strong (a scripted store's VM), `__mode` is taken out of a metatable
    /// `setmetatable` is given, `rawset` refuses to write it, entries survive collections, and `stop`/`restart`
    /// only change what `isrunning` answers.
    @Test func weakTablesKeptStrong() async throws {
        var limits = LuaLimits()
        limits.weakTables = .keptStrong
        try await withVM(limits: limits) { vm throws in
            let results = try vm.run("""
                local weak = setmetatable({}, { __mode = 'kv' })
                weak[1] = {}
                weak[{}] = true
                collectgarbage()
                local keys = 0
                for _ in pairs(weak) do keys = keys + 1 end
                local stopped = collectgarbage('stop')
                local running = collectgarbage('isrunning')
                collectgarbage('restart')
                return type(weak[1]), keys, getmetatable(weak).__mode, stopped, running, collectgarbage('isrunning')
                """, chunkName: "strong.lua")
            #expect(results == ["table", 2, nil, 0, false, true])
            let raw = luaError { _ = try vm.run("local mt = {}; setmetatable({}, mt); rawset(mt, '__mode', 'k')", chunkName: "raw.lua") }
            #expect(raw?.message == "rawset: '__mode' fields are not available here (weak tables are kept strong: LuaLimits.weakTables)")
            #expect(raw?.location == "raw.lua:1")
            _ = try vm.run("collectgarbage('stop')", chunkName: "stop.lua")
            #expect(vm.isCollectorRunning)
        }
    }

    /// `load` is Lua's (strings, reader functions, modes, environments: `DifferentialTests`' `load.lua`), except
    /// that a binary chunk is refused whatever the mode.
    @Test func loadIsLuasButRefusesBinaryChunks() async throws {
        try await withVM { vm throws in
            #expect(try vm.run("return load('return 1 + 1')()", chunkName: "load.lua") == [2])
            #expect(try vm.run("local f, e = load('\\27Lua'); return f, e", chunkName: "load.lua")
                == [.nil, "attempt to load a binary chunk (scripts load source text only)"])
            #expect(try vm.run("local f, e = load('\\27Lua', 'x', 't'); return f, e", chunkName: "load.lua")
                == [.nil, "attempt to load a binary chunk (mode is 't')"])
            let pieces = "local p = {'\\27', 'Lua'}; local i = 0; return load(function() i = i + 1; return p[i] end)"
            #expect(try vm.run(pieces, chunkName: "load.lua") == [.nil, "attempt to load a binary chunk (scripts load source text only)"],
                    "a reader's binary chunk too")
            #expect(try vm.run("local f, e = load('return 1', 'x', 'b'); return f, e", chunkName: "load.lua")
                == [.nil, "attempt to load a text chunk (mode is 'b')"])
            #expect(try vm.run("return load('return 2', 'x', 'bt')()", chunkName: "load.lua") == [2])
            let read = "local p = {'return ', 40, ' + 2'}; local i = 0; return load(function() i = i + 1; return p[i] end)()"
            #expect(try vm.run(read, chunkName: "load.lua") == [42])
            #expect(try vm.run("load('x = 1')() return x", chunkName: "load.lua") == [1], "a loaded chunk sets the namespace's globals")
        }
    }

    @Test func binaryChunksAreRefusedBeforeParsing() async throws {
        try await withVM { vm throws in
            let error = luaError { _ = try vm.load("\u{1B}Lua\u{54}\u{00}garbage", chunkName: "evil.luac") }
            #expect(error?.kind == .binaryChunk)
            #expect(error?.chunkName == "evil.luac")
        }
    }

    /// Scripts may collect, step, count, stop, restart and ask whether the collector runs, as in Lua; its mode
    /// and its tuning are the host's (the mode names answer which mode it is, and leave it).
    @Test func collectgarbageDoesWhatScriptsMayAsk() async throws {
        try await withVM { vm throws in
            let results = try vm.run("""
                local before = collectgarbage('count')
                local garbage = {}
                for i = 1, 10000 do garbage[i] = { i } end
                garbage = nil
                local full = collectgarbage()
                local collected = collectgarbage('collect')
                local step = collectgarbage('step', 0)
                return type(before), full, collected, type(step), collectgarbage('isrunning'), collectgarbage('generational'), collectgarbage('incremental')
                """, chunkName: "gc.lua")
            #expect(results == ["number", 0, 0, "boolean", true, "generational", "generational"])
            for option in ["'setpause'", "'setstepmul'"] {
                let error = luaError { _ = try vm.run("collectgarbage(\(option))", chunkName: "gc.lua") }
                #expect(error?.message.hasPrefix("collectgarbage: \(option) is the host's to decide") == true, "\(String(describing: error))")
            }
            #expect(try vm.run("return collectgarbage('stop'), collectgarbage('isrunning')", chunkName: "gc.lua") == [0, false])
            #expect(!vm.isCollectorRunning)
            #expect(try vm.run("return collectgarbage('restart'), collectgarbage('isrunning')", chunkName: "gc.lua") == [0, true])
            let invalid = luaError { _ = try vm.run("collectgarbage('frobnicate')", chunkName: "gc.lua") }
            #expect(invalid?.message == "bad argument #1 to 'collectgarbage' (invalid option 'frobnicate')")
            #expect(invalid?.location == "gc.lua:1")
            #expect(vm.isCollectorRunning)
        }
    }

    /// `tostring` of a table, function, userdata or thread gives, where Lua gives its address, an identity: a number
    /// each object keeps while it lives, in the order objects are first shown — distinct per object, the same on
    /// every run (a serializer that names tables by `tostring` names two tables apart).
    @Test func identitiesNotAddressesInResults() async throws {
        try await withVM { vm throws in
            let results = try vm.run("""
                local t, u = {}, {}
                return tostring(t), tostring(print), string.format('%s|%s|%s', t, 1.5, u), tostring(setmetatable({}, {__name = 'Point'})), tostring(t)
                """, chunkName: "addr.lua")
            #expect(results == ["table: 0x00000000000001", "function: 0x00000000000002", "table: 0x00000000000001|1.5|table: 0x00000000000003",
                                "Point: 0x00000000000004", "table: 0x00000000000001"])
            let pointer = luaError { _ = try vm.run("return string.format('%p', {})", chunkName: "addr.lua") }
            #expect(pointer?.message == "bad argument #2 to 'format' ('%p' is not available to scripts)")
            #expect(try vm.run("return tostring(setmetatable({}, {__tostring = function() return 'custom' end}))", chunkName: "t.lua") == ["custom"])
        }
    }

    @Test func printGoesToTheHost() async throws {
        let lines = LinesBox()
        try await withVM(print: { lines.append($0) }) { vm throws in
            _ = try vm.run("print('a', 1, nil, true, {})", chunkName: "p.lua")
        }
        #expect(lines.values == ["a\t1\tnil\ttrue\ttable: 0x00000000000001"])
    }

    @Test func sortedpairsIteratesInKeyOrder() async throws {
        try await withVM { vm throws in
            let result = try vm.run("""
                local out = {}
                for k, v in sortedpairs({b = 2, a = 1, [3] = 'c', [1] = 'a', [true] = 't', [2.5] = 'x'}) do
                  out[#out + 1] = tostring(k) .. '=' .. tostring(v)
                end
                return table.concat(out, ' ')
                """, chunkName: "sorted.lua")
            #expect(result == ["true=t 1=a 2.5=x 3=c a=1 b=2"])
            let error = luaError { _ = try vm.run("for k in sortedpairs({[{}] = 1}) do end", chunkName: "s.lua") }
            #expect(error?.message == "sortedpairs: keys of type table have no order")
        }
    }

    @Test func randomnessIsSeededAndNeedsExplicitSeeds() async throws {
        let first = try await withVM { vm in try vm.run("return math.random(1, 1000000), math.random()", chunkName: "r.lua") }
        let second = try await withVM { vm in try vm.run("return math.random(1, 1000000), math.random()", chunkName: "r.lua") }
        #expect(first == second)
        let error = try await withVM { vm in luaError { _ = try vm.run("math.randomseed()", chunkName: "r.lua") } }
        #expect(error?.message == "bad argument #1 to 'randomseed' (scripts must give a seed)")
    }
}

/// Lines collected from another thread.
final class LinesBox: Sendable {
    private let lines = Protected<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var values: [String] { lines.withLock { $0 } }
}
