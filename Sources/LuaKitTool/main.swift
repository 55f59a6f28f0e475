import Foundation
import LuaKit
import Synchronization

/// `luakit [OPTION …] FILE [ARG …]`: runs one Lua file in LuaKit's sandbox as the stand-alone `lua` runs one (what it
/// returns is dropped). As `lua` gives them, the script gets every argument after the file — `-v`, `--`, `-` too — as
/// `...` and in the global `arg` (`arg[0]` the file, `arg[-1]` the interpreter); luakit's own options
/// (`--time-budget-ms N`, `--memory-mb N`, `--lua-path PATH`) come before the file, or after it until a `--`. Modules
/// it `require`s are loaded from the file's folder, then from the module path as stock `lua5.4` takes it
/// (`--lua-path`, else `LUA_PATH_5_4` or `LUA_PATH`, else Debian's default; source text only). Exit status: 0 on
/// success, 1 when the script fails or cannot be read (what `lua` prints of the error goes to standard error), 2 for
/// usage errors.
let usage = "usage: luakit [--time-budget-ms N] [--memory-mb N] [--lua-path PATH] FILE [ARG ...]"

var arguments = Array(CommandLine.arguments.dropFirst())
var limits = LuaLimits()
limits.system = .system // (a script run as `lua` runs it: the real clock and environment)
// (A heap of up to 1 GiB: room for what `lua` runs — a runaway recursion reaches Lua's own "stack overflow", whose
// stack and frames take ≈ 60 MB — while a runaway allocation still stops. `--memory-mb` sets it.)
limits.memoryBytes = 1 << 30
// The default time budget, as `luastore`'s: `LUASTORE_TIME_BUDGET_MS` where set (a machine under load, where a
// budget counted on the wall clock would stop a call the scheduler only paused); `--time-budget-ms` still wins.
do {
    if let milliseconds = try LuaLimits.environmentTimeBudget() {
        limits.timeBudget = .nanoseconds(Int64(min(milliseconds * 1_000_000, Double(Int64.max))))
    }
} catch {
    FileHandle.standardError.write(Data("luakit: \(error)\n".utf8))
    exit(2)
}
var file: String?
var luaPath: String?
var scriptArguments: [String] = []
var ownOptions = true // (luakit's options: before the file, or after it until a `--`)
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--time-budget-ms" where ownOptions, "--memory-mb" where ownOptions:
        // (At most a petabyte of memory, and `LuaLimits.longestTimeBudgetMilliseconds`: a number past those would
        // overflow what holds it.)
        let most = argument == "--memory-mb" ? 1 << 30 : Int(LuaLimits.longestTimeBudgetMilliseconds)
        guard let value = arguments.first.flatMap(Int.init), value > 0, value <= most else {
            FileHandle.standardError.write(Data("luakit: \(argument) needs a positive number, at most \(most)\n\(usage)\n".utf8))
            exit(2)
        }
        arguments.removeFirst()
        if argument == "--time-budget-ms" { limits.timeBudget = .milliseconds(value) } else { limits.memoryBytes = value << 20 }
    case "--lua-path" where ownOptions:
        guard let value = arguments.first else {
            FileHandle.standardError.write(Data("luakit: --lua-path needs a path (templates such as /usr/share/lua/5.4/?.lua, separated by ';')\n\(usage)\n".utf8))
            exit(2)
        }
        arguments.removeFirst()
        luaPath = value
    case "-h" where file == nil, "--help" where file == nil:
        print(usage)
        exit(0)
    default:
        if file != nil {
            // (The script's, as `lua` gives every argument after the file: a `--` too, after which luakit takes none.)
            if argument == "--" { ownOptions = false }
            scriptArguments.append(argument)
        } else if argument.hasPrefix("-") {
            FileHandle.standardError.write(Data("luakit: unexpected argument '\(argument)'\n\(usage)\n".utf8))
            exit(2)
        } else {
            file = argument
        }
    }
}
guard let file else {
    FileHandle.standardError.write(Data("\(usage)\n".utf8))
    exit(2)
}
let url = URL(fileURLWithPath: file)
guard let source = FileManager.default.contents(atPath: url.path) else { // (bytes, as Lua reads a source file)
    // (As `lua` says it: the system's reason, exit status 1.)
    let reason = FileManager.default.fileExists(atPath: url.path) ? "Permission denied" : "No such file or directory"
    FileHandle.standardError.write(Data("luakit: cannot open \(file): \(reason)\n".utf8))
    exit(1)
}

/// The standard output as C's `stdout` buffers it for `lua`: a line at a time to a terminal, blocks of 4 KiB to a
/// pipe or a file (so what a script writes to both streams comes out in the order `lua`'s does), written out by
/// `io.flush()`, at the end, and before the standard input is read from a terminal; `setvbuf` changes the mode.
final class StandardOutput: LuaStandardOutput {
    private struct Buffer {
        var bytes: [UInt8] = []
        var mode: LuaOutputBuffering = isatty(STDOUT_FILENO) != 0 ? .line : .full
    }
    private static let blockBytes = 4096
    private let buffer = Mutex(Buffer())

    func write(_ bytes: [UInt8]) {
        let out: [UInt8]? = buffer.withLock { buffer in
            buffer.bytes += bytes
            let due: Bool
            switch buffer.mode {
            case .no: due = true
            case .line: due = bytes.contains(10) || buffer.bytes.count >= Self.blockBytes
            case .full: due = buffer.bytes.count >= Self.blockBytes
            }
            guard due else { return nil }
            defer { buffer.bytes.removeAll(keepingCapacity: true) }
            return buffer.bytes
        }
        if let out { Self.writeOut(out) }
    }

    func flush() {
        let out = buffer.withLock { buffer in
            defer { buffer.bytes.removeAll(keepingCapacity: true) }
            return buffer.bytes
        }
        if !out.isEmpty { Self.writeOut(out) }
    }

    func setBuffering(_ mode: LuaOutputBuffering) {
        flush()
        buffer.withLock { $0.mode = mode }
    }

    /// Whether a line at a time goes out (a terminal's): then reading the standard input writes out a prompt first.
    var linesAtATime: Bool { buffer.withLock { $0.mode != .full } }

    private static func writeOut(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var at = 0
            while at < raw.count {
                let written = Glibc.write(STDOUT_FILENO, raw.baseAddress! + at, raw.count - at)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return } // (a closed pipe: lua's writes fail as quietly)
                at += written
            }
        }
    }
}

let standardOutput = StandardOutput()

let modulePath = LuaModulePath.resolve(option: luaPath)
let argumentTable = LuaTable(array: scriptArguments.map(LuaValue.string), fields: [.integer(0): .string(file), .integer(-1): "luakit"])
let argumentValues = scriptArguments.map { LuaArgument.value(.string($0)) }
let thread = LuaThread(name: "luakit")
let status: Int32 = thread.sync {
    LuaVM.stopScriptsOnInterrupt() // (Ctrl-C: `interrupted!`, as `lua`)
    do {
        let vm = try LuaVM(limits: limits, moduleRoot: url.deletingLastPathComponent(), modulePath: modulePath,
                           printingBytes: { _ in },
                           errorBytes: { FileHandle.standardError.write(Data($0)) }, // (unbuffered, as `lua`'s standard error)
                           standardInput: { // (`io.read`, `io.lines()`; a prompt written first, as C does to a terminal)
                               if standardOutput.linesAtATime { standardOutput.flush() }
                               return [UInt8](FileHandle.standardInput.readDataToEndOfFile())
                           },
                           standardOutput: standardOutput)
        vm.moduleChunkPrefix = "./" // (modules named as stock Lua names what `./?.lua` found)
        _ = try vm.call(try vm.load("arg = ...", chunkName: "=luakit"), .table(argumentTable))
        // (Named as given, as `lua` names a file — a long path by its last 56 bytes after "...", as Lua's `chunkid` shows it.)
        let bytes = Array(file.utf8)
        let name = bytes.count <= 59 ? file : "..." + String(decoding: bytes.suffix(56), as: UTF8.self)
        let chunk = try vm.load(bytes: LuaVM.fileSource(source), chunkName: name)
        do {
            try vm.callAsMain(chunk, arguments: argumentValues) // (what the script returns is dropped, as `lua` drops it)
        } catch let error as LuaError where error.kind == .runtime || error.kind == .memory {
            // (As `lua` prints an uncaught error: its message as the script raised it — `error("usage", 0)` has no
            // position — then the traceback, unless the message came from the error object's `__tostring`.)
            if let failure = vm.takeMainFailure() {
                // (Cut at a NUL byte, as `lua` writes the message: a C string.)
                // (No closure here: top-level code is the main actor's, and this runs on the script's thread.)
                var message = Substring(failure.message)
                if let end = message.firstIndex(of: "\0") { message = message[..<end] }
                var text = "luakit: " + message
                if failure.traceback, let traceback = error.mainTraceback { text += "\n" + traceback }
                FileHandle.standardError.write(Data((text + "\n").utf8))
                return 1
            }
            throw error
        }
        return 0
    } catch {
        // (With the script's traceback, as `lua` writes one: for a spent budget, where the loop was called from.)
        var text = "luakit: \(error)"
        if let traceback = (error as? LuaError)?.mainTraceback { text += "\n" + traceback }
        FileHandle.standardError.write(Data((text + "\n").utf8))
        return 1
    }
}
standardOutput.flush() // (what the script printed before its error too)
exit(status)
