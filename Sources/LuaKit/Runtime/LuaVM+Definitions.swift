import CLua
import CLuaGuard
import Foundation

/// What the host adds to the sandbox: globals, functions, modules, and the seal on its own tables.
extension LuaVM {
    /// Adds a global every chunk loaded afterwards sees; tables become read-only.
    public func define(global name: String, _ value: LuaValue) throws(LuaError) {
        try define(name, value, through: sandbox.define)
    }

    /// Calls the prelude's `define` or `definemodule` (the interface slot `function`) with `name` and `value`.
    private func define(_ name: String, _ value: LuaValue, through function: Int32) throws(LuaError) {
        checkThread()
        lua_rawgeti(state, clua_registryindex(), lua_Integer(function))
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
        try define(name, value, through: sandbox.defineModule)
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
}
