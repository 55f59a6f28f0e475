import CLua
import CLuaGuard
import Foundation

/// An argument of a call into Lua: a Swift value, converted on the way in, or a value already in the VM.
public enum LuaArgument {
    /// A Swift value, pushed as a fresh Lua value.
    case value(LuaValue)
    /// A value held in the VM (a table or function from an earlier call), passed as is: no copy.
    case reference(LuaReference)
}

extension LuaVM {
    /// Calls `function` with Swift values; returns its results converted to Swift.
    @discardableResult
    public func call(_ function: LuaReference, _ arguments: LuaValue...) throws(LuaError) -> [LuaValue] {
        try call(function, arguments: arguments.map(LuaArgument.value))
    }

    /// Calls `function`; returns its results converted to Swift (`result`, `result2`, … in error paths).
    @discardableResult
    public func call(_ function: LuaReference, arguments: [LuaArgument]) throws(LuaError) -> [LuaValue] {
        let base = try callLeavingResults(function, arguments: arguments)
        defer { lua_settop(state, base) }
        var results: [LuaValue] = []
        let top = lua_gettop(state)
        var index = base + 1
        while index <= top {
            let root = index == base + 1 ? "result" : "result\(index - base)"
            results.append(try value(at: index, root: root))
            index += 1
        }
        return results
    }

    /// Calls `chunk` as the stand-alone `lua` calls a script: through a C function, which a traceback shows as its
    /// last frame (`[C]: in ?`), its results dropped. When it raises, the error thrown is as any call's, and
    /// `takeMainFailure()` gives what `lua` prints of it.
    public func callAsMain(_ chunk: LuaReference, arguments: [LuaArgument]) throws(LuaError) {
        checkThread()
        guard lua_checkstack(state, 1) != 0 else { throw LuaError(.runtime, "too many arguments (\(arguments.count))") }
        clua_pushcfunction(state, clua_call_as_main)
        let caller = makeReference() // (released with its last copy, as every reference)
        let base = try callLeavingResults(caller, arguments: [.reference(chunk)] + arguments, handler: clua_main_message_handler)
        lua_settop(state, base)
    }

    /// What the stand-alone `lua` prints of the error the last `callAsMain` raised: its message as `lua` words it (a
    /// string as it is — no position added where the script's `error` gave none — a value's `__tostring`, or "(error
    /// object is a T value)"), and whether `lua` prints the traceback after it (not after a `__tostring`'s message).
    /// Read once; nil when none is known.
    public func takeMainFailure() -> (message: String, traceback: Bool)? {
        checkThread()
        defer {
            lua_pushnil(state)
            lua_setfield(state, clua_registryindex(), clua_main_message_field())
        }
        guard lua_getfield(state, clua_registryindex(), clua_main_message_field()) == LUA_TSTRING else {
            clua_pop(state, 1)
            return nil
        }
        let message = string(at: -1, limit: limits.errorMessageBytes)
        clua_pop(state, 1)
        lua_getfield(state, clua_registryindex(), clua_main_plain_field())
        let plain = lua_toboolean(state, -1) != 0
        clua_pop(state, 1)
        return (message, !plain)
    }

    /// Calls `function` and hands its results to `body` unconverted: read only what you need. The view is
    /// valid only inside `body`.
    public func call<T>(
        _ function: LuaReference, arguments: [LuaArgument], results body: (LuaResults) throws(LuaError) -> T
    ) throws(LuaError) -> T {
        let base = try callLeavingResults(function, arguments: arguments)
        defer { lua_settop(state, base) }
        return try body(LuaResults(vm: self, base: base, count: lua_gettop(state) - base))
    }

    /// Calls `function`; returns its results as references (`nil` for `nil` results), converting nothing.
    public func callForReferences(_ function: LuaReference, arguments: [LuaArgument]) throws(LuaError) -> [LuaReference?] {
        let base = try callLeavingResults(function, arguments: arguments)
        var results: [LuaReference?] = []
        let top = lua_gettop(state)
        for index in (base + 1)...max(base + 1, top) where index <= top {
            lua_pushvalue(state, index)
            results.append(lua_type(state, -1) == LUA_TNIL ? { clua_pop(state, 1); return nil }() : makeReference())
        }
        lua_settop(state, base)
        return results
    }

    /// Converts the value behind `reference` to Swift; conversion errors name paths from `root`.
    public func value(of reference: LuaReference, root: String = "value") throws(LuaError) -> LuaValue {
        checkThread()
        pushReference(reference)
        defer { clua_pop(state, 1) }
        return try value(at: -1, root: root)
    }

    /// Decodes the value behind `reference` as `type`; errors name paths from `root`.
    public func decode<T: Decodable>(_ type: T.Type, from reference: LuaReference, root: String = "value") throws(LuaError) -> T {
        try LuaDecoder().decode(type, from: try value(of: reference, root: root), root: root)
    }

    /// Encodes a Swift value into the VM and returns a reference to it.
    public func reference<T: Encodable>(encoding value: T) throws(LuaError) -> LuaReference {
        try reference(to: try LuaEncoder().encode(value))
    }

    /// Puts a Swift value into the VM and returns a reference to it.
    public func reference(to value: LuaValue) throws(LuaError) -> LuaReference {
        checkThread()
        try push(value)
        return makeReference()
    }

    /// Puts `values` into the VM as a list (a table with keys 1…n) and returns a reference to it, converting
    /// nothing twice: a host loop in Lua can then walk many values handed over in one go. A value that is the
    /// very same as the one before it (the same storage: an action dispatched again and again, say) is not
    /// converted again: a table is copied inside the VM (a new table all the same, which the script may change
    /// or keep), anything else is reused. With `sharingFlatRepeats` — the function the list's values are handed to
    /// only reads their fields (`readsOnly(argument:of:)`) — a repeated table that holds no tables is the very
    /// table again: such a function can neither change it nor tell the two apart.
    public func reference(toList values: ArraySlice<LuaValue>, sharingFlatRepeats: Bool = false) throws(LuaError) -> LuaReference {
        checkThread()
        // Room for the list, and for copying a table nested as deep as a conversion may go.
        guard lua_checkstack(state, Int32(clamping: 4 * conversionDepth + 8)) != 0 else {
            throw LuaError(.runtime, "the Lua stack cannot grow")
        }
        let top = lua_gettop(state)
        lua_createtable(state, Int32(clamping: values.count), 0)
        let list = top + 1
        lua_pushnil(state) // a slot for the copier (see `clua_copy_plain_table`)
        var position: lua_Integer = 1
        var failure: LuaError?
        var shape = CLuaCopyShape(sequence: -1, others: -1, entries: 0, flat: 0) // of the table being repeated
        values.withUnsafeBufferPointer { buffer in
            var index = 0
            while index < buffer.count {
                do throws(LuaError) {
                    // A run of the value before, again: copied inside the VM in one call.
                    var end = index
                    while end < buffer.count, end > 0, Self.isSameValue(buffer, end, end - 1) { end += 1 }
                    if end > index {
                        let repeated = lua_Integer(end - index)
                        clua_repeat_in_list(state, list, position, position + repeated - 1, list + 1, &shape,
                                            sharingFlatRepeats ? 1 : 0)
                        try refuseIfOverCap(above: list + 1)
                        position += repeated
                        index = end
                        continue
                    }
                    shape = CLuaCopyShape(sequence: -1, others: -1, entries: 0, flat: 0)
                    // Actions made anew, of a few small fields each: many converted in one call.
                    let made = pushSmallTables(buffer, from: index, list: list, position: position)
                    if made > 0 {
                        try refuseIfOverCap(above: list + 1)
                        position += lua_Integer(made)
                        index += made
                        continue
                    }
                    try push(buffer[index], path: "list[\(position)]")
                } catch {
                    failure = error
                    return
                }
                lua_rawseti(state, list, position)
                position += 1
                index += 1
            }
        }
        lua_settop(state, list)
        if let failure {
            clua_pop(state, 1)
            throw failure
        }
        return makeReference()
    }

    /// Whether two elements are bit for bit the same value: the same number or string, or a table with the
    /// same storage — which implies equal contents, as storage shared by two values is never changed in place.
    /// (Reads the bits where they lie: copying the values out to compare them would retain their storage.)
    package static func isSameValue(_ buffer: UnsafeBufferPointer<LuaValue>, _ a: Int, _ b: Int) -> Bool {
        guard let base = buffer.baseAddress else { return false }
        return memcmp(UnsafeRawPointer(base + a), UnsafeRawPointer(base + b), MemoryLayout<LuaValue>.size) == 0
    }

    /// `table[key]`, read raw (no metamethod runs); `nil` when the value is `nil` or `table` is not a table.
    public func field(_ key: LuaKey, of table: LuaReference) throws(LuaError) -> LuaReference? {
        checkThread()
        pushReference(table)
        defer { lua_settop(state, 0) }
        guard lua_type(state, -1) == LUA_TTABLE else { return nil }
        try push(key.value)
        guard lua_rawget(state, -2) != LUA_TNIL else { return nil }
        return makeReference()
    }

    /// The Lua type name of the value behind `reference` (`"table"`, `"function"`, …).
    public func typeName(of reference: LuaReference) -> String {
        checkThread()
        pushReference(reference)
        defer { clua_pop(state, 1) }
        return String(cString: lua_typename(state, lua_type(state, -1)))
    }

    /// Where the Lua function behind `reference` is defined — its chunk as Lua shortens it (`app.lua`) and the line
    /// of its `function` — for errors about what it returned; nil for a C function or a value that is not a
    /// function.
    public func definition(of reference: LuaReference) -> (chunk: String, line: Int)? {
        checkThread()
        pushReference(reference)
        guard lua_type(state, -1) == LUA_TFUNCTION else {
            clua_pop(state, 1)
            return nil
        }
        var record = lua_Debug()
        guard lua_getinfo(state, ">S", &record) != 0, record.linedefined > 0 else { return nil } // (">" pops it)
        let chunk = withUnsafeBytes(of: record.short_src) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
        return (chunk, Int(record.linedefined))
    }

    /// Whether two references hold the same Lua value (for tables and functions: the same object).
    public func isSame(_ a: LuaReference, _ b: LuaReference) -> Bool {
        checkThread()
        pushReference(a)
        pushReference(b)
        defer { clua_pop(state, 2) }
        return lua_rawequal(state, -1, -2) != 0
    }

    // MARK: Internals

    /// Lua's own (uninterruptible, address-printing) `find`, `match`, `gmatch`, `gsub`, `format` and `tostring`,
    /// for differential tests only (trusted chunks see the same table as `referencestrings`).
    /// [-0, +0, -]
    func referencePatternFunctions() -> LuaReference {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.referenceStrings))
        return makeReference()
    }

    /// [-0, +0, -] Gives the function on top of the stack the default namespace's globals as its `_ENV` (with
    /// `hostModule`, a fresh strict environment of its own: a host module's).
    func setEnvironment(hostModule: Bool = false) throws(LuaError) {
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.environment))
        lua_pushboolean(state, hostModule ? 1 : 0)
        try protectedCall(arguments: 1, results: 1)
        if lua_setupvalue(state, -2, 1) == nil { clua_pop(state, 1) }
    }

    /// [-0, +results, -] Pushes `function` and `arguments`, calls, leaves the results; returns the stack base.
    func callLeavingResults(_ function: LuaReference, arguments: [LuaArgument],
                            handler: lua_CFunction = clua_message_handler) throws(LuaError) -> Int32 {
        checkThread()
        let base = lua_gettop(state)
        guard lua_checkstack(state, Int32(clamping: arguments.count + 2)) != 0 else {
            throw LuaError(.runtime, "too many arguments (\(arguments.count))")
        }
        pushReference(function)
        do throws(LuaError) {
            for (position, argument) in arguments.enumerated() {
                switch argument {
                case .value(let value): try push(value, path: "argument #\(position + 1)")
                case .reference(let reference): pushReference(reference)
                }
            }
        } catch {
            lua_settop(state, base)
            throw error
        }
        try protectedCall(arguments: Int32(arguments.count), results: LUA_MULTRET, handler: handler)
        return base
    }

    /// Whether `function` is a Lua function whose bytecode provably only reads the fields of its `argument`-th
    /// argument (1-based): no write into it, no copy of it anywhere, no call or return that includes it
    /// (`clua_reads_only_argument`; conservative: false for anything it cannot prove).
    public func readsOnly(argument: Int, of function: LuaReference) -> Bool {
        checkThread()
        let top = lua_gettop(state)
        defer { lua_settop(state, top) }
        guard lua_checkstack(state, 4) != 0 else { return false }
        clua_pushcfunction(state, clua_reads_only) // (protected: reading the bytecode allocates)
        pushReference(function)
        lua_pushinteger(state, lua_Integer(argument))
        return clua_pcall(state, 2, 1, 0) == LUA_OK && lua_toboolean(state, -1) != 0
    }

    /// [-0, +1, -] Pushes the value behind `reference`.
    func pushReference(_ reference: LuaReference) {
        precondition(reference.ledger === ledger, "a LuaReference was used with a VM it does not belong to")
        lua_rawgeti(state, clua_registryindex(), lua_Integer(reference.id))
    }

    /// [-1, +0, -] Moves the value on top of the stack into the registry.
    func makeReference() -> LuaReference {
        LuaReference(id: luaL_ref(state, clua_registryindex()), ledger: ledger)
    }
}

/// A global a chunk reads or writes by its name (`LuaVM.globalAccesses(in:chunkName:)`).
public struct LuaGlobalAccess: Sendable, Equatable {
    /// The global's name.
    public let name: String
    /// The line of the access.
    public let line: Int
    /// An assignment (`x = …`, `function x() end`, `_G.x = …`) rather than a read.
    public let writes: Bool
    /// Inside a function rather than at the chunk's top level.
    public let inFunction: Bool

    /// An access to the global `name` at `line`, a write or a read, in a function or at the top level.
    public init(name: String, line: Int, writes: Bool, inFunction: Bool) {
        self.name = name
        self.line = line
        self.writes = writes
        self.inFunction = inFunction
    }
}

extension LuaVM {
    /// The globals `source` reads and writes by name — `x`, `x = …`, `function x() end`, `_G.x`, `_G.x = …` —
    /// in its top level and in every function in it, read from its bytecode: the chunk is compiled, not run. (What
    /// a linter sees: a global reached by a computed name, `_G[name]`, is not listed.) A syntax error is thrown.
    public func globalAccesses(in source: String, chunkName: String) throws(LuaError) -> [LuaGlobalAccess] {
        checkThread()
        try loadChunk(source, chunkName: chunkName)
        clua_pushcfunction(state, clua_global_accesses)
        clua_insert(state, -2)
        try protectedCall(arguments: 1, results: 1)
        defer { clua_pop(state, 1) }
        let listed = try value(at: -1, root: "accesses")
        return (listed.table?.array ?? []).compactMap { access in
            guard let name = access["name"].string, let line = access["line"].integer else { return nil }
            return LuaGlobalAccess(name: name, line: Int(line), writes: access["write"] == true, inFunction: access["nested"] == true)
        }
    }
}
