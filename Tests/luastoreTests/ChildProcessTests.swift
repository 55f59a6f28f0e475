import Foundation
import LuaStoreTestSupport
import Testing

/// The tests' child-process helper: a child that ends without reading its input — as a CLI refusing its arguments
/// does — leaves the test process running (a pipe written by this process made Subprocess trap on its descriptor,
/// swiftlang/swift-subprocess#367, and took every test down with it).
@Suite struct ChildProcessTests {
    @Test func aChildThatReadsNoneOfItsInputEndsCleanly() async throws {
        let input = String(repeating: "{\"type\":\"increment\"}\n", count: 200_000) // (4 MB: far more than a pipe holds)
        for _ in 0..<3 {
            let result = try await runChildProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "exit 3"], input: input)
            #expect(result.status == 3)
        }
        let head = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/head"), ["-n", "1"], input: input)
        #expect(head.output == "{\"type\":\"increment\"}\n")
    }

    /// A child that outlives its deadline is killed and the call throws; the caller is not held by the child.
    @Test(.startsChildProcesses) func aChildPastItsDeadlineIsKilled() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let pidFile = folder.appendingPathComponent("pid")
        let failure = await #expect(throws: ChildProcessTimedOut.self) {
            _ = try await runChildProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "echo $$ > '\(pidFile.path)'; exec sleep 600"],
                                          timeout: .seconds(2))
        }
        #expect(failure?.stopped == true)
        #expect(failure?.description.contains("sleep 600") == true)
        let pid = try #require(Int32(String(contentsOf: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(kill(pid, 0) == -1 && errno == ESRCH, "the child \(pid) outlived its deadline")
    }

    @Test(.startsChildProcesses) func statusOutputAndErrorsAreTheChilds() async throws {
        let result = try await runChildProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "echo out; echo err >&2; exit 7"])
        #expect(result.status == 7)
        #expect(result.outputLines == ["out"])
        #expect(result.errors == "err\n")
    }
}
