import Foundation
import Glibc
import Testing

/// What a finished child process left behind.
public struct ChildProcessResult: Sendable {
    /// The exit status, or the number of the signal that ended it (-1: unknown — something else in the test process
    /// reaped the child).
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
    public var description: String { "\(command) did not finish within \(timeout)" }
}

/// Whether this test process runs under the Thread Sanitizer (`scripts/test`'s second run).
///
/// Under it no child process is started: a child made by a raw `clone` (swift-subprocess's `clone3` once, glibc's
/// `posix_spawn` now) is one the sanitizer's fork handlers never see, so it may inherit a sanitizer lock another
/// thread held and spin on it before `exec` — a hung child that burns a core and starves every other test of the run
/// (it did, in CI).
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
/// may be a pipe that never closes). The child is started and waited for on a thread of its own, so no thread of the
/// cooperative pool is blocked while it runs: stores, effects and servers in the test process keep running. A
/// child that outlives `timeout` is killed and the call throws, so a hang fails its test instead of stalling the run.
///
/// (Written on `posix_spawn` and `poll`, not on swift-subprocess: there, two `run`s whose children ended together
/// were once never told (a serve suite run hung 15 minutes on two `luastore` commands that had exited), and a `run`
/// that is never told cannot be bounded — cancelling it waits for it. Here the deadline is the reading loop's own.)
public func runChildProcess(
    _ executable: URL, _ arguments: [String], input: String? = nil, directory: URL? = nil,
    environment: [String: String] = [:], timeout: Duration = .seconds(120)
) async throws -> ChildProcessResult {
    let command = ([executable.lastPathComponent] + arguments).joined(separator: " ")
    if runsUnderThreadSanitizer { throw ChildProcessUnderThreadSanitizer(command: command) }
    let inputFile = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-child-input-\(UUID().uuidString)")
    try Data((input ?? "").utf8).write(to: inputFile)
    defer { try? FileManager.default.removeItem(at: inputFile) }
    let variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }.map { "\($0.key)=\($0.value)" }
    // (Started there too: `posix_spawn` holds its thread until the child has called `exec`, which on a loaded machine
    // is long enough to matter to a pool of two threads.)
    let finished = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ChildSpawn.Finished, any Error>) in
        Thread.detachNewThread {
            continuation.resume(with: Result {
                try ChildSpawn(executable.path, arguments, input: inputFile.path, directory: directory?.path, environment: variables)
                    .finish(within: timeout)
            })
        }
    }
    guard let status = finished.status else { throw ChildProcessTimedOut(command: command, timeout: timeout) }
    return ChildProcessResult(status: status, output: String(decoding: finished.output, as: UTF8.self),
                              errors: String(decoding: finished.errors, as: UTF8.self))
}

/// A child started with `posix_spawn`: standard input from a file, standard output and error into pipes, every
/// other descriptor closed, the signal mask empty and the signals this process changes back to their defaults (a
/// test runner ignores SIGPIPE, say: a child must not inherit that).
private struct ChildSpawn: Sendable {
    struct Finished: Sendable {
        /// The exit status or the signal's number; nil when the deadline passed (the child was killed).
        var status: Int32?
        var output: [UInt8]
        var errors: [UInt8]
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let pid: pid_t
    let output: Int32
    let errors: Int32

    init(_ path: String, _ arguments: [String], input: String, directory: String?, environment: [String]) throws {
        var outputPipe: [Int32] = [-1, -1], errorsPipe: [Int32] = [-1, -1]
        guard pipe(&outputPipe) == 0 else { throw Failure(description: "pipe: \(String(cString: strerror(errno)))") }
        guard pipe(&errorsPipe) == 0 else {
            close(outputPipe[0]); close(outputPipe[1])
            throw Failure(description: "pipe: \(String(cString: strerror(errno)))")
        }
        // (Not inherited by what else this process starts meanwhile; a child that got one anyway — between `pipe` and
        // here — can keep a pipe open, which `finish` does not wait for.)
        for descriptor in outputPipe + errorsPipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, input, O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errorsPipe[1], 2)
        // (glibc has both; Swift's Glibc module declares neither.)
        if let closeFrom = Self.glibc("posix_spawn_file_actions_addclosefrom_np", as: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self) {
            _ = closeFrom(&actions, 3)
        }
        if let directory {
            guard let changeDirectory = Self.glibc("posix_spawn_file_actions_addchdir_np",
                                                   as: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32).self) else {
                throw Failure(description: "posix_spawn cannot change the child's directory here")
            }
            _ = changeDirectory(&actions, directory)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var mask = sigset_t(), defaults = sigset_t()
        sigemptyset(&mask)
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        close(outputPipe[1])
        close(errorsPipe[1])
        guard spawned == 0 else {
            close(outputPipe[0]); close(errorsPipe[0])
            throw Failure(description: "\(path) cannot be started: \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        output = outputPipe[0]
        errors = errorsPipe[0]
        _ = fcntl(output, F_SETFL, fcntl(output, F_GETFL) | O_NONBLOCK)
        _ = fcntl(errors, F_SETFL, fcntl(errors, F_GETFL) | O_NONBLOCK)
    }

    private static func glibc<F>(_ name: String, as type: F.Type) -> F? {
        dlsym(UnsafeMutableRawPointer(bitPattern: 0), name).map { unsafeBitCast($0, to: type) }
    }

    /// Reads both pipes until the child has exited (and what it wrote is read) or `timeout` has passed (then it is
    /// killed); blocks the calling thread. The end of the pipes is not waited for: a descendant the child left running
    /// may hold them open.
    func finish(within timeout: Duration) -> Finished {
        let deadline = ContinuousClock.now + timeout
        var finished = Finished(status: nil, output: [], errors: [])
        var open = [output, errors]
        defer { close(output); close(errors) }
        func drain(_ descriptor: Int32) {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count > 0 {
                    if descriptor == output { finished.output += buffer[..<count] } else { finished.errors += buffer[..<count] }
                } else if count == 0 || (errno != EINTR) {
                    if count == 0 { open.removeAll { $0 == descriptor } }
                    return
                }
            }
        }
        while true {
            var status: Int32 = 0
            let waited = waitpid(pid, &status, WNOHANG)
            if waited == pid || (waited == -1 && errno == ECHILD) { // (ECHILD: something else reaped it; its status is lost)
                for descriptor in open { drain(descriptor) }
                finished.status = waited != pid ? -1 : (status & 0x7f) == 0 ? (status >> 8) & 0xff : status & 0x7f
                return finished
            }
            if ContinuousClock.now >= deadline {
                kill(pid, SIGKILL)
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                return finished
            }
            var polled = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            // (A short wait: the child's exit is seen by `waitpid`, not by the pipes.)
            _ = poll(&polled, nfds_t(polled.count), open.isEmpty ? 5 : 50)
            for entry in polled where entry.revents != 0 { drain(entry.fd) }
            if open.isEmpty { usleep(1_000) }
        }
    }
}
