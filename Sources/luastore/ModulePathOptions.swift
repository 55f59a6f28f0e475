import ArgumentParser
import LuaKit

/// `--lua-path`: where `require` looks after the app's folder, as stock `lua5.4` takes its module path.
struct ModulePathOptions: ParsableArguments {
    @Option(name: .customLong("lua-path"), help: ArgumentHelp(
        "Where require looks after the app's folder: Lua path templates separated by ';' (';;' is the default). Default: LUA_PATH_5_4, else LUA_PATH, else Debian's lua5.4 default (/usr/share/lua/5.4/?.lua, …). Lua source only.",
        valueName: "path"))
    var luaPath: String?

    /// The templates in effect.
    var templates: [String] { LuaModulePath.resolve(option: luaPath) }
}
