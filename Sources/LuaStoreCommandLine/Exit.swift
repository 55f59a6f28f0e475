import ArgumentParser
import Foundation

extension ExitCode {
    /// A failure of the app (a malformed action, a reducer error).
    public static let appFailure = ExitCode(1)
    /// A usage error or an app that cannot be loaded.
    public static let unusable = ExitCode(2)
}

/// How the LuaStore programs (`luastore`, `luastore-serve`) start: parse, run, and end with the statuses
/// docs/cli.md gives — 0, 1 for a failure of the app, 2 for a usage error or an app that cannot be loaded (not
/// ArgumentParser's 64).
public enum CommandMain {
    /// Parses the process's arguments as `root` and runs the command they name; never returns.
    public static func run(_ root: any ParsableCommand.Type) async -> Never {
        // A write past the file-size limit (`ulimit -f`) fails with EFBIG, said in words, rather than killing the
        // process mid-file.
        signal(SIGXFSZ, SIG_IGN)
        do {
            var command = try root.parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            reportOutputFailure()
            Foundation.exit(0)
        } catch {
            reportOutputFailure()
            let code = root.exitCode(for: error)
            if code == .success || code.rawValue == 1 || code.rawValue == 2 {
                root.exit(withError: error)
            }
            let message = root.fullMessage(for: error)
            if !message.isEmpty { FileHandle.standardError.write(Data((message + "\n").utf8)) }
            Foundation.exit(code == .validationFailure || code.rawValue == 64 ? 2 : code.rawValue)
        }
    }

    /// A failure to write standard output, said in words, and exit status 1 (after everything else the command
    /// wrote: its state file, its recording).
    private static func reportOutputFailure() {
        Console.flush()
        guard let reason = Console.outputFailure else { return }
        Console.error("cannot write to standard output: \(reason)")
        Foundation.exit(1)
    }
}
