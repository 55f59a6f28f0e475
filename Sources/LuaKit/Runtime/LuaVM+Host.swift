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

    /// Runs the body; on failure pushes the error value and returns -1 for the trampoline to raise.
    func invoke() -> Int32 {
        vm.guardState.pointee.hostAllocations += 1
        defer { vm.guardState.pointee.hostAllocations -= 1 }
        do {
            return try body(vm)
        } catch {
            vm.pushHostFailure(error)
            return -1
        }
    }
}

extension LuaVM {
    /// [-0, +1] Pushes a C closure that calls `body`, and keeps the body alive as long as the VM.
    func pushHostFunction(_ name: String, _ body: @escaping (LuaVM) throws(HostFailure) -> Int32) {
        let function = Unmanaged.passRetained(HostFunction(vm: self, name: name, body: body))
        hostFunctions.append(function)
        lua_pushlightuserdata(state, function.toOpaque())
        lua_pushcclosure(state, clua_call_swift, 1)
    }

    /// [-0, +0] Sets `table[name]` (table at `index`, a plain table) to a host function.
    func setHostFunction(_ name: String, in index: Int32, _ body: @escaping (LuaVM) throws(HostFailure) -> Int32) {
        let table = lua_absindex(state, index)
        pushHostFunction(name, body)
        lua_setfield(state, table, name)
    }

    /// [-0, +1] The error value for a failed host function, prefixed with the calling script's position.
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
    func ensureHeadroom(_ bytes: Int) throws(HostFailure) {
        if guardState.pointee.bytesInUse + bytes > guardState.pointee.bytesLimit { throw .memory }
    }

    /// The string argument at `index` as raw bytes (valid while the argument stays on the stack).
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
    func printPrimitive() throws(HostFailure) -> Int32 {
        let line = try stringArgument(1, "print")
        printLine(String(decoding: line, as: UTF8.self))
        return 0
    }

    /// `readmodule(name)`: the source and chunk name of an app module, found only inside `moduleRoot`.
    func readModulePrimitive() throws(HostFailure) -> Int32 {
        let name = String(decoding: try stringArgument(1, "require"), as: UTF8.self)
        let module = try ModuleResolver(root: moduleRoot, maximumBytes: limits.moduleBytes).resolve(name)
        try ensureHeadroom(module.source.utf8.count * 2)
        pushString(module.source)
        pushString("=" + module.chunkName)
        return 2
    }

    /// `match(s, pattern, init, mode, lastEnd, anchored)`: the single pattern primitive behind
    /// `string.find`, `match`, `gmatch` and `gsub`. `init` is 1-based and already in range. In scan mode an
    /// unfinished capture comes back as `false`, for the prelude to raise only when the capture is used.
    func patternPrimitive() throws(HostFailure) -> Int32 {
        let subject = try stringArgument(1, "find")
        let pattern = try stringArgument(2, "find")
        let start = Int(clua_tointeger(state, 3)) - 1
        let mode = clua_tointeger(state, 4)
        if mode == PatternMode.plain || (mode == PatternMode.find && PatternMatcher.isPlain(pattern)) {
            guard let range = PatternMatcher.plainFind(subject, pattern, from: start) else {
                lua_pushnil(state)
                return 1
            }
            lua_pushinteger(state, lua_Integer(range.lowerBound + 1))
            lua_pushinteger(state, lua_Integer(range.upperBound))
            return 2
        }
        let scanning = mode == PatternMode.scan
        let lastEnd = scanning ? Int(clua_tointeger(state, 5)) : -1
        var matcher = PatternMatcher(subject: subject, pattern: pattern, deadline: guardState.pointee.deadlineNanos)
        let found: PatternMatcher.Match?
        do {
            found = try matcher.firstMatch(from: start, honorsAnchor: !scanning,
                                           anchored: scanning && lua_toboolean(state, 6) != 0, excludingEnd: lastEnd)
        } catch .malformed(let message) {
            throw .message(message)
        } catch {
            throw .budgetExhausted
        }
        guard let found else {
            lua_pushnil(state)
            return 1
        }
        let hasUnfinishedCapture = found.captures.contains { if case .unfinished = $0 { true } else { false } }
        if hasUnfinishedCapture, !scanning { throw .message("unfinished capture") }
        let captureBytes = found.captures.reduce(found.end - found.start) { total, capture in
            if case .range(let from, let to) = capture { return total + to - from }
            return total
        }
        guard lua_checkstack(state, Int32(found.captures.count + 3)) != 0 else { throw .memory }
        try ensureHeadroom(captureBytes + 64 * found.captures.count + 64)
        var results: Int32 = 0
        if mode != PatternMode.match {
            lua_pushinteger(state, lua_Integer(found.start + 1))
            lua_pushinteger(state, lua_Integer(found.end))
            results = 2
        }
        if found.captures.isEmpty, mode != PatternMode.find {
            pushSubstring(subject, found.start..<found.end)
            return results + 1
        }
        for capture in found.captures {
            switch capture {
            case .position(let position): lua_pushinteger(state, lua_Integer(position + 1))
            case .range(let from, let to): pushSubstring(subject, from..<to)
            case .unfinished: lua_pushboolean(state, 0) // the prelude raises if the capture is used
            }
        }
        return results + Int32(found.captures.count)
    }

    private func pushSubstring(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) {
        let start = UnsafeRawPointer(bytes.baseAddress!).advanced(by: range.lowerBound)
        _ = lua_pushlstring(state, start.assumingMemoryBound(to: CChar.self), range.count)
    }
}

/// The modes of the pattern primitive, shared with the prelude (`FIND, MATCH, PLAIN, SCAN = 1, 2, 3, 4`).
enum PatternMode {
    static let find: lua_Integer = 1
    static let match: lua_Integer = 2
    static let plain: lua_Integer = 3
    static let scan: lua_Integer = 4
}
