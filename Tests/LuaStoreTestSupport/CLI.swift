import Foundation
import Testing

/// Runs the built `luastore` binary (tests of the CLI and of the devtools).
public enum CLI {
    public static var buildFolder: URL { URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent() }
    public static var binary: URL { buildFolder.appendingPathComponent("luastore") }

    public static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    public static func golden(_ name: String) -> URL {
        packageRoot.appendingPathComponent("Tests/luastoreTests/golden/\(name)")
    }

    /// What the built binary is run with: a default time budget no loaded machine reaches by pausing a call (the
    /// default 200 ms, counted on the wall clock, was: loading a tiny app beside busy loops). Tests of budgets
    /// pass `--time-budget-ms`, which wins.
    public static let environment = ["LUASTORE_TIME_BUDGET_MS": "30000"]

    /// `environment` as `KEY=value` words, for a shell command that runs the binary (`env` before it).
    public static var environmentWords: [String] { environment.map { "\($0.key)=\($0.value)" } }

    /// Runs the built `luastore` from the package's root (see `runChildProcess`), with `environment` (and
    /// `extraEnvironment` over it).
    public static func run(_ arguments: [String], input: String? = nil, extraEnvironment: [String: String] = [:]) async throws
        -> ChildProcessResult {
        let result = try await runChildProcess(binary, arguments, input: input, directory: packageRoot,
                                               environment: environment.merging(extraEnvironment) { $1 })
        if let raw = rawErrorText(in: result.errors + result.output) {
            Issue.record("luastore \(arguments.joined(separator: " ")) showed a library's raw error text (\(raw)): \(result.errors)")
        }
        return result
    }

    /// What would show that a library's error reached a user as it was (every run through `run` is checked):
    /// users get words, never `Error Domain=…`, `NSCocoaErrorDomain error 512`, `ArchiveError error 3`.
    public static let rawErrorMarks = ["Error Domain=", "NSCocoaErrorDomain", "NSPOSIXErrorDomain", "ArchiveError", "CompressionError",
                                       "The operation could not be completed", "DatabaseError(", "Fatal error:"]

    /// The first of `rawErrorMarks` in `text`, if any.
    public static func rawErrorText(in text: String) -> String? {
        rawErrorMarks.first { text.contains($0) }
    }

    /// A copy of a sample in a temporary folder (removed by the caller).
    public static func copySample(_ name: String) throws -> URL {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-cli-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: packageRoot.appendingPathComponent("samples/\(name)"), to: copy)
        return copy
    }

    /// A temporary app folder whose `app.lua` is `source` (removed by the caller).
    public static func makeApp(_ source: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(source.utf8).write(to: folder.appendingPathComponent("app.lua"))
        return folder
    }
}
