import Foundation
import LuaStoreConcurrency

/// A real PostgreSQL server for tests: Debian's (`/usr/lib/postgresql/N/bin`), made with `initdb` in a temporary
/// folder and started with `pg_ctl`, listening on 127.0.0.1 at a free port, with `trust` authentication for the
/// user `luastore`. One per test process, started by the first test that asks and stopped when the process exits;
/// each test takes a database of its own (`database()`). Run as root (CI), the server runs as the `postgres` user,
/// since PostgreSQL refuses root. The benchmarks start one of their own that syncs its writes to disk
/// (`PostgresServer(durable: true)`, stopped by `stop()`).
public final class PostgresServer: Sendable {
    public let port: Int
    public let folder: URL
    private let binaries: URL
    private let runAs: String?

    /// Why the server cannot run here, in words (no PostgreSQL installed); nil when it can.
    public static var unavailable: String? {
        binariesFolder() == nil ? "PostgreSQL's server (initdb, pg_ctl: Debian's postgresql package) is not installed" : nil
    }

    private static let shared = Protected<Result<PostgresServer, PostgresServerFailure>?>(nil)

    /// The process's server, started on first use (at most once: a failure to start is the answer from then on),
    /// waited for off Swift's cooperative pool (starting it blocks for seconds).
    public static func running() async throws -> PostgresServer {
        try await detached { () throws -> PostgresServer in try runningNow() }
    }

    private static func runningNow() throws -> PostgresServer {
        try shared.withLock { shared in
            if let shared { return try shared.get() }
            let result = Result { () throws(PostgresServerFailure) in try PostgresServer(durable: false) }
            shared = result
            if case .success(let server) = result { server.stopsAtExit() }
            return try result.get()
        }
    }

    private static let stoppedAtExit = Protected<[PostgresServer]?>(nil)

    /// Stops the server when the process exits (`exit`, or returning from `main`), if `stop()` has not before.
    public func stopsAtExit() {
        let first = Self.stoppedAtExit.withLock { servers in
            defer { servers = (servers ?? []) + [self] }
            return servers == nil
        }
        if first { atexit { for server in PostgresServer.stoppedAtExit.withLock({ $0 ?? [] }) { server.stop() } } }
    }

    /// Makes and starts a server (for seconds: off the cooperative pool). `durable`: it syncs its writes to disk as a
    /// production server does (fsync and synchronous commits on); else not, for tests that need no crash safety.
    public init(durable: Bool) throws(PostgresServerFailure) {
        guard let binaries = Self.binariesFolder() else { throw PostgresServerFailure(Self.unavailable ?? "no PostgreSQL") }
        self.binaries = binaries
        runAs = getuid() == 0 ? "postgres" : nil
        folder = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("luastore-pg-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw PostgresServerFailure("cannot make \(folder.path): \(error.localizedDescription)")
        }
        if let runAs {
            _ = try Self.run("/bin/chown", [runAs, folder.path], as: nil)
        }
        port = Self.freePort()
        let data = folder.appendingPathComponent("data").path
        _ = try Self.run(binaries.appendingPathComponent("initdb").path,
                         ["-D", data, "-U", "luastore", "--auth=trust", "-E", "UTF8", "--no-sync"], as: runAs)
        _ = try Self.run(binaries.appendingPathComponent("pg_ctl").path,
                         ["-D", data, "-l", folder.appendingPathComponent("log").path, "-w", "-t", "60", "-o",
                          "-p \(port) -k \(folder.path) -c listen_addresses=127.0.0.1 -c fsync=\(durable ? "on" : "off") -c max_connections=200", "start"],
                         as: runAs)
    }

    /// A new, empty database for one test; its name.
    public func database() async throws -> String {
        try await Self.detached { [self] () throws -> String in try databaseNow() }
    }

    /// A new, empty database, made now (it blocks); its name.
    public func databaseNow() throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        _ = try Self.run(binaries.appendingPathComponent("createdb").path,
                         ["-h", "127.0.0.1", "-p", String(port), "-U", "luastore", String(name)], as: nil)
        return String(name)
    }

    /// `postgres://luastore@127.0.0.1:PORT/DATABASE`.
    public func url(_ database: String) -> String { "postgres://luastore@127.0.0.1:\(port)/\(database)" }

    /// Runs SQL with `psql` (for tests that look at what the server holds); its output, unaligned.
    public func psql(_ database: String, _ sql: String) async throws -> String {
        try await Self.detached { [self] () throws -> String in try psqlNow(database, sql) }
    }

    private func psqlNow(_ database: String, _ sql: String) throws -> String {
        try Self.run(binaries.appendingPathComponent("psql").path,
                     ["-h", "127.0.0.1", "-p", String(port), "-U", "luastore", "-d", database, "-At", "-v", "ON_ERROR_STOP=1", "-c", sql], as: nil)
    }

    /// Stops the server at once and removes its folder (a second time does nothing).
    public func stop() {
        guard FileManager.default.fileExists(atPath: folder.path) else { return }
        _ = try? Self.run(binaries.appendingPathComponent("pg_ctl").path,
                          ["-D", folder.appendingPathComponent("data").path, "-m", "immediate", "-w", "-t", "30", "stop"], as: runAs)
        try? FileManager.default.removeItem(at: folder)
    }

    private static func binariesFolder() -> URL? {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let bin = root.appendingPathComponent(version).appendingPathComponent("bin")
            if FileManager.default.isExecutableFile(atPath: bin.appendingPathComponent("pg_ctl").path) { return bin }
        }
        return nil
    }

    /// A port nothing listens on now (the kernel's pick, let go at once).
    private static func freePort() -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a program to its end (at most two minutes), as `user` when given; its output, or a failure naming it.
    /// (Spawned and waited for here: Foundation's `Process` waits for every descendant, and `pg_ctl start` leaves
    /// the server running.)
    @discardableResult
    static func run(_ program: String, _ arguments: [String], as user: String?) throws(PostgresServerFailure) -> String {
        let argv = user.map { ["/usr/sbin/runuser", "-u", $0, "--", program] } ?? [program]
        let output = NSTemporaryDirectory() + "luastore-pg-run-\(UUID().uuidString)"
        defer { unlink(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of this process's goes along: `pg_ctl start` leaves the server running, which would hold
        // every descriptor it inherited — among them the socket by which Foundation's `Process` learns that another
        // test's child ended (it would wait for the server to end).
        // (Every descriptor open now, found in /proc; glibc passes over one closed since.)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in open.compactMap({ Int32($0) }) where descriptor > 2 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
        let all = argv + arguments
        var pointers: [UnsafeMutablePointer<CChar>?] = all.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, all[0], &actions, nil, &pointers, environ)
        guard spawned == 0 else { throw PostgresServerFailure("cannot start \(program): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        let deadline = Date().addingTimeInterval(120)
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date() > deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                throw PostgresServerFailure("\(program) did not finish within 120 s")
            }
            usleep(10_000)
        }
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        let exited = status & 0x7f == 0, code = (status >> 8) & 0xff
        guard exited, code == 0 else {
            throw PostgresServerFailure("\(URL(fileURLWithPath: program).lastPathComponent) \(arguments.joined(separator: " ")) failed (status \(status)): \(text)")
        }
        return text
    }
}

extension PostgresServer {
    /// Runs blocking work on a thread of its own, off Swift's cooperative pool (two threads on a two-core machine:
    /// a test blocking one starves the servers other tests run in the process).
    public static func detached<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }
}

public struct PostgresServerFailure: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
