import Foundation
import LuaStoreTestSupport
import Testing

/// The tests' child-process runner (`runChildProcess`), which every test of a built binary goes through: what a
/// child wrote and how it ended come back whole, a child never inherits what the test process changed, a child that
/// ends without reading its input — as a CLI refusing its arguments does — leaves the test process running (a pipe
/// written by this process made Subprocess trap on its descriptor, swiftlang/swift-subprocess#367), and no child —
/// nor what it leaves running — holds a test past its timeout.
@Suite(.startsChildProcesses) struct ChildProcessTests {
    let shell = URL(fileURLWithPath: "/bin/sh")

    @Test func outputErrorsStatusDirectoryAndEnvironmentComeBack() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = #"cat; printf '%s|%s\n' "$PWD" "$WORD"; head -c 200000 /dev/zero | tr '\0' x; echo oops >&2; exit 3"#
        let result = try await runChildProcess(shell, ["-c", script], input: "given\n", directory: folder, environment: ["WORD": "hello"])
        #expect(result.status == 3)
        #expect(result.output.hasPrefix("given\n\(folder.resolvingSymlinksInPath().path)|hello\n"), "\(result.output.prefix(200))")
        #expect(result.output.count == "given\n\(folder.resolvingSymlinksInPath().path)|hello\n".count + 200_000)
        #expect(result.errors == "oops\n")
    }

    /// A signal's number is the status; a test runner ignores SIGPIPE (to survive a child that stops reading), and
    /// its children must not: `yes | head` ends `yes` by SIGPIPE as in a shell.
    @Test func signalsEndChildrenAsTheyWouldInAShell() async throws {
        let killed = try await runChildProcess(shell, ["-c", "kill -TERM $$"])
        #expect(killed.status == SIGTERM)
        signal(SIGPIPE, SIG_IGN)
        // (`yes` ended by SIGPIPE: 128 + 13; had it inherited the ignored signal, it would fail on EPIPE: 1.)
        let piped = try await runChildProcess(shell, ["-c", "(yes; echo $? >&2) | head -n 1"])
        #expect(piped.output == "y\n")
        #expect(piped.errors.trimmingCharacters(in: .whitespacesAndNewlines) == "141", "\(piped.errors)")
    }

    /// The deadline holds whatever the child does: one that sleeps past it is killed and the call throws; one that
    /// exits leaving a descendant with its output open is answered when it exits — had the runner waited for the end
    /// of the output, the descendant's two minutes would have outlasted its deadline. (No clock read: the test
    /// process's own pool may be slow under load, the outcome may not.)
    @Test func noChildHoldsATestPastItsTimeout() async throws {
        await #expect(throws: ChildProcessTimedOut.self) {
            try await runChildProcess(shell, ["-c", "sleep 120"], timeout: .seconds(1))
        }
        let result = try await runChildProcess(shell, ["-c", "sleep 120 & echo $!"], timeout: .seconds(60))
        #expect(result.status == 0)
        let descendant = try #require(Int32(result.output.trimmingCharacters(in: .whitespacesAndNewlines)), "\(result.output)")
        #expect(kill(descendant, SIGKILL) == 0, "the descendant was still running")
    }

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
