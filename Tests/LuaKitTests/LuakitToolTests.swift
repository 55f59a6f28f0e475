import Foundation
import LuaStoreConcurrency
import LuaStoreTestSupport
import Subprocess
import SystemPackage
import Testing

/// The `luakit` tool, run as a built binary.
@Suite struct LuakitToolTests {
    /// The built `luakit`, next to the test binary in the build folder.
    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("luakit")
    }

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// Runs `luakit` with the tests' environment (a default time budget no loaded machine runs out of: the tour
    /// ran out of 200 ms once beside busy loops), and `environment` over it.
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> ChildProcessResult {
        try await runChildProcess(binary, arguments, directory: packageRoot,
                                  environment: CLI.environment.merging(environment) { $1 })
    }

    /// The script gets its arguments as `lua` gives them: as `...` and in the global `arg` (`arg[0]` the file,
    /// `arg[-1]` the interpreter); luakit's own options may come before them, and after `--` (the script's too, as
    /// `lua` passes it on) all are the script's.
    @Test func theScriptGetsItsArguments() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("args.lua")
        try Data("local a, b = ...\nprint(#arg, arg[0] == '\(script.path)', arg[-1], a, b, arg[2], select('#', ...))\nreturn 'dropped', function() end".utf8).write(to: script)
        let run = try await Self.run([script.path, "--time-budget-ms", "500", "one", "--", "--two", "three"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "4\ttrue\tluakit\tone\t--\t--\t4\n", "what the main chunk returns is dropped, as `lua` drops it: \(run.output)")
    }

    /// Writing to a pipe whose reader is slow waits, as `lua` waits, and the wait is not the script's time: 500 KB
    /// into a pipe read only after 2 s, with a budget of 300 ms (its wall-clock backstop 1.5 s), all arrive.
    @Test func aSlowReaderIsWaitedForOutsideTheBudget() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("for i = 1, 5000 do print(('x'):rep(100)) end\nio.write('end\\n')".utf8).write(to: folder.appendingPathComponent("main.lua"))
        let run = try await runChildProcess(URL(fileURLWithPath: "/bin/sh"), [
            "-c", "'\(Self.binary.path)' --time-budget-ms 300 main.lua | (sleep 2; wc -l); echo \"status ${PIPESTATUS:-0}\"",
        ], directory: folder)
        #expect(run.output.hasPrefix("5001\n"), "\(run.output)\(run.errors)")
        #expect(run.errors.isEmpty, "\(run.errors)")
    }

    /// A runaway recursion ends as `lua`'s does — Lua's "stack overflow", within a heap of luakit's default size —
    /// or at the time budget, promptly: the budget's signal, once per deadline, never starves a deep stack (a signal
    /// each tick marked 500,000 frames each time, and the script ran for minutes).
    @Test func aRunawayRecursionEndsPromptly() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("""
            local function r() return 1 + r() end
            print(pcall(r))
            local function deep(n) local a, b, c = n, n, n return deep(n + 1) + a end
            print(pcall(deep, 1))
            r()
            """.utf8).write(to: folder.appendingPathComponent("main.lua"))
        // (The CPU time the run took — the shell's `times`, its children's user and system time — which a loaded
        // machine does not stretch as it stretches the wall clock.)
        let run = try await runChildProcess(URL(fileURLWithPath: "/bin/bash"), [
            "-c", "'\(Self.binary.path)' --time-budget-ms 150 main.lua; echo \"status $?\"; times",
        ], directory: folder, timeout: .seconds(120))
        #expect(run.output.contains("status 1"), "\(run.output)\(run.errors)")
        #expect(run.errors.contains("stack overflow") || run.errors.contains("time budget of 150 ms exceeded"), "\(run.errors)")
        #expect(!run.output.contains("not enough memory"), "\(run.output)")
        // (`times`' second line: the children's user and system time, as "0m0.184s 0m0.052s".)
        let seconds = run.output.split(separator: "\n").last.map { line in
            line.split(separator: " ").compactMap { part -> Double? in
                guard let m = part.firstIndex(of: "m"), let minutes = Double(part[..<m]) else { return nil }
                return Double(part[part.index(after: m)...].dropLast()).map { minutes * 60 + $0 }
            }.reduce(0, +)
        } ?? .infinity
        #expect(seconds < 10, "\(run.output)") // (0.2 s of CPU here; 29 s while each tick marked the stack)
    }

    /// The script is read as bytes, as `lua` reads a source file: a string literal may hold bytes that are not
    /// UTF-8 text (an invalid sequence, a lone continuation byte, Latin-1), and a file that is not there is named.
    @Test func theScriptIsReadAsBytes() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("bytes.lua")
        try Data("local s = \"".utf8 + [0xFF, 0xFE, 0x80, 0xE9] + "\"\nprint(#s, s:byte(1, -1))".utf8).write(to: script)
        let run = try await Self.run([script.path])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "4\t255\t254\t128\t233\n", "\(run.output)")
        let missing = try await Self.run([folder.appendingPathComponent("absent.lua").path])
        #expect(missing.status == 1, "as `lua`'s")
        #expect(missing.errors == "luakit: cannot open \(folder.appendingPathComponent("absent.lua").path): No such file or directory\n")
    }

    @Test func runsTheTourSample() async throws {
        let run = try await Self.run(["samples/tour/tour.lua"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == """
            hello from tour, inside the sandbox
            apples 5, figs   0, pears  3 | THE QUICK BROWN FOX | globals as in Lua | process kept whole

            """)
        #expect(run.errors.isEmpty)
    }

    @Test func reportsScriptErrorsWithFileAndLine() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("loop.lua")
        try Data("local n = 0\nwhile true do n = n + 1 end\n".utf8).write(to: script)
        // (A budget the loop alone spends: 50 ms ran out once before the loop began, beside busy loops.)
        let run = try await Self.run([script.path, "--time-budget-ms", "400"])
        #expect(run.status == 1)
        #expect(run.errors == "luakit: \(script.path):2: time budget of 400 ms exceeded\nstack traceback:\n\t\(script.path):2: in main chunk\n\t[C]: in ?\n") // (the chunk named as given, as `lua` names it; the C frame it was called through last, as `lua` shows it)
        #expect(run.output.isEmpty)
    }

    /// Runs `executable` with `arguments` in `folder`, sending it `SIGINT` each time its output has one more
    /// `ready` line (up to `interrupts`); what it wrote, and how it ended. Every wait bounded (60 s, then SIGKILL).
    static func interrupting(_ executable: String, _ arguments: [String], in folder: URL, interrupts: Int) async throws
        -> (output: String, errors: String, status: Int32, bySignal: Bool) {
        let name = UUID().uuidString
        let outputFile = folder.appendingPathComponent("output-\(name)"), errorFile = folder.appendingPathComponent("errors-\(name)")
        func open(_ file: URL) throws -> FileDescriptor {
            try FileDescriptor.open(FilePath(file.path), .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
        }
        func written() -> String { (try? String(contentsOf: outputFile, encoding: .utf8)) ?? "" }
        let result = try await Subprocess.run(
            .path(FilePath(executable)), arguments: Arguments(arguments),
            environment: .inherit.updating(Dictionary(uniqueKeysWithValues: CLI.environment.map { (Environment.Key(stringLiteral: $0.key), Optional($0.value)) })),
            workingDirectory: FilePath(folder.path),
            input: .none, output: .fileDescriptor(try open(outputFile), closeAfterSpawningProcess: true),
            error: .fileDescriptor(try open(errorFile), closeAfterSpawningProcess: true)
        ) { execution in
            let deadline = ContinuousClock.now + .seconds(60)
            let process = execution.processIdentifier.value
            /// Whether the child still runs (a zombie does not).
            func running() -> Bool {
                guard let stat = try? String(contentsOfFile: "/proc/\(process)/stat", encoding: .utf8),
                      let close = stat.lastIndex(of: ")") else { return false }
                return stat[stat.index(close, offsetBy: 2)] != "Z"
            }
            for sent in 1...interrupts {
                while written().components(separatedBy: "ready\n").count - 1 < sent, running(), ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(20))
                }
                try await Task.sleep(for: .milliseconds(100)) // (into the loop after `ready`)
                try? execution.send(signal: .interrupt)
            }
            while running(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            if running() { try? execution.send(signal: .kill) }
        }
        let errors = (try? String(contentsOf: errorFile, encoding: .utf8)) ?? ""
        return switch result.terminationStatus {
        case .exited(let code): (written(), errors, code, false)
        case .signaled(let signal): (written(), errors, signal, true)
        }
    }

    /// Ctrl-C stops a script as it stops `lua`'s: `interrupted!` with the script's traceback, exit status 1; a
    /// `pcall` catches it as any error, and the next Ctrl-C ends the process. Compared with stock `lua5.4`.
    @Test(.startsChildProcesses, .enabled(if: stockLua != nil, "needs Debian's lua5.4")) func ctrlCInterruptsAsLuaDoes() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("print('ready')\nlocal n = 0\nwhile true do n = n + 1 end\n".utf8).write(to: folder.appendingPathComponent("loop.lua"))
        try Data("""
            print('ready')
            local ok, message = pcall(function() local n = 0 while true do n = n + 1 end end)
            print('caught', ok, message)
            print('ready')
            while true do end
            """.utf8).write(to: folder.appendingPathComponent("caught.lua"))
        for (script, interrupts) in [("loop.lua", 1), ("caught.lua", 2)] {
            let stock = try await Self.interrupting(stockLua!, [script], in: folder, interrupts: interrupts)
            let ours = try await Self.interrupting(Self.binary.path, ["--time-budget-ms", "60000", script], in: folder, interrupts: interrupts)
            #expect(ours.output == stock.output, "\(script)")
            #expect(ours.errors == stock.errors.replacingOccurrences(of: "\(stockLua!): ", with: "luakit: "), "\(script)")
            #expect(ours.status == stock.status && ours.bySignal == stock.bySignal, "\(script): \(ours) against \(stock)")
        }
        let stopped = try await Self.interrupting(Self.binary.path, ["--time-budget-ms", "60000", "loop.lua"], in: folder, interrupts: 1)
        #expect(stopped.errors == "luakit: interrupted!\nstack traceback:\n\tloop.lua:3: in main chunk\n\t[C]: in ?\n")
        #expect(stopped.status == 1 && !stopped.bySignal)
    }

    /// A module found through a module-path template is named as Lua names it — the file the template made
    /// (`lua/m.lua`), in errors, tracebacks and `require`'s second result — and one of the script's folder `./m.lua`.
    @Test(.startsChildProcesses, .enabled(if: stockLua != nil, "needs Debian's lua5.4")) func modulesAreNamedAsTheirTemplatesMadeThem() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("lua"), withIntermediateDirectories: true)
        let module = "local M = {}\nfunction M.f() error('boom') end\nreturn M\n"
        try Data(module.utf8).write(to: folder.appendingPathComponent("lua/m.lua"))
        try Data(module.utf8).write(to: folder.appendingPathComponent("here.lua"))
        try Data("""
            local m, where = require("m")
            print(where, pcall(m.f))
            local h, there = require("here")
            print(there, pcall(h.f))
            print((select(2, xpcall(m.f, debug.traceback))))
            """.utf8).write(to: folder.appendingPathComponent("main.lua"))
        let environment = ["LUA_PATH": "lua/?.lua;;"]
        let stock = try await runChildProcess(URL(fileURLWithPath: stockLua!), ["main.lua"], directory: folder, environment: environment)
        let ours = try await runChildProcess(Self.binary, ["main.lua"], directory: folder,
                                             environment: CLI.environment.merging(environment) { $1 })
        #expect(stock.status == 0 && ours.status == 0, "\(stock.errors)\(ours.errors)")
        #expect(ours.output == stock.output)
        #expect(ours.output.hasPrefix("lua/m.lua\tfalse\tlua/m.lua:2: boom\n./here.lua\tfalse\t./here.lua:2: boom\n"), "\(ours.output)")
    }

    /// `LUASTORE_TIME_BUDGET_MS` sets the default budget, as for `luastore`; the option wins, and a variable that
    /// is not a budget is refused.
    @Test func theBudgetsDefaultComesFromTheEnvironment() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("loop.lua")
        try Data("local n = 0\nwhile true do n = n + 1 end\n".utf8).write(to: script)
        let byVariable = try await Self.run([script.path], environment: ["LUASTORE_TIME_BUDGET_MS": "300"])
        #expect(byVariable.status == 1)
        #expect(byVariable.errors == "luakit: \(script.path):2: time budget of 300 ms exceeded\nstack traceback:\n\t\(script.path):2: in main chunk\n\t[C]: in ?\n")
        let byOption = try await Self.run([script.path, "--time-budget-ms", "400"], environment: ["LUASTORE_TIME_BUDGET_MS": "300"])
        #expect(byOption.errors == "luakit: \(script.path):2: time budget of 400 ms exceeded\nstack traceback:\n\t\(script.path):2: in main chunk\n\t[C]: in ?\n")
        let refused = try await Self.run([script.path], environment: ["LUASTORE_TIME_BUDGET_MS": "soon"])
        #expect(refused.status == 2)
        #expect(refused.errors == "luakit: LUASTORE_TIME_BUDGET_MS must be a number of milliseconds above 0 and at most 1000000000000 (it is \"soon\")\n")
    }

    /// The standard input is read at the first read, not before: a script that never reads it — or only names
    /// `io.stdin` — ends while its input is still open (a terminal, a pipe nobody closes).
    @Test func theStandardInputIsReadOnlyWhenRead() async throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("named.lua")
        try Data("print(tostring(io.stdin), io.type(io.stdin))".utf8).write(to: script)
        let process = Process()
        process.executableURL = Self.binary
        process.arguments = [script.path]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        defer { try? input.fileHandleForWriting.close() } // (closed only once the test is done with it)
        let ended = await eventually(timeout: .seconds(30)) { !process.isRunning }
        #expect(ended, "luakit waited for an input it never read")
        guard ended else {
            kill(process.processIdentifier, SIGKILL) // (a read of the pipe below would wait for it too)
            return
        }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(text == "file (stdin)\tfile\n", "\(text)")
    }

    @Test func refusesBadUsage() async throws {
        #expect(try await Self.run([]).status == 2)
        #expect(try await Self.run(["a.lua", "b.lua"]).status == 1, "a.lua cannot be read (b.lua is its argument), as for `lua`")
        #expect(try await Self.run(["x.lua", "--memory-mb", "zero"]).status == 2)
        #expect(try await Self.run(["/nonexistent/file.lua"]).status == 1)
    }
}
