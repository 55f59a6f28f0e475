import CLua

/// The results of a call, still on the Lua stack (see `LuaVM.call(_:arguments:results:)`). Positions start at 1.
public struct LuaResults {
    let vm: LuaVM
    let base: Int32
    /// How many results there are.
    public let count: Int32

    private func index(_ position: Int32) -> Int32? {
        position >= 1 && position <= count ? base + position : nil
    }

    /// Whether result `position` is `nil` (or missing).
    public func isNil(_ position: Int32) -> Bool {
        guard let index = index(position) else { return true }
        return lua_type(vm.state, index) == LUA_TNIL
    }

    /// Result `position` if it is a boolean.
    public func boolean(_ position: Int32) -> Bool? {
        guard let index = index(position), lua_type(vm.state, index) == LUA_TBOOLEAN else { return nil }
        return lua_toboolean(vm.state, index) != 0
    }

    /// Result `position` if it is an integer (or a float with an integral value).
    public func integer(_ position: Int32) -> Int64? {
        guard let index = index(position) else { return nil }
        return Self.integer(vm.state, at: index)
    }

    /// [-0, +0, -] Element `key` of result `position`, read raw, if it is an integer (or a float with an integral
    /// value): nil when the result is not a table or the element is anything else.
    public func integer(_ position: Int32, at key: Int64) -> Int64? {
        element(position, at: key) { state in Self.integer(state, at: -1) }
    }

    /// [-0, +0, -] Element `key` of result `position`, read raw, if it is a boolean: nil when the result is not a
    /// table or the element is anything else.
    public func boolean(_ position: Int32, at key: Int64) -> Bool? {
        element(position, at: key) { state in lua_type(state, -1) == LUA_TBOOLEAN ? lua_toboolean(state, -1) != 0 : nil }
    }

    /// [-0, +0, -] Field `name` of element `key` of result `position`, read raw, if it is a string of UTF-8 text:
    /// nil when either is not a table or the field is anything else.
    public func string(_ position: Int32, at key: Int64, field name: String) -> String? {
        element(position, at: key) { state -> String? in
            guard lua_type(state, -1) == LUA_TTABLE, lua_checkstack(state, 1) != 0 else { return nil }
            name.utf8CString.withUnsafeBufferPointer { _ = lua_pushlstring(state, $0.baseAddress, $0.count - 1) }
            defer { clua_pop(state, 1) }
            guard lua_rawget(state, -2) == LUA_TSTRING else { return nil }
            var length = 0
            guard let bytes = lua_tolstring(state, -1, &length) else { return nil }
            return String(utf8: UnsafeRawBufferPointer(start: bytes, count: length))
        }
    }

    /// The value at stack `index` if it is an integer (or a float with an integral value).
    private static func integer(_ state: OpaquePointer, at index: Int32) -> Int64? {
        guard lua_type(state, index) == LUA_TNUMBER else { return nil }
        var isInteger: Int32 = 0
        let value = lua_tointegerx(state, index, &isInteger)
        return isInteger != 0 ? value : nil
    }

    /// `read` of element `key` of result `position` (pushed for it, read raw); nil when the result is not a table.
    private func element<T>(_ position: Int32, at key: Int64, _ read: (OpaquePointer) -> T?) -> T? {
        guard let index = index(position), lua_type(vm.state, index) == LUA_TTABLE,
              lua_checkstack(vm.state, 1) != 0 else { return nil }
        lua_rawgeti(vm.state, index, key)
        defer { clua_pop(vm.state, 1) }
        return read(vm.state)
    }

    /// [-0, +0, -] Element `key` of result `position`, read raw (no metamethod runs) and converted: `.nil` when the
    /// result is not a table or has no such element. Converting the elements of a large table one by one keeps a bad
    /// element's error to itself; errors name paths from `root`.
    public func value(_ position: Int32, at key: Int64, root: @autoclosure () -> String) throws(LuaError) -> LuaValue {
        guard let index = index(position), lua_type(vm.state, index) == LUA_TTABLE else { return .nil }
        guard lua_checkstack(vm.state, 1) != 0 else { throw LuaError(.runtime, "the Lua stack cannot grow") }
        lua_rawgeti(vm.state, index, key)
        defer { clua_pop(vm.state, 1) }
        return try vm.value(at: -1, root: root())
    }

    /// Result `position` converted to Swift; errors name paths from `root`.
    public func value(_ position: Int32, root: @autoclosure () -> String) throws(LuaError) -> LuaValue {
        guard let index = index(position) else { return .nil }
        return try vm.value(at: index, root: root())
    }

    /// Result `position`'s bytes if it is a string (all of them) or a full userdata (its first `count`, at most
    /// its size): copied out, no conversion to text.
    public func bytes(_ position: Int32, count: Int? = nil) -> [UInt8]? {
        guard let index = index(position) else { return nil }
        switch lua_type(vm.state, index) {
        case LUA_TSTRING:
            var length = 0
            guard let pointer = lua_tolstring(vm.state, index, &length) else { return nil }
            return Self.copy(UnsafeRawPointer(pointer), count: length)
        case LUA_TUSERDATA:
            guard let pointer = lua_touserdata(vm.state, index) else { return nil }
            let size = Int(lua_rawlen(vm.state, index))
            return Self.copy(UnsafeRawPointer(pointer), count: min(size, max(0, count ?? size)))
        default:
            return nil
        }
    }

    /// `count` bytes at `pointer`, copied at once (an array made from a buffer pointer as a sequence is
    /// filled a byte at a time).
    private static func copy(_ pointer: UnsafeRawPointer, count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if count > 0 { buffer.baseAddress!.initialize(from: pointer.assumingMemoryBound(to: UInt8.self), count: count) }
            initialized = count
        }
    }

    /// Result `position` kept in the VM, or `nil` when it is `nil`.
    public func reference(_ position: Int32) -> LuaReference? {
        guard let index = index(position), lua_type(vm.state, index) != LUA_TNIL else { return nil }
        lua_pushvalue(vm.state, index)
        return vm.makeReference()
    }
}
