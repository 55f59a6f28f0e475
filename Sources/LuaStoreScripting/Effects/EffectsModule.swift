import LuaKit

/// The `luastore` module scripts `require`: constructors for the effects a reducer returns (commands) or
/// `subscriptions` declares (`luastore.lua` beside this file, embedded at build time). Each returns a plain
/// table, so a spec can compare exactly what a reducer returned; a malformed description is an error naming the
/// field. `ScriptedStore` defines it in its VM; hosts that run app modules outside one (a spec runner) call
/// `define(in:)`.
public enum EffectsModule {
    /// The module's name: `require("luastore")`.
    public static let name = "luastore"

    /// Makes `require("luastore")` return the module in `vm`'s scripts.
    public static func define(in vm: LuaVM) throws(LuaError) {
        try vm.define(module: name, source: EmbeddedLua.luastore.source, chunkName: EmbeddedLua.luastore.path)
    }
}
