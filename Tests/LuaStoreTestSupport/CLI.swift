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

    /// Runs the built `luastore` from the package's root (see `runChildProcess`).
    public static func run(_ arguments: [String], input: String? = nil) async throws -> ChildProcessResult {
        try await runChildProcess(binary, arguments, input: input, directory: packageRoot)
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
