import Foundation
import Testing

/// The `luakit` tool, run as a built binary.
@Suite struct LuakitToolTests {
    /// The built `luakit`, next to the test binary in the build folder.
    static var binary: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("luakit")
    }

    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    struct Run {
        var status: Int32
        var output: String
        var errors: String
    }

    static func run(_ arguments: [String]) throws -> Run {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.currentDirectoryURL = packageRoot
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, output: String(decoding: outputData, as: UTF8.self),
                   errors: String(decoding: errorData, as: UTF8.self))
    }

    @Test func runsTheTourSample() throws {
        let run = try Self.run(["samples/tour/tour.lua"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == """
            hello from tour, inside the sandbox
            {inventory = {"apples 5", "figs   0", "pears  3"}, tampering = "refused", \
            undeclared = "tour.lua:18: assignment to undeclared global 'total' (declare it with 'local')", \
            words = "THE QUICK BROWN FOX"}

            """)
        #expect(run.errors.isEmpty)
    }

    @Test func reportsScriptErrorsWithFileAndLine() throws {
        let folder = try makeTemporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("loop.lua")
        try Data("local n = 0\nwhile true do n = n + 1 end\n".utf8).write(to: script)
        let run = try Self.run([script.path, "--time-budget-ms", "50"])
        #expect(run.status == 1)
        #expect(run.errors == "luakit: loop.lua:2: time budget of 50 ms exceeded\n")
        #expect(run.output.isEmpty)
    }

    @Test func refusesBadUsage() throws {
        #expect(try Self.run([]).status == 2)
        #expect(try Self.run(["a.lua", "b.lua"]).status == 2)
        #expect(try Self.run(["x.lua", "--memory-mb", "zero"]).status == 2)
        #expect(try Self.run(["/nonexistent/file.lua"]).status == 2)
    }
}
