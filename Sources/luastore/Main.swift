import ArgumentParser
import Foundation
import LuaStoreConcurrency
import LuaStoreScripting

/// `luastore`: run, test, check and replay LuaStore apps from the command line.
@main
struct LuaStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "luastore",
        abstract: "Run, test, check and replay LuaStore apps (Lua reducers on a Swift store); pack, sign and verify them as bundles.",
        version: "luastore, scripting API \(AppManifest.scriptingAPI) (what an app's luastore.json names in its \"luastore\" range)",
        subcommands: [Run.self, Serve.self, Token.self, Check.self, SpecTest.self, Replay.self, Keygen.self, Pack.self, Verify.self])

    /// Parses and runs; usage errors exit with status 2 (not ArgumentParser's 64).
    static func main() async {
        // A write past the file-size limit (`ulimit -f`) fails with EFBIG, said in words, rather than killing the
        // process mid-file.
        signal(SIGXFSZ, SIG_IGN)
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            reportOutputFailure()
        } catch {
            reportOutputFailure()
            let code = exitCode(for: error)
            if code == .success || code.rawValue == 1 || code.rawValue == 2 {
                exit(withError: error)
            }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            Foundation.exit(code == .validationFailure || code.rawValue == 64 ? 2 : code.rawValue)
        }
    }
}

/// A failure to write standard output, said in words, and exit status 1 (after everything else the command wrote:
/// its state file, its recording).
private func reportOutputFailure() {
    Console.flush()
    guard let reason = Console.outputFailure else { return }
    Console.error("cannot write to standard output: \(reason)")
    Foundation.exit(1)
}

/// Writes to standard output and standard error with `write(2)`: a failing write is never a crash. The first
/// failure to write standard output (a full disk, `> /dev/full`) is kept, further output is dropped, and the
/// command reports it in words when it ends (`outputFailure`). A closed pipe (`| head -1`) ends the process
/// quietly, as SIGPIPE does for any Unix tool. Standard output is written a line at a time, or — while
/// `buffered` (a run working through a file of actions) — in blocks of 64 KiB and whenever buffering stops;
/// anything written to standard error first writes out what standard output holds, so the two stay in order.
enum Console {
    /// What standard output holds and how it is written.
    private struct Output {
        var failure: String?
        var pending: [UInt8] = []
        var buffering = false

        mutating func writePending() {
            guard !pending.isEmpty else { return }
            if failure == nil, let reason = Console.write(pending, to: STDOUT_FILENO) { failure = reason }
            pending.removeAll(keepingCapacity: pending.count <= Console.blockSize * 2)
        }
    }

    private static let output = Protected(Output())
    private static let blockSize = 64 << 10

    static func out(_ text: String) {
        output.withLock { output in
            guard output.failure == nil else { return }
            output.pending.append(contentsOf: text.utf8)
            output.pending.append(10)
            if !output.buffering || output.pending.count >= blockSize { output.writePending() }
        }
    }

    /// A message on standard error: "luastore: " and `text` on a line of its own (or, not `prefixed`, `text` as it
    /// is: a prompt).
    static func error(_ text: String, prefixed: Bool = true) {
        output.withLock { output in
            output.writePending()
            _ = write(Array((prefixed ? "luastore: " + text + "\n" : text).utf8), to: STDERR_FILENO) // (nowhere left to say it failed)
        }
    }

    /// Whether standard output is kept in blocks (see above); turning it off writes out what is kept.
    static var buffered: Bool {
        get { output.withLock { $0.buffering } }
        set {
            output.withLock { output in
                output.buffering = newValue
                if !newValue { output.writePending() }
            }
        }
    }

    /// Writes out what standard output holds.
    static func flush() {
        output.withLock { $0.writePending() }
    }

    /// Why standard output could not be written, in words, if it could not.
    static var outputFailure: String? {
        output.withLock { $0.failure }
    }

    /// Writes all of `bytes`; returns the reason it could not, in words.
    private static func write(_ bytes: [UInt8], to descriptor: Int32) -> String? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return OutputFailure.words(errno)
            }
            offset += written
        }
        return nil
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

extension ExitCode {
    /// A failure of the app (a malformed action, a reducer error).
    static let appFailure = ExitCode(1)
    /// A usage error or an app that cannot be loaded.
    static let unusable = ExitCode(2)
}
