import CLua
import CLuaGuard
import Foundation

/// Loading code: chunks compiled into functions, modules required, namespaces made, trusted chunks and libraries.
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

    /// A source file's bytes as Lua reads a file it loads (`luaL_loadfilex`: a script, a module, `loadfile`,
    /// `dofile`): a UTF-8 byte-order mark is skipped, and a first line that starts with `#` (`#!/usr/bin/env lua`)
    /// is skipped but for its line break, so the lines after it keep their numbers.
    public static func fileSource(_ bytes: Data) -> Data {
        var source = bytes[...]
        if source.starts(with: [0xEF, 0xBB, 0xBF]) { source = source.dropFirst(3) }
        guard source.first == UInt8(ascii: "#") else { return Data(source) }
        guard let lineBreak = source.firstIndex(of: UInt8(ascii: "\n")) else { return Data([UInt8(ascii: "\n")]) }
        return Data(source[lineBreak...])
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
    /// a message about one of its own variables says `?` for the name. With `keepingLines: false` as well they keep
    /// no lines either (≈ a tenth less again): a message raised in the library itself names no place (messages it
    /// raises at its caller's level name the caller's), and a traceback names the chunk without a line.
    public func loadTrusted(_ source: String, chunkName: String, keepingNames: Bool = true, keepingLines: Bool = true)
        throws(LuaError) -> LuaReference {
        checkThread()
        let debug: DebugInfo = keepingNames ? .all : keepingLines ? .lines : .none
        try loadChunk(source, chunkName: chunkName.hasPrefix("host:") ? chunkName : "host:" + chunkName, debug: debug)
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
}
