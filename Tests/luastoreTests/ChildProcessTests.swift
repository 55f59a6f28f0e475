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
}
