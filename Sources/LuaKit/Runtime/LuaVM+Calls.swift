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
    /// Compiles `source` into a function whose globals are the default namespace's: the chunks `load` compiles
    /// and the modules they `require` share one global table, as Lua's chunks share `_G`.
    ///
    /// `chunkName` is what tracebacks and errors show (`app.lua:12`). Binary chunks are refused.
    public func load(_ source: String, chunkName: String) throws(LuaError) -> LuaReference {
        checkThread()
        try loadChunk(source, chunkName: chunkName)
        return try withDefaultGlobals([:])
    }

    /// Compiles `source`'s bytes like `load(_:chunkName:)`, as Lua reads a source file: a string literal may hold
    /// bytes that are not UTF-8 text. For a file loaded once (a script, a spec); `load(_:chunkName:)` keeps what it
    /// compiled for the next VM.
    public func load(bytes source: some ContiguousBytes, chunkName: String) throws(LuaError) -> LuaReference {
        checkThread()
        try loadChunk(bytes: source, chunkName: chunkName)
        return try withDefaultGlobals([:])
    }

    /// Compiles `source` like `load(_:chunkName:)`, with `globals` set in the default namespace's globals first (for
    /// harnesses that give scripts functions of their own, such as a spec runner's `describe` and `it`: the
    /// chunk and what it requires see them, as busted's helpers are globals).
    public func load(_ source: String, chunkName: String, globals: [String: LuaReference]) throws(LuaError) -> LuaReference {
        checkThread()
        try loadChunk(source, chunkName: chunkName)
        return try withDefaultGlobals(globals)
    }

    /// `load(bytes:chunkName:)` with `globals` set first, as `load(_:chunkName:globals:)` sets them.
    public func load(bytes source: some ContiguousBytes, chunkName: String, globals: [String: LuaReference]) throws(LuaError) -> LuaReference {
        checkThread()
        try loadChunk(bytes: source, chunkName: chunkName)
        return try withDefaultGlobals(globals)
    }

    /// [-1, +0, -] Gives the chunk on top the default namespace's globals, with `globals` set in them (raw: a
    /// harness's names stand beside the standard ones), and returns it.
    private func withDefaultGlobals(_ globals: [String: LuaReference]) throws(LuaError) -> LuaReference {
        try setEnvironment()
        if !globals.isEmpty, lua_getupvalue(state, -1, 1) != nil {
            for (name, value) in globals {
                pushString(name)
                pushReference(value)
                lua_rawset(state, -3)
            }
            clua_pop(state, 1)
        }
        return makeReference()
    }

    /// From now on a script may set a global only while a module loads (in a `require`): what a store calls once
    /// its app has loaded, so that no reducer, props function or migration keeps state outside the journal. An
    /// assignment to a global anywhere else fails, naming its line. (Reassigning a standard name such as `print`
    /// is not caught: see docs/lua.md.)
    public func lockGlobals() throws(LuaError) {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.lock))
        try protectedCall(arguments: 0, results: 0)
    }

    /// Compiles and runs `source`, returning its results converted to Swift.
    public func run(_ source: String, chunkName: String) throws(LuaError) -> [LuaValue] {
        let chunk = try load(source, chunkName: chunkName)
        return try call(chunk, arguments: [])
    }

    /// Loads the app module `name` from `moduleRoot` (once; later calls return the same value), as a script's
    /// `require(name)` would.
    public func require(_ name: String) throws(LuaError) -> LuaReference {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.require))
        pushString(name)
        try protectedCall(arguments: 1, results: 1)
        return makeReference()
    }

    /// A new module namespace: `require` in it has a cache of its own, so a new version of an app's modules
    /// can be loaded beside the running one (and dropped if it fails), and its modules share one global table of
    /// their own, as Lua's chunks share `_G`. Built-in modules are shared.
    ///
    /// With `strictGlobals`, globals are strict as under Lua's `strict.lua`: a function that reads a global
    /// nobody set, or assigns a new one, fails naming it; a chunk's top level may do both.
    public func makeNamespace(strictGlobals: Bool = false) throws(LuaError) -> LuaNamespace {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.namespace))
        lua_pushnil(state)
        lua_pushboolean(state, strictGlobals ? 1 : 0)
        try protectedCall(arguments: 2, results: 1)
        return LuaNamespace(require: makeReference())
    }

    /// A new module namespace whose modules come from `root` rather than `moduleRoot`: its `require`,
    /// `loadfile` and `dofile` read files inside `root` only (and the module path), and its chunks are named
    /// `chunkPrefix` + their path in `root` (`plugins/cart/` + `cart.lua`), so errors say where a file lies. For
    /// code of another origin sharing the VM, such as a plugin an app mounts. `strictGlobals` as for
    /// `makeNamespace(strictGlobals:)`.
    public func makeNamespace(root: URL, chunkPrefix: String, strictGlobals: Bool = false) throws(LuaError) -> LuaNamespace {
        checkThread()
        let folder = ModuleFolder(root: root.standardizedFileURL.resolvingSymlinksInPath(), chunkPrefix: chunkPrefix)
        let number = moduleFolders.firstIndex(of: folder).map { $0 + 1 } ?? {
            moduleFolders.append(folder)
            return moduleFolders.count
        }()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.namespace))
        lua_pushinteger(state, lua_Integer(number))
        lua_pushboolean(state, strictGlobals ? 1 : 0)
        try protectedCall(arguments: 2, results: 1)
        return LuaNamespace(require: makeReference())
    }

    /// Loads the app module `name` in `namespace` (once per namespace).
    public func require(_ name: String, in namespace: LuaNamespace) throws(LuaError) -> LuaReference {
        checkThread()
        pushReference(namespace.requireFunction)
        pushString(name)
        try protectedCall(arguments: 1, results: 1)
        return makeReference()
    }

    /// Compiles trusted host code (a library shipped with the host, never a script) against the VM's real
    /// global table: the base library without the sandbox's guards (`setmetatable` with `__mode`, raw access),
    /// plus `string`, `table`, `math` and `utf8`. It still runs under the time budget and memory cap, and it
    /// still has no `io`, `os`, `package`, `debug` or `coroutine`. Its chunk name gets the prefix `host:`, and
    /// errors are blamed on the script code that called into it, not on its own lines.
    ///
    /// Trusted code also sees `restartbudget()`, which gives the running call a fresh time budget counted from
    /// now: a host loop that runs many script functions in one call (a run of actions) gives each its own;
    /// `istable(v)` and `isstring(v)`, type tests that make no string (for hot paths such as a write barrier);
    /// and whatever a higher layer registered with `defineTrusted(library:)`.
    ///
    /// With `keepingNames: false` the compiled functions keep no names of their local variables and upvalues
    /// (their lines stay): a library loaded into every VM of a process then costs about a third less memory, and
    /// a message about one of its own variables says `?` for the name.
    public func loadTrusted(_ source: String, chunkName: String, keepingNames: Bool = true) throws(LuaError) -> LuaReference {
        checkThread()
        try loadChunk(source, chunkName: chunkName.hasPrefix("host:") ? chunkName : "host:" + chunkName, named: keepingNames)
        return makeReference()
    }

    /// Gives trusted host code (`loadTrusted`) the C functions of a higher layer's C target, as globals of the
    /// real global table, which scripts never see. `library` is the opaque list such a target hands out (a
    /// `luaL_Reg` array ending in `{NULL, NULL}`, as `clua_state_library()` gives the scripted store's state
    /// engine): the layer above names no Lua type, and LuaKit stays the one layer that handles Lua's pointers.
    public func defineTrusted(library: UnsafeRawPointer) throws(LuaError) {
        checkThread()
        let define = try loadTrusted("local name, value = ...\n_ENV[name] = value", chunkName: "host:defineTrusted")
        var entry = library.assumingMemoryBound(to: luaL_Reg.self)
        while let name = entry.pointee.name, let function = entry.pointee.func {
            pushReference(define)
            pushString(String(cString: name))
            clua_pushcfunction(state, function)
            try protectedCall(arguments: 2, results: 0) // (setting a global may need memory: a Lua error)
            entry += 1
        }
    }

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
    /// or keep), anything else is reused.
    public func reference(toList values: ArraySlice<LuaValue>) throws(LuaError) -> LuaReference {
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
                        clua_repeat_in_list(state, list, position, position + repeated - 1, list + 1, &shape)
                        try refuseIfOverCap(above: list + 1)
                        position += repeated
                        index = end
                        continue
                    }
                    shape = CLuaCopyShape(sequence: -1, others: -1, entries: 0, flat: 0)
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
    private static func isSameValue(_ buffer: UnsafeBufferPointer<LuaValue>, _ a: Int, _ b: Int) -> Bool {
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

    /// Whether two references hold the same Lua value (for tables and functions: the same object).
    public func isSame(_ a: LuaReference, _ b: LuaReference) -> Bool {
        checkThread()
        pushReference(a)
        pushReference(b)
        defer { clua_pop(state, 2) }
        return lua_rawequal(state, -1, -2) != 0
    }

    /// Adds a global every chunk loaded afterwards sees; tables become read-only.
    public func define(global name: String, _ value: LuaValue) throws(LuaError) {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.define))
        pushString(name)
        try push(value)
        try protectedCall(arguments: 2, results: 0)
    }

    /// Adds a global Swift function every chunk loaded afterwards sees. Its arguments and results are
    /// converted; a thrown error becomes a Lua error at the script's call site.
    public func define(global name: String, function: @escaping ([LuaValue]) throws -> [LuaValue]) throws(LuaError) {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.define))
        pushString(name)
        pushConvertingFunction(name, function)
        try protectedCall(arguments: 2, results: 0)
    }

    /// A Swift function as a Lua value, to hand to a script (an argument of a call, a field of a module) rather
    /// than to make global; arguments, results and errors as `define(global:function:)`'s. `name` is what
    /// messages about its arguments call it.
    public func function(named name: String, _ function: @escaping ([LuaValue]) throws -> [LuaValue]) -> LuaReference {
        checkThread()
        pushConvertingFunction(name, function)
        return makeReference()
    }

    /// [-0, +1, -] A host function converting its arguments and results.
    private func pushConvertingFunction(_ name: String, _ function: @escaping ([LuaValue]) throws -> [LuaValue]) {
        pushHostFunction(name) { vm throws(HostFailure) in
            let count = lua_gettop(vm.state)
            var arguments: [LuaValue] = []
            do {
                for index in stride(from: 1, through: count, by: 1) {
                    arguments.append(try vm.value(at: index, root: "argument #\(index) to '\(name)'"))
                }
                let results = try function(arguments)
                for result in results { try vm.push(result) }
                return Int32(results.count)
            } catch let error as LuaError where error.kind == .memory {
                throw .memory
            } catch {
                throw .message(String(describing: error))
            }
        }
    }

    /// Makes `value` the result of `require(name)` in every script; tables become read-only.
    public func define(module name: String, _ value: LuaValue) throws(LuaError) {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.defineModule))
        pushString(name)
        try push(value)
        try protectedCall(arguments: 2, results: 0)
    }

    /// Makes trusted `source` the module `name` (a library the host ships, such as an effects API): `require(name)`
    /// returns what it returns; tables become read-only. Its chunk is named `chunkName` (by default `name.lua`) in
    /// messages and tracebacks. It is compiled now (a syntax error is thrown here) and runs at its first `require`,
    /// within the call of the script that requires it: a VM whose scripts never require it holds none of it.
    public func define(module name: String, source: String, chunkName: String? = nil) throws(LuaError) {
        checkThread()
        let chunkName = chunkName ?? name + ".lua"
        var dump = CompiledChunks.shared.dump(of: source, chunkName: chunkName)
        if dump == nil {
            try loadChunk(source, chunkName: chunkName) // (compiled, and kept unless the process keeps no more)
            dump = CompiledChunks.shared.dump(of: source, chunkName: chunkName)
            if dump != nil { clua_pop(state, 1) }
        }
        if let dump {
            deferredModules[name] = (dump, chunkName)
            lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.defineDeferred))
            pushString(name)
            try protectedCall(arguments: 1, results: 0)
            return
        }
        // (The process keeps no more compiled chunks: the module runs now.)
        try setEnvironment(hostModule: true)
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.defineModule))
        clua_insert(state, -2)
        pushString(name)
        clua_insert(state, -2)
        try protectedCall(arguments: 0, results: 1)
        try protectedCall(arguments: 2, results: 0)
    }

    /// Makes the sandbox's `rawset` refuse every table whose metatable has `__metatable = marker`: for host
    /// tables that must change only through their metamethods (a store's state proxies, whose `__newindex`
    /// journals each write). Trusted host code keeps the real `rawset`.
    public func sealRawWrites(metatableMarker marker: String) throws(LuaError) {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(sandbox.seal))
        pushString(marker)
        try protectedCall(arguments: 1, results: 0)
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
    func callLeavingResults(_ function: LuaReference, arguments: [LuaArgument]) throws(LuaError) -> Int32 {
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
        try protectedCall(arguments: Int32(arguments.count), results: LUA_MULTRET)
        return base
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
