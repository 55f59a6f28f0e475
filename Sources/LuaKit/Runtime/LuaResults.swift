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

    /// Result `position` converted to Swift; errors name paths from `root`.
    public func value(_ position: Int32, root: @autoclosure () -> String) throws(LuaError) -> LuaValue {
        guard let index = index(position) else { return .nil }
        return try vm.value(at: index, root: root())
    }

    /// Result `position` kept in the VM, or `nil` when it is `nil`.
    public func reference(_ position: Int32) -> LuaReference? {
        guard let index = index(position), lua_type(vm.state, index) != LUA_TNIL else { return nil }
        lua_pushvalue(vm.state, index)
        return vm.makeReference()
    }
}
