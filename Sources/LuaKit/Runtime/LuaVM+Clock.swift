import CLua
import CLuaGuard

/// The clock and environment `os` reads where it is recorded (`SystemAccess.recorded`): what the host sets here,
/// and nothing else, so that a replay that sets the same reads the same.
extension LuaVM {
    /// The time `os.time()` and `os.date()` read, in milliseconds since 1970-01-01 UTC. Setting it is a store
    /// into the VM's bookkeeping (no Lua runs), made once before each call that should read it.
    public var clockMillis: Int64 {
        get { guardState.pointee.clockMillis }
        set { guardState.pointee.clockMillis = newValue }
    }

    /// When the clock started, in milliseconds since 1970-01-01 UTC: `os.clock()` answers the seconds since.
    public var clockStartMillis: Int64 {
        get { guardState.pointee.clockStartMillis }
        set { guardState.pointee.clockStartMillis = newValue }
    }

    /// The time zone `os.date` (without `!`) and `os.time(t)` read local time in: a fixed offset east of UTC, in
    /// seconds (0: UTC).
    public var utcOffsetSeconds: Int32 {
        get { guardState.pointee.utcOffsetSeconds }
        set { guardState.pointee.utcOffsetSeconds = newValue }
    }

    /// Sets what `os.getenv` finds (nothing, when empty).
    public func setEnvironment(_ variables: [String: String]) {
        checkThread()
        if variables.isEmpty {
            lua_pushnil(state)
        } else {
            lua_createtable(state, 0, Int32(clamping: variables.count))
            for (name, value) in variables {
                pushString(value)
                lua_setfield(state, -2, name)
            }
        }
        lua_setfield(state, clua_registryindex(), CLUA_ENVIRONMENT_FIELD)
    }
}
