import Foundation
import LuaStoreTestSupport
import RawHTTPClient
import Testing

/// The built `luastore serve`, running on 127.0.0.1 with a port of its own choosing, for one test.
final class ServedApp: @unchecked Sendable { // (its fields are set once, before it is shared)
    let process: Process
    let port: UInt16
    let data: URL
    /// Standard error, in a file: a pipe nobody reads while the server runs would stop it once full.
    private let errors: URL

    /// Starts `luastore serve APP --listen 127.0.0.1:0 --data DATA` with `arguments`, and waits (at most a minute)
    /// for the address it prints.
    init(app: URL, data: URL, _ arguments: [String]) async throws {
        process = Process()
        process.executableURL = CLI.binary
        process.environment = ProcessInfo.processInfo.environment.merging(CLI.environment) { $1 }
        process.arguments = ["serve", app.path, "--listen", "127.0.0.1:0", "--data", data.path] + arguments
        let output = Pipe()
        errors = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-serve-errors-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: errors)
        process.standardInput = FileHandle.nullDevice
        self.data = data
        try process.run()
        let reader = output.fileHandleForReading
        let line = try await offPool { () -> String in
            var text = ""
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, !text.contains("\n") {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            return text
        }
        guard let found = line.split(separator: ":").last.flatMap({ UInt16($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            process.terminate()
            throw RawSocket.Failure("luastore serve printed \(line.debugDescription), not its address")
        }
        port = found
    }

    func request(_ method: String, _ target: String, body: String = "", token: String? = nil) async throws -> RawHTTP.Response {
        try await request(method, target, bytes: Array(body.utf8), token: token)
    }

    /// A request whose body is `bytes` as they are.
    func request(_ method: String, _ target: String, bytes: [UInt8], token: String? = nil) async throws -> RawHTTP.Response {
        let port = self.port
        let headers = token.map { ["Authorization": "Bearer \($0)"] } ?? [:]
        return try await offPool { try RawHTTP.request(method, target, port: port, headers: headers, bytes: bytes, token: "") }
    }

    func live(_ target: String, token: String? = nil) async throws -> RawWebSocket {
        let port = self.port
        let headers = token.map { ["Authorization": "Bearer \($0)"] } ?? [:]
        return try await offPool { try RawWebSocket(port: port, target: target, headers: headers) }
    }

    /// Sends a signal and waits (at most a minute) for the process to end; its exit status and standard error.
    func stop(_ signal: Int32 = SIGTERM) async throws -> (status: Int32, errors: String) {
        kill(process.processIdentifier, signal)
        let process = self.process, errors = self.errors
        return try await offPool {
            let deadline = Date().addingTimeInterval(60)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning {
                process.interrupt()
                kill(process.processIdentifier, SIGKILL)
                throw RawSocket.Failure("luastore serve did not end within 60 s of signal \(signal)")
            }
            let text = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(at: errors)
            return (process.terminationStatus, text)
        }
    }

    /// What the server wrote to standard error so far.
    func errorsSoFar() -> String {
        (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: errors)
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    static func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// Writes `first` on a connection of its own to 127.0.0.1:`port`; once what came back holds `waitingFor` (when
    /// given), writes `then`; then reads until the connection ends (or a read waits past the socket's timeout).
    /// Everything that came back.
    static func exchange(port: UInt16, _ first: [UInt8], waitingFor: String? = nil, then: [UInt8] = []) async throws -> [UInt8] {
        try await offPool { () throws -> [UInt8] in
            let socket = try RawSocket(port: port)
            defer { socket.close() }
            try socket.write(first)
            var received: [UInt8] = []
            if let waitingFor {
                while !String(decoding: received, as: UTF8.self).contains(waitingFor) { received += try socket.readSome() }
                try socket.write(then)
            }
            while let more = try? socket.readSome() { received += more }
            return received
        }
    }

    /// `exchange`, in text.
    static func exchange(port: UInt16, _ first: String, waitingFor: String? = nil, then: String = "") async throws -> String {
        String(decoding: try await exchange(port: port, Array(first.utf8), waitingFor: waitingFor, then: Array(then.utf8)), as: UTF8.self)
    }

    /// An app (in a temporary folder of its own) whose reducer keys each action's `n` by an id drawn with
    /// `math.random`; its props count the items (an id drawn twice overwrites one).
    static func randomIdsApp() throws -> URL {
        let app = try temporaryFolder()
        try Data("""
            local app = {}
            function app.init() return { items = {} } end
            function app.reduce(state, action) state.items[tostring(math.random(1, 1 << 40))] = action.n end
            function app.props(state)
              local count = 0
              for _ in pairs(state.items) do count = count + 1 end
              return { count = count }
            end
            return app
            """.utf8).write(to: app.appendingPathComponent("app.lua"))
        return app
    }
}

extension RawWebSocket {
    /// Reads messages off the pool until `count` were read.
    func read(_ count: Int) async throws -> [[String: Any]] {
        let texts = try await offPool { [self] in try (0..<count).map { _ in try self.readText() } }
        return try texts.map(ServedApp.json)
    }

    /// Expects the server to close the connection before its next message, with one of `codes` (and `words` in
    /// its reason, when given); `otherwise` is recorded if a message came instead.
    func expectClose(_ codes: Int..., saying words: String? = nil, otherwise: Comment,
                     sourceLocation: SourceLocation = #_sourceLocation) async {
        do {
            _ = try await read(1)
            Issue.record(otherwise, sourceLocation: sourceLocation)
        } catch {
            let text = "\(error)"
            #expect(codes.contains { text.contains("closed \($0)") } && words.map(text.contains) ?? true, "\(text)",
                    sourceLocation: sourceLocation)
        }
    }

    func send(_ text: String) async throws {
        try await offPool { [self] in try self.sendText(text) }
    }
}
