import CLua
import CLuaGuard

extension LuaVM {
    /// [-1, +0, -] Turns the error value on top of the stack into a `LuaError`, using what the guard recorded.
    func popError(status: Int32) -> LuaError {
        let guardState = self.guardState.pointee
        let text = errorText(at: -1)
        clua_pop(state, 1)
        let kind: LuaError.Kind
        switch status {
        case LUA_ERRSYNTAX: kind = .syntax
        case _ where guardState.timedOut != 0: kind = .timeout
        case LUA_ERRMEM: kind = .memory
        case _ where guardState.memoryRefused != 0 && text.hasSuffix("not enough memory"): kind = .memory
        default: kind = .runtime
        }
        var error = LuaError(kind, text)
        if let (chunk, line, message) = Self.splitLocation(text) {
            error.chunkName = chunk
            error.line = line
            error.message = message
        } else if guardState.failureLine > 0 {
            error.chunkName = withUnsafeBytes(of: guardState.failureSource) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            error.line = Int(guardState.failureLine)
        }
        lua_getfield(state, clua_registryindex(), clua_traceback_field())
        if lua_type(state, -1) == LUA_TSTRING { error.traceback = string(at: -1, limit: 16 << 10) }
        clua_pop(state, 1)
        lua_pushnil(state)
        lua_setfield(state, clua_registryindex(), clua_traceback_field())
        if kind == .memory {
            _ = clua_gc(state, LUA_GCCOLLECT, 0)
        }
        return error
    }

    /// The message of an error value, without running any metamethod. Long messages are cut.
    /// [-0, +0, -]
    private func errorText(at index: Int32) -> String {
        switch lua_type(state, index) {
        case LUA_TSTRING:
            return string(at: index, limit: limits.errorMessageBytes)
        case LUA_TNUMBER:
            return lua_isinteger(state, index) != 0 ? String(clua_tointeger(state, index)) : String(clua_tonumber(state, index))
        case LUA_TNIL:
            return "(error object is a nil value)"
        default:
            let typeName = String(cString: lua_typename(state, lua_type(state, index)))
            return "(error object is a \(typeName) value)"
        }
    }

    /// A Lua string at `index` (which must be a string) as Swift text, cut to `limit` bytes.
    /// [-0, +0, -]
    func string(at index: Int32, limit: Int) -> String {
        var length = 0
        let bytes = lua_tolstring(state, index, &length)!
        let buffer = UnsafeRawBufferPointer(start: bytes, count: length)
        if length <= limit { return String(decoding: buffer, as: UTF8.self) }
        var cut = limit
        while cut > 0, buffer[cut] & 0xC0 == 0x80 { cut -= 1 }
        return String(decoding: buffer.prefix(cut), as: UTF8.self) + "… (\(length) bytes in all)"
    }

    /// Splits `app.lua:12: message` into its parts. A module that does not compile is raised by `require` as Lua's
    /// raises it, `error loading module 'm' from file './m.lua':` and, on the next line after a tab, the compiler's
    /// `m.lua:4: message`: its parts are that line's.
    static func splitLocation(_ text: String) -> (chunk: String, line: Int, message: String)? {
        if text.hasPrefix("error loading module '"), let inner = text.range(of: "':\n\t") {
            return splitLocation(String(text[inner.upperBound...]))
        }
        let bytes = Array(text.utf8.prefix(512))
        var index = 0
        while index < bytes.count, bytes[index] != UInt8(ascii: "\n") {
            if bytes[index] == UInt8(ascii: ":"), index > 0 {
                var cursor = index + 1
                var line = 0
                while cursor < bytes.count, (48...57).contains(bytes[cursor]), line < 10_000_000 {
                    line = line * 10 + Int(bytes[cursor] - 48)
                    cursor += 1
                }
                if cursor > index + 1, cursor < bytes.count, bytes[cursor] == UInt8(ascii: ":") {
                    let chunk = String(decoding: bytes[..<index], as: UTF8.self)
                    var rest = text.utf8.dropFirst(cursor + 1)
                    if rest.first == UInt8(ascii: " ") { rest = rest.dropFirst() }
                    return (chunk, line, String(Substring(rest)))
                }
            }
            index += 1
        }
        return nil
    }
}
