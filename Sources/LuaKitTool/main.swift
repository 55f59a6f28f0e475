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
        guard let value = arguments.first.flatMap(Int.init), value > 0 else {
            FileHandle.standardError.write(Data("luakit: \(argument) needs a positive number\n\(usage)\n".utf8))
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

/// What goes to standard output: what the script prints, in order, as bytes; written out in
/// blocks of 64 KiB, as a buffered stream writes to a pipe, and at the end (`flushOut`).
let pendingOut = Mutex<[UInt8]>([])

@Sendable func writeOut(_ bytes: [UInt8]) {
    let full: [UInt8]? = pendingOut.withLock { pending in
        pending += bytes
        guard pending.count >= 1 << 16 else { return nil }
        defer { pending.removeAll(keepingCapacity: true) }
        return pending
    }
    if let full { FileHandle.standardOutput.write(Data(full)) }
}

func flushOut() {
    let rest = pendingOut.withLock { pending in
        defer { pending.removeAll() }
        return pending
    }
    if !rest.isEmpty { FileHandle.standardOutput.write(Data(rest)) }
}

let modulePath = LuaModulePath.resolve(option: luaPath)
let argumentTable = LuaTable(array: scriptArguments.map(LuaValue.string), fields: [.integer(0): .string(file), .integer(-1): "luakit"])
let argumentValues = scriptArguments.map { LuaArgument.value(.string($0)) }
let thread = LuaThread(name: "luakit")
let status: Int32 = thread.sync {
    do {
        // (Lines go out as the bytes the script wrote, as `lua` writes them.)
        let vm = try LuaVM(limits: limits, moduleRoot: url.deletingLastPathComponent(), modulePath: modulePath,
                           printingBytes: { writeOut($0 + [10]) },
                           errorBytes: { FileHandle.standardError.write(Data($0)) }, // (unbuffered, as `lua`'s standard error)
                           standardInput: { [UInt8](FileHandle.standardInput.readDataToEndOfFile()) }) // (`io.read`, `io.lines()`)
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
                var text = "luakit: \(failure.message)"
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
flushOut() // (what the script printed before its error too)
exit(status)
