import ArgumentParser
import Foundation

/// `luastore`: run, test, check and replay LuaStore apps from the command line.
@main
struct LuaStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "luastore",
        abstract: "Run, test, check and replay LuaStore apps (Lua reducers on a Swift store).",
        subcommands: [Run.self, Check.self, SpecTest.self, Replay.self])

    /// Parses and runs; usage errors exit with status 2 (not ArgumentParser's 64).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            if code == .success || code.rawValue == 1 || code.rawValue == 2 {
                exit(withError: error)
            }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            Foundation.exit(code == .validationFailure || code.rawValue == 64 ? 2 : code.rawValue)
        }
    }
}

/// Writes to standard output and standard error, a line at a time.
enum Console {
    private static let lock = NSLock()

    static func out(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        lock.lock()
        defer { lock.unlock() }
        FileHandle.standardError.write(Data(("luastore: " + text + "\n").utf8))
    }
}

extension ExitCode {
    /// A failure of the app (a malformed action, a reducer error).
    static let appFailure = ExitCode(1)
    /// A usage error or an app that cannot be loaded.
    static let unusable = ExitCode(2)
}
