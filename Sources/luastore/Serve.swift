import ArgumentParser
import Foundation
import LuaStoreCommandLine

/// `luastore serve` and `luastore token` belong to a program of their own, `luastore-serve` (the `serve/` package:
/// the server's libraries stay out of the core's builds). `luastore` runs it in its own place — found beside
/// `luastore`'s own file, or else on `PATH` — with the same arguments; its help, its errors and its exit status
/// are the command's.
enum ServeProgram {
    static let name = "luastore-serve"

    /// Replaces this process with `luastore-serve COMMAND ARGUMENTS…`; returns only by throwing, with why.
    static func exec(_ command: String, _ arguments: [String]) throws -> Never {
        guard let program = locate() else {
            Console.error("""
                luastore \(command) is the program \(name), which is neither beside luastore (\(ownFolder?.path ?? "unknown")) \
                nor on PATH: build it with `swift build --package-path serve` (it is built with a luastore beside it, \
                in serve/.build/debug) and run that, or copy \(name) beside this luastore
                """)
            throw ExitCode.unusable
        }
        Console.flush()
        let words = [program, command] + arguments
        var argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) }
        argv.append(nil)
        execv(program, &argv)
        let reason = String(cString: strerror(errno))
        Console.error("cannot run \(program): \(reason)")
        throw ExitCode.unusable
    }

    /// The folder of the running `luastore` (symbolic links followed).
    static var ownFolder: URL? {
        guard let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        return URL(fileURLWithPath: path).deletingLastPathComponent()
    }

    /// `luastore-serve` beside this program, or else the first on `PATH`.
    static func locate() -> String? {
        var candidates: [String] = []
        if let ownFolder { candidates.append(ownFolder.appendingPathComponent(name).path) }
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where !folder.isEmpty {
            candidates.append(String(folder) + "/" + name)
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

/// A command of `luastore-serve`, run through it with every argument as given.
protocol ServeCommand: ParsableCommand {
    /// The command's name in `luastore-serve`.
    static var name: String { get }
    var arguments: [String] { get }
}

extension ServeCommand {
    func run() throws {
        try ServeProgram.exec(Self.name, arguments)
    }
}

/// `luastore serve …`: `luastore-serve serve …` (docs/serve.md).
struct Serve: ServeCommand {
    static let name = "serve"
    static let configuration = CommandConfiguration(
        abstract: "Serve an app's stores over HTTP and WebSockets: one durable store per key (runs luastore-serve serve).",
        helpNames: [])

    @Argument(parsing: .captureForPassthrough, help: "What luastore-serve serve takes (luastore serve --help lists it).")
    var arguments: [String] = []
}

/// `luastore token …`: `luastore-serve token …` — the secret `serve --token-secret` takes, and tokens signed with it.
struct Token: ServeCommand {
    static let name = "token"
    static let configuration = CommandConfiguration(
        abstract: "Make the secret `luastore serve --token-secret` takes, and bearer tokens signed with it (runs luastore-serve token).",
        helpNames: [])

    @Argument(parsing: .captureForPassthrough, help: "What luastore-serve token takes (luastore token --help lists it).")
    var arguments: [String] = []
}

/// `luastore publish …`: `luastore-serve publish …` — a new version of a cluster's app, for every node.
struct Publish: ServeCommand {
    static let name = "publish"
    static let configuration = CommandConfiguration(
        abstract: "Publish a new version of a cluster's app for every node to install (runs luastore-serve publish).",
        helpNames: [])

    @Argument(parsing: .captureForPassthrough, help: "What luastore-serve publish takes (luastore publish --help lists it).")
    var arguments: [String] = []
}

/// `luastore export …`: `luastore-serve export …` — a cluster's journal of a key, as a recording.
struct Export: ServeCommand {
    static let name = "export"
    static let configuration = CommandConfiguration(
        abstract: "Write a key's journal in a cluster's database as a recording, for replay (runs luastore-serve export).",
        helpNames: [])

    @Argument(parsing: .captureForPassthrough, help: "What luastore-serve export takes (luastore export --help lists it).")
    var arguments: [String] = []
}
