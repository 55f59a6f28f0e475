import ArgumentParser
import LuaStoreCommandLine

/// `luastore-serve`: the `serve` and `token` commands of `luastore`, which runs this program for them (its
/// usage reads `luastore serve …`, as users call it).
@main
struct LuaStoreServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "luastore",
        abstract: "Serve an app's stores over HTTP and WebSockets (luastore serve), make the tokens clients present (luastore token), publish a new version to a cluster (luastore publish), write a cluster's journal of a key as a recording (luastore export).",
        subcommands: [Serve.self, Token.self, Publish.self, Export.self])

    static func main() async {
        await CommandMain.run(Self.self)
    }
}
