import CLua
import CLuaGuard
import Foundation

/// Why a Swift function exposed to Lua failed.
enum HostFailure: Error {
    /// A runtime error with this message, reported at the script's call site.
    case message(String)
    /// The call's time budget ran out inside the host function.
    case budgetExhausted
    /// The result would not fit under the memory cap.
    case memory
}

/// A Swift function callable from Lua through `clua_call_swift`. Its body reads its arguments at stack indices
/// `1...n`, pushes its results and returns how many; it never calls an API that can raise.
final class HostFunction {
    unowned let vm: LuaVM
    let name: String
    let body: (LuaVM) throws(HostFailure) -> Int32

    init(vm: LuaVM, name: String, body: @escaping (LuaVM) throws(HostFailure) -> Int32) {
        self.vm = vm
        self.name = name
        self.body = body
    }

    /// Runs the body on the stack of `thread`, the Lua thread that called it — a coroutine's, or the VM's own —
    /// where its arguments are and its results go; on failure pushes the error value there and returns -1 for the
    /// trampoline to raise. (Read from the VM's main thread, a call from inside a coroutine took the main
    /// thread's values as its arguments, and the trampoline raised whatever the coroutine had on top.)
    /// [-0, +(results|1), -] (the host function's own effect, or the error value)
    func invoke(on thread: OpaquePointer) -> Int32 {
        vm.guardState.pointee.hostAllocations += 1
        let outer = vm.state
        vm.state = thread
        defer {
            vm.state = outer
            vm.guardState.pointee.hostAllocations -= 1
        }
        do {
            return try body(vm)
        } catch {
            vm.pushHostFailure(error)
            return -1
        }
    }
}

extension LuaVM {
    /// [-0, +1, -] Pushes a C closure that calls `body`, and keeps the body alive as long as the VM.
    func pushHostFunction(_ name: String, _ body: @escaping (LuaVM) throws(HostFailure) -> Int32) {
        let function = Unmanaged.passRetained(HostFunction(vm: self, name: name, body: body))
        hostFunctions.append(function)
        lua_pushlightuserdata(state, function.toOpaque())
        lua_pushcclosure(state, clua_call_swift, 1)
    }

    /// [-0, +0, -] Sets `table[name]` (table at `index`, a plain table) to a host function.
    func setHostFunction(_ name: String, in index: Int32, _ body: @escaping (LuaVM) throws(HostFailure) -> Int32) {
        let table = lua_absindex(state, index)
        pushHostFunction(name, body)
        lua_setfield(state, table, name)
    }

    /// [-0, +1, -] The error value for a failed host function, prefixed with the calling script's position.
    func pushHostFailure(_ failure: HostFailure) {
        let message: String
        switch failure {
        case .message(let text):
            message = text
        case .memory:
            guardState.pointee.memoryRefused = 1
            message = "not enough memory"
        case .budgetExhausted:
            guardState.pointee.timedOut = 1
            lua_sethook(state, clua_budget_hook, LUA_MASKCOUNT, 1)
            message = "time budget of \(guardState.pointee.budgetNanos / 1_000_000) ms exceeded"
        }
        pushString(scriptPosition(from: 1) + message)
    }

    /// `chunk:line: ` of the innermost script frame at or above `level` (trusted `host:` chunks do not count),
    /// or nothing when no script frame is on the stack (after a tail call, say). Records it in the guard.
    /// [-0, +0, -]
    func scriptPosition(from level: Int32) -> String {
        var record = lua_Debug()
        var level = level
        while level < 64, lua_getstack(state, level, &record) != 0 {
            level += 1
            guard lua_getinfo(state, "Sl", &record) != 0, record.currentline > 0 else { continue }
            let source = withUnsafeBytes(of: record.short_src) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if source.hasPrefix("host:") { continue }
            guardState.pointee.failureLine = record.currentline
            withUnsafeMutableBytes(of: &guardState.pointee.failureSource) { target in
                withUnsafeBytes(of: record.short_src) { target.copyMemory(from: $0) }
            }
            return "\(source):\(record.currentline): "
        }
        return ""
    }

    /// Throws `.memory` unless `bytes` more fit under the cap.
    /// [-0, +0, -]
    func ensureHeadroom(_ bytes: Int) throws(HostFailure) {
        if guardState.pointee.bytesInUse + bytes > guardState.pointee.bytesLimit { throw .memory }
    }

    /// The string argument at `index` as raw bytes (valid while the argument stays on the stack).
    /// [-0, +0, -]
    func stringArgument(_ index: Int32, _ function: String) throws(HostFailure) -> UnsafeBufferPointer<UInt8> {
        guard lua_type(state, index) == LUA_TSTRING else {
            throw .message("bad argument #\(index) to '\(function)' (string expected)")
        }
        var length = 0
        let bytes = lua_tolstring(state, index, &length)!
        return UnsafeRawBufferPointer(start: bytes, count: length).bindMemory(to: UInt8.self)
    }

    // MARK: Primitives the prelude builds on

    /// `print`: hands the line to the host's print handler.
    /// [-1, +0, -] (a host function: its failures are raised by the trampoline)
    func printPrimitive() throws(HostFailure) -> Int32 {
        let line = try stringArgument(1, "print")
        if let standardOutput { // (a line, then a flush: Lua's `print` flushes, `lua_writeline`)
            outsideBudget {
                standardOutput.write(Array(line) + [10])
                standardOutput.flush()
            }
            return 0
        }
        if partialLine.isEmpty {
            printLine(Array(line))
        } else {
            printLine(partialLine + line)
            partialLine.removeAll()
        }
        return 0
    }

    /// `write(text)` (`io.write`): text without line breaks waits for the rest of its line; each line it ends goes
    /// to the host's print handler as `print` sends it.
    /// [-1, +0, -] (a host function)
    func writePrimitive() throws(HostFailure) -> Int32 {
        let text = try stringArgument(1, "write")
        if let standardOutput {
            outsideBudget { standardOutput.write(Array(text)) }
            return 0
        }
        var start = text.startIndex
        while let newline = text[start...].firstIndex(of: UInt8(ascii: "\n")) {
            printLine(partialLine + text[start..<newline])
            partialLine.removeAll()
            start = newline + 1
        }
        partialLine += text[start...]
        return 0
    }

    /// `writeerror(text)`: the bytes a script wrote to `io.stderr` (or a warning line), to the host's standard error
    /// as they are. [-1, +0, -] (a host function)
    func writeErrorPrimitive() throws(HostFailure) -> Int32 {
        let text = try stringArgument(1, "write")
        writeError?(Array(text))
        return 0
    }

    /// `flush()`: writes out what the host's standard output buffers (`io.flush()`, `io.stdout:flush()`).
    /// [-0, +0, -] (a host function)
    func flushPrimitive() throws(HostFailure) -> Int32 {
        if let standardOutput { outsideBudget { standardOutput.flush() } }
        return 0
    }

    /// `setvbuf(mode)`: how the host's standard output buffers from now on ("no", "line" or "full": the prelude
    /// checked it). [-1, +0, -] (a host function)
    func setBufferingPrimitive() throws(HostFailure) -> Int32 {
        let mode = String(decoding: try stringArgument(1, "setvbuf"), as: UTF8.self)
        if let standardOutput, let buffering = LuaOutputBuffering(rawValue: mode) {
            outsideBudget { standardOutput.setBuffering(buffering) }
        }
        return 0
    }

    /// Runs `body`, which waits on the world (a pipe, a terminal): the time it takes is left out of the running
    /// call's time budget.
    func outsideBudget<T>(_ body: () -> T) -> T {
        let started = ContinuousClock.now
        let result = body()
        let waited = ContinuousClock.now - started
        clua_budget_exclude(state, Int64(waited.components.seconds) * 1_000_000_000 + waited.components.attoseconds / 1_000_000_000)
        return result
    }

    /// `readstdin()`: all of the host's standard input, as bytes (`init(…standardInput:)`); the time it waited for
    /// it is left out of the call's time budget. [-0, +1, -] (a host function)
    func readInputPrimitive() throws(HostFailure) -> Int32 {
        let bytes = outsideBudget { readInput?() ?? [] }
        try ensureHeadroom(bytes.count * 2)
        bytes.withUnsafeBufferPointer { raw in
            raw.withMemoryRebound(to: CChar.self) { _ = lua_pushlstring(state, $0.baseAddress, $0.count) }
        }
        return 1
    }

    /// [-1, +2, -] (a host function)
    /// `readfile(path, caller)`: the source text of a file of the app's folder and its chunk name, or nil and why
    /// not (as `loadfile` says it: `cannot open x.lua: No such file or directory`).
    func readFilePrimitive() throws(HostFailure) -> Int32 {
        let path = String(decoding: try stringArgument(1, "loadfile"), as: UTF8.self)
        let caller = String(decoding: try stringArgument(2, "loadfile"), as: UTF8.self)
        let (root, prefix) = moduleFolder(at: 3)
        let file: ModuleResolver.Module
        do {
            file = try ModuleResolver(root: root, path: modulePath, maximumBytes: limits.moduleBytes).resolveFile(path, for: caller)
        } catch {
            guard case .message(let reason) = error else { throw error }
            try ensureHeadroom(reason.utf8.count * 2)
            lua_pushnil(state)
            pushString(reason)
            return 2
        }
        try ensureHeadroom(file.source.count * 2)
        pushBytes(file.source)
        pushString("@" + prefix + file.chunkName)
        return 2
    }

    /// `readdata(path)`: the bytes of a file of the project's folder or the module path (`ModuleResolver.readData`),
    /// or nil, why not and its error number, as Lua's `io.open` answers.
    /// [-1, +(1|3), -] (a host function)
    func readDataPrimitive() throws(HostFailure) -> Int32 {
        let path = String(decoding: try stringArgument(1, "io.open"), as: UTF8.self)
        let maximum = max(limits.moduleBytes, limits.memoryBytes / 4)
        switch ModuleResolver(root: moduleRoot, path: modulePath, maximumBytes: maximum).readData(path) {
        case .success(let data):
            try ensureHeadroom(data.count * 2)
            pushBytes(data)
            return 1
        case .failure(let unreadable):
            try ensureHeadroom(unreadable.message.utf8.count * 2)
            lua_pushnil(state)
            pushString(unreadable.message)
            lua_pushinteger(state, lua_Integer(unreadable.number))
            return 3
        }
    }

    /// [-0, +1, -] `bytes` as a Lua string, whatever they are (source text is read as bytes, as Lua reads it).
    private func pushBytes(_ bytes: Data) {
        bytes.withUnsafeBytes { raw in
            _ = lua_pushlstring(state, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count)
        }
    }

    /// `readmodule(name [, folder [, path]])`: the source, chunk name and file name (as Lua's searcher names it) of an
    /// app module (found inside its folder, then on the module path; or by `path`'s templates, a `package.path` the
    /// script changed); found nowhere, nil and the files looked for (`\n\tno file '…'` each, as Lua lists them).
    func readModulePrimitive() throws(HostFailure) -> Int32 {
        let name = String(decoding: try stringArgument(1, "require"), as: UTF8.self)
        let (root, folderPrefix) = moduleFolder(at: 2)
        let resolver = ModuleResolver(root: root, path: modulePath, maximumBytes: limits.moduleBytes)
        let (found, tried) = lua_type(state, 3) == LUA_TSTRING
            // (Split as Lua's searcher splits it: an empty template is tried too, and `;;` is no default here.)
            ? try resolver.resolve(name, templates: String(decoding: try stringArgument(3, "require"), as: UTF8.self)
                .split(separator: ";", omittingEmptySubsequences: false).map(String.init))
            : try resolver.resolve(name)
        guard let module = found else {
            // (Found nowhere: nil, and the files looked for as Lua's searcher lists them, for `require` to raise.)
            lua_pushnil(state)
            pushString(tried.map { "\n\t" + $0 }.joined())
            return 2
        }
        try ensureHeadroom(module.source.count * 2)
        pushBytes(module.source)
        let prefix = isNumberedFolder(at: 2) ? folderPrefix : moduleChunkPrefix
        // (Named as stock Lua names it where the host asks for that — `./`: by the file its template made.)
        let named = prefix == "./" ? module.templated ?? module.chunkName
            : (module.chunkName.hasPrefix("/") || module.asFound ? "" : prefix) + module.chunkName
        pushString("@" + named)
        // (And the file as the searcher's template made it — package.path's "./?.lua", or the module path's —:
        // `require`'s second result, Lua's "loader data".)
        pushString(module.templated ?? (module.asFound || named.hasPrefix("/") || named.hasPrefix("./") ? named : "./" + named))
        return 3
    }

    /// `hostmodule(name)`: the compiled chunk of a host module defined by its source, and its chunk name (`=` and
    /// the name), for the prelude to run at the module's first `require`. (The dump is the process's, shared by
    /// every VM: keeping it costs a VM nothing.)
    func hostModulePrimitive() throws(HostFailure) -> Int32 {
        let name = String(decoding: try stringArgument(1, "hostmodule"), as: UTF8.self)
        guard let module = deferredModules[name] else { throw .message("no host module '\(name)'") }
        try ensureHeadroom(module.dump.count)
        module.dump.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { _ = lua_pushlstring(state, $0.baseAddress, $0.count) }
        }
        pushString("=" + module.chunkName)
        return 2
    }

    /// Whether the argument at `index` names a folder of `makeNamespace(root:chunkPrefix:)` (not `moduleRoot`).
    private func isNumberedFolder(at index: Int32) -> Bool {
        var isNumber: Int32 = 0
        let number = lua_tointegerx(state, index, &isNumber)
        return isNumber != 0 && number >= 1 && Int(number) <= moduleFolders.count
    }

    /// The folder a namespace's modules come from (the argument at `index`: a `ModuleFolder` number, or nil for
    /// `moduleRoot`), and the prefix of their chunk names.
    private func moduleFolder(at index: Int32) -> (URL?, String) {
        var isNumber: Int32 = 0
        let number = lua_tointegerx(state, index, &isNumber)
        guard isNumber != 0, number >= 1, Int(number) <= moduleFolders.count else { return (moduleRoot, "") }
        let folder = moduleFolders[Int(number) - 1]
        return (folder.root, folder.chunkPrefix)
    }
}
