import Foundation
import LuaStoreTestSupport
import Testing

/// Runs the built `luastore` binary.
enum CLI {
    static var buildFolder: URL { URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent() }
    static var binary: URL { buildFolder.appendingPathComponent("luastore") }

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    static func golden(_ name: String) -> URL {
        packageRoot.appendingPathComponent("Tests/luastoreTests/golden/\(name)")
    }

    struct Result {
        var status: Int32
        var output: String
        var errors: String
        var outputLines: [String] { output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init) }
    }

    static func run(_ arguments: [String], input: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.currentDirectoryURL = packageRoot
        let output = Pipe()
        let errors = Pipe()
        let standardInput = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = standardInput
        try process.run()
        if let input { standardInput.fileHandleForWriting.write(Data(input.utf8)) }
        try standardInput.fileHandleForWriting.close()
        let errorData = Locked(Data())
        let reader = Thread { errorData.withLock { $0 = errors.fileHandleForReading.readDataToEndOfFile() } }
        reader.start()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !reader.isFinished { Thread.sleep(forTimeInterval: 0.005) }
        return Result(status: process.terminationStatus, output: String(decoding: outputData, as: UTF8.self),
                      errors: String(decoding: errorData.value, as: UTF8.self))
    }

    /// `run` on a thread of its own, so that servers in this process keep running while the binary works
    /// (blocking the cooperative pool would starve them).
    static func runDetached(_ arguments: [String], input: String? = nil) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Swift.Result { try run(arguments, input: input) }) }.start()
        }
    }

    /// A copy of a sample in a temporary folder (removed by the caller).
    static func copySample(_ name: String) throws -> URL {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-cli-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: packageRoot.appendingPathComponent("samples/\(name)"), to: copy)
        return copy
    }
}
