import Foundation
import Subprocess
import Synchronization
import SystemPackage
import Testing

/// What a finished child process left behind.
public struct ChildProcessResult: Sendable {
    /// The exit status, or the number of the signal that ended it.
    public var status: Int32
    /// Everything it wrote on standard output.
    public var output: String
    /// Everything it wrote on standard error.
    public var errors: String

    /// Standard output split into lines (the text after the last newline, normally empty, is dropped).
    public var outputLines: [String] {
        output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }
}

/// A child process that outlived the time its test gave it (it has been killed).
public struct ChildProcessTimedOut: Error, CustomStringConvertible {
    public let command: String
    public let timeout: Duration
    /// Whether it was seen to end once killed (if not, the wait for it was given up).
    public let stopped: Bool
    public var description: String {
        "\(command) did not finish within \(timeout)" + (stopped ? "" : "; killed, it was not seen to end within 30 s")
    }
}

/// Whether this test process runs under the Thread Sanitizer (`scripts/test`'s second run).
///
/// Under it no child process is started: Subprocess forks with a raw `clone3` (for a process descriptor), which the
/// sanitizer's fork handlers never see, so the child may inherit a sanitizer lock another thread held and spin on
/// it before `exec` — a hung child that burns a core and starves every other test of the run (it did, in CI).
public let runsUnderThreadSanitizer: Bool = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil

/// A child process asked for under the Thread Sanitizer, where none is started (see `runsUnderThreadSanitizer`).
public struct ChildProcessUnderThreadSanitizer: Error, CustomStringConvertible {
    public let command: String
    public var description: String {
        "\(command): no child process is started under the Thread Sanitizer (a fork it does not see can hang the child); "
            + "mark the test `.startsChildProcesses`"
    }
}

extension Trait where Self == ConditionTrait {
    /// For a test that starts child processes: it does not run under the Thread Sanitizer (see
    /// `runsUnderThreadSanitizer`); its suite's other tests still do.
    public static var startsChildProcesses: Self {
        .disabled(if: runsUnderThreadSanitizer, "starts child processes, which are not started under the Thread Sanitizer")
    }
}

/// Runs a program to completion and collects what it writes.
///
/// Standard input is `input`, or empty when `input` is `nil` (never the test runner's own standard input, which
/// may be a pipe that never closes). The wait is asynchronous, so no thread of the cooperative pool is blocked
/// while the child runs: stores, effects and servers in the test process keep running. A child that outlives
/// `timeout` is killed and the call throws, so a hang fails its test instead of stalling the run.
public func runChildProcess(
    _ executable: URL, _ arguments: [String], input: String? = nil, directory: URL? = nil,
    environment: [String: String] = [:], timeout: Duration = .seconds(120)
) async throws -> ChildProcessResult {
    // A child that exits before reading all of `input` closes the pipe: writing to it must fail, not kill the test
    // process with SIGPIPE.
    signal(SIGPIPE, SIG_IGN)
    let overrides = Dictionary(uniqueKeysWithValues: environment.map { (Environment.Key(stringLiteral: $0.key), Optional($0.value)) })
    let command = ([executable.lastPathComponent] + arguments).joined(separator: " ")
    if runsUnderThreadSanitizer { throw ChildProcessUnderThreadSanitizer(command: command) }
    // Standard input comes from a file, not a pipe this process writes: a child that ends before reading all of
    // it (one that refuses its arguments, say) must not leave a write half done — Subprocess traps on the pipe's
    // descriptor then (swiftlang/swift-subprocess#367).
    let inputFile = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-child-input-\(UUID().uuidString)")
    try Data((input ?? "").utf8).write(to: inputFile)
    defer { try? FileManager.default.removeItem(at: inputFile) }
    let running = Task { () throws -> ChildProcessResult in
        let standardInput = try FileDescriptor.open(FilePath(inputFile.path), .readOnly)
        let result = try await run(
            .path(FilePath(executable.path)), arguments: Arguments(arguments),
            environment: .inherit.updating(overrides),
            workingDirectory: directory.map { FilePath($0.path) },
            input: .fileDescriptor(standardInput, closeAfterSpawningProcess: true),
            output: .string(limit: 64 << 20), error: .string(limit: 64 << 20))
        let status: Int32 = switch result.terminationStatus {
        case .exited(let code): code
        case .signaled(let signal): signal
        }
        return ChildProcessResult(status: status, output: result.standardOutput, errors: result.standardError)
    }
    let finished = await withTaskCancellationHandler {
        await outcome(of: running, within: timeout)
    } onCancel: {
        running.cancel()
    }
    if let finished { return try finished.get() }
    // Cancelled, `run` kills the child and returns once it has ended. Should it not (a wait the kernel's news never
    // reaches), the test still fails now rather than hang the whole run.
    running.cancel()
    let stopped = await outcome(of: running, within: .seconds(30)) != nil
    throw ChildProcessTimedOut(command: command, timeout: timeout, stopped: stopped)
}

/// What `task` ended with, or nil when it has not ended within `timeout` (it is left running).
private func outcome<Success: Sendable>(of task: Task<Success, any Error>, within timeout: Duration) async
    -> Result<Success, any Error>? {
    let first = FirstAnswer<Result<Success, any Error>?>()
    let timer = Task {
        try? await Task.sleep(for: timeout)
        first.give(nil)
    }
    Task { first.give(await task.result) }
    let answer = await first.value
    timer.cancel()
    return answer
}

/// The first of several answers given from different tasks; the later ones are dropped.
private final class FirstAnswer<Value: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<Value, Never>)
        case given(Value)
    }

    private let state = Mutex(State.empty)

    func give(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, Never>? in
            switch state {
            case .empty:
                state = .given(value)
                return nil
            case .waiting(let continuation):
                state = .given(value)
                return continuation
            case .given:
                return nil
            }
        }
        waiter?.resume(returning: value)
    }

    /// The first answer given (once only: a second waiter is not supported).
    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let given = state.withLock { state -> Value? in
                    if case .given(let value) = state { return value }
                    state = .waiting(continuation)
                    return nil
                }
                if let given { continuation.resume(returning: given) }
            }
        }
    }
}
