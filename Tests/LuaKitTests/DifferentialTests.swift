import Foundation
import LuaStoreTestSupport
import Testing

/// Debian's stock interpreter, where it is installed.
let stockLua = ["/usr/bin/lua5.4", "/usr/local/bin/lua5.4"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// Scripts run under the built `luakit` and under Debian's stock `lua5.4` (the reference for what Lua does) print
/// the same bytes. Each fixture folder under `Differential/` is a script and the files it reads.
@Suite(.enabled(if: stockLua != nil, "needs Debian's lua5.4 (scripts/bootstrap installs it)"))
struct DifferentialTests {
    static var fixtures: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Differential")
    }

    @Test(arguments: [("package", "probes.lua"), ("libraries", "libraries.lua"), ("coroutines", "coroutines.lua"), ("weak", "weak.lua"),
                       ("arguments", "arguments.lua"), ("argerrors", "argerrors.lua"), ("replaced", "replaced.lua"), ("load", "load.lua"),
                       ("errors", "errors.lua"), ("loops", "loops.lua"), ("os", "os.lua"), ("files", "files.lua"),
                       ("packagepath", "paths.lua"), ("packagepath", "searchers.lua"), ("debug", "getinfo.lua"),
                       ("levels", "levels.lua"), ("handles", "handles.lua")])
    func scriptsPrintWhatStockLuaPrints(folder: String, script: String) async throws {
        let directory = Self.fixtures.appendingPathComponent(folder)
        let stock = try await runChildProcess(URL(fileURLWithPath: stockLua!), [script], directory: directory)
        // (A budget no machine's load reaches: loading Penlight's modules takes ≈ 20 ms alone, far more under load.)
        let sandboxed = try await runChildProcess(LuakitToolTests.binary, [script, "--time-budget-ms", "60000"], directory: directory)
        #expect(stock.status == 0, "\(stock.errors)")
        #expect(sandboxed.status == 0, "\(sandboxed.errors)")
        #expect(sandboxed.output == stock.output)
        #expect(!stock.output.isEmpty)
    }

    /// A script run as `lua` runs one: what its main chunk returns is dropped; `io.stderr` and warnings go to the
    /// standard error; an uncaught error is printed as `lua` prints it — the message as raised (no position where
    /// `error(m, 0)` gave none), an error object's `__tostring` alone, "(error object is a T value)" — with the
    /// traceback, and the same exit status. Standard output, standard error (the program's name aside) and status
    /// compared with stock `lua5.4`'s, script by script.
    @Test(arguments: [
        "local M = {}\nfunction M.f() end\nreturn M, 1, nil",
        "io.stderr:write('diag ', 1, '\\n')\nwarn('@on')\nwarn('w', 2)\nprint('out')\nio.output(io.stderr):write('to stderr\\n')",
        "error('usage: prog <file>', 0)",
        "local function f() error('deep', 2) end\nf()",
        "error(setmetatable({}, { __tostring = function() return 'custom err' end }))",
        "error({ code = 1 })",
        "error(42)",
        "error()",
        "local t = nil\nreturn t.x",
        // (A builtin the sandbox writes in Lua fails as Lua's C builtins do: at the caller's line in a tail call,
        // the traceback naming it, none of the sandbox's own frames.)
        "local function f(x) return setmetatable(x, {}) end\nf(1)",
        "local co = coroutine.wrap(function() error('inside') end)\nco()",
        "local function g() local n = rawlen(5) return n end\ng()",
        "print(require())",
        "error('cut\\0here')",
    ])
    func aScriptEndsAsUnderLua(script: String) async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(script.utf8).write(to: folder.appendingPathComponent("main.lua"))
        let stock = try await runChildProcess(URL(fileURLWithPath: stockLua!), ["main.lua"], directory: folder)
        let sandboxed = try await runChildProcess(LuakitToolTests.binary, ["main.lua"], directory: folder)
        #expect(sandboxed.status == stock.status)
        #expect(sandboxed.output == stock.output)
        #expect(sandboxed.errors.replacingOccurrences(of: "luakit:", with: "lua:") == stock.errors.replacingOccurrences(of: stockLua! + ":", with: "lua:"))
    }

    /// A script gets every argument after its file, as `lua` gives them — ones that look like options, `-`, `--` —
    /// in `arg` and as `...`; luakit's own options before the file are luakit's (and after it, until a `--`).
    @Test(arguments: [["-v", "--verbose", "-", "x"], ["--", "--time-budget-ms", "5"], ["a", "--", "-h"], []])
    func aScriptGetsItsArgumentsAsUnderLua(arguments: [String]) async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("""
            print(select("#", ...), ...)
            print(#arg, arg[0], table.concat(arg, "|"))
            """.utf8).write(to: folder.appendingPathComponent("main.lua"))
        let stock = try await runChildProcess(URL(fileURLWithPath: stockLua!), ["main.lua"] + arguments, directory: folder)
        let sandboxed = try await runChildProcess(LuakitToolTests.binary, ["--time-budget-ms", "60000", "main.lua"] + arguments, directory: folder)
        #expect(sandboxed.status == 0 && stock.status == 0, "\(sandboxed.errors)")
        #expect(sandboxed.output == stock.output)
        // (luakit's option after the file, before any `--`, is luakit's.)
        let after = try await runChildProcess(LuakitToolTests.binary, ["main.lua", "--time-budget-ms", "60000"] + arguments, directory: folder)
        #expect(after.output == stock.output, "\(after.errors)")
    }

    /// The standard output as `lua` writes it: `print` writes its line out at once (Lua's flushes), `io.write` waits
    /// in the buffer until a flush, a `print` or the end — so what goes to both streams of one pipe (`2>&1`) comes
    /// out in `lua`'s order, an error's message included, and nothing is added to a last line without its end.
    @Test(arguments: [
        "print('a')\nio.stderr:write('E\\n')\nio.write('held ')\nio.stderr:write('F\\n')\nprint('b')\nio.write('partial')\nerror('x')",
        "io.write('one ')\nio.flush()\nio.stderr:write('two\\n')\nio.stdout:write('three ')\nio.stdout:flush()\nio.stderr:write('four\\n')",
        "io.stdout:setvbuf('no')\nio.write('unbuffered ')\nio.stderr:write('then\\n')\nio.write(1)",
    ])
    func theOutputInterleavesAsUnderLua(script: String) async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(script.utf8).write(to: folder.appendingPathComponent("main.lua"))
        let shell = URL(fileURLWithPath: "/bin/sh")
        let stock = try await runChildProcess(shell, ["-c", "'\(stockLua!)' main.lua 2>&1"], directory: folder)
        let sandboxed = try await runChildProcess(shell, ["-c", "'\(LuakitToolTests.binary.path)' main.lua 2>&1"], directory: folder)
        #expect(sandboxed.status == stock.status)
        #expect(sandboxed.output.replacingOccurrences(of: "luakit:", with: "lua:")
                == stock.output.replacingOccurrences(of: stockLua! + ":", with: "lua:"))
        #expect(!stock.output.isEmpty)
    }

    /// The standard input, as `lua` reads it: `io.read` in every format, `io.lines()`, `io.stdin` a file of its own
    /// (`io.type`, no writes), an empty input; stdout, stderr and status as stock `lua5.4`'s for the same input.
    @Test(arguments: ["hello\n42 7.5\nA\nB", "", "no newline at the end"])
    func theStandardInputReadsAsUnderLua(input: String) async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("""
            print(io.read("l"))
            print(io.read("n", "n"))
            for line in io.lines() do print("line", line) end
            print(io.read("a") == "", io.read("l"), io.read(0))
            print(io.type(io.stdin), io.input() == io.stdin, type(io.stdin), io.stdin:write("x"))
            """.utf8).write(to: folder.appendingPathComponent("main.lua"))
        let stock = try await runChildProcess(URL(fileURLWithPath: stockLua!), ["main.lua"], input: input, directory: folder)
        let sandboxed = try await runChildProcess(LuakitToolTests.binary, ["main.lua"], input: input, directory: folder)
        #expect(sandboxed.status == stock.status, "\(sandboxed.errors)")
        #expect(sandboxed.output == stock.output)
        #expect(!stock.output.isEmpty)
    }

    /// A C module stock Lua would load is refused, naming it; `--lua-path` (and `LUA_PATH`, `;;` the default)
    /// says where else modules come from, and nothing else is read.
    @Test func theModulePathIsLuasAndSourceOnly() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let shared = folder.appendingPathComponent("shared")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
        try Data("return { from = 'shared' }".utf8).write(to: shared.appendingPathComponent("helper.lua"))
        let script = folder.appendingPathComponent("main.lua")
        try Data("""
            local helper = require('helper')
            local ok, message = pcall(require, 'lfs')
            print(helper.from, message)
            """.utf8).write(to: script)
        let given = try await runChildProcess(LuakitToolTests.binary, [script.path, "--lua-path", shared.path + "/?.lua"])
        #expect(given.status == 0, "\(given.errors)")
        #expect(given.output.hasPrefix("shared\t"), "\(given.output)")
        let viaEnvironment = try await runChildProcess(LuakitToolTests.binary, [script.path],
                                                        environment: ["LUA_PATH_5_4": shared.path + "/?.lua;;"])
        #expect(viaEnvironment.output.hasPrefix("shared\t"), "\(viaEnvironment.output) \(viaEnvironment.errors)")
        if FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/lua/5.4/lfs.so") {
            #expect(viaEnvironment.output.contains("require: module 'lfs' is a C module (/usr/lib/x86_64-linux-gnu/lua/5.4/lfs.so); the sandbox loads Lua source only"))
        }
        let without = try await runChildProcess(LuakitToolTests.binary, [script.path, "--lua-path", "/nonexistent/?.lua"])
        #expect(without.status == 1)
        #expect(without.errors.contains("module 'helper' not found:\n\tno field package.preload['helper']\n\tno file './helper.lua'\n\tno file './helper/init.lua'\n\tno file '/nonexistent/helper.lua'\n"), "\(without.errors)")
    }
}
