import ArgumentParser
import Foundation
import LuaStoreCommandLine
import LuaStoreConcurrency
import LuaStoreScripting

/// `luastore`: run, test, check and replay LuaStore apps from the command line.
@main
struct LuaStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "luastore",
        abstract: "Run, test, check and replay LuaStore apps (Lua reducers on a Swift store); pack, sign and verify them as bundles.",
        version: "luastore, scripting API \(AppManifest.scriptingAPI) (what an app's luastore.json names in its \"luastore\" range)",
        subcommands: [Run.self, Serve.self, Token.self, Publish.self, Export.self, Check.self, SwiftTypesCommand.self, SpecTest.self, Replay.self, Keygen.self, Pack.self, Verify.self])

    /// Parses and runs; usage errors exit with status 2 (not ArgumentParser's 64).
    static func main() async {
        await CommandMain.run(Self.self)
    }
}

/// What a one-shot command keeps until the process exits: a store whose state is large is not taken apart item by
/// item only for the process to end (100,000 items: ≈ 40 ms of freeing, a tenth of a replay's start). Whatever must
/// be written — a recording, a database, standard output — is closed or flushed by the command itself first.
enum UntilExit {
    private static let kept = Protected<[any Sendable]>([])

    static func keep(_ value: any Sendable) {
        kept.withLock { $0.append(value) }
    }
}
