import FlyingFox
import FlyingSocks
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting
import PollingSocketPool

/// How the devtools serve.
public struct DevtoolsOptions: Sendable {
    /// The address to listen on: loopback unless the user says otherwise (`--devtools-host`).
    public var host: String = "127.0.0.1"
    /// The port; 0 picks a free one.
    public var port: UInt16 = 0
    /// The access token every request and socket must carry; `nil` makes a random one.
    public var token: String?
    /// Request bodies larger than this are refused (413).
    public var bodyLimit: Int = 1 << 20
    /// An imported recording larger than this is refused (413).
    public var importLimit: Int = 256 << 20
    /// Live messages a page may fall behind by before it is dropped (and told why).
    public var clientQueue: Int = 64
    /// The app's name (the page's title; an export's header).
    public var app: String = "app"
    /// The file the session is recorded to as it runs (`luastore run --record`), if any: a rewind is then refused,
    /// since what the file already holds cannot be undone, and a recording that kept the undone entries would not
    /// replay the session.
    public var recordedTo: String?
    /// How long a read of the store (an entry's state, a search) waits for the store's thread before it is
    /// answered "busy" (503) — and the session with what was last heard, marked `busy`: the server keeps
    /// answering while the store works through a long queue of actions.
    public var storeWait: Duration = .seconds(2)
    /// Connections open at once. One that has not shown the token yet (a stranger) must send each request's
    /// head within `strangerSeconds`, and is closed to make room when every place is taken: strangers cannot keep
    /// a client with the token out.
    public var connectionLimit: Int = 256
    /// Seconds a stranger has to send each request's head before it is closed.
    public var strangerSeconds: Int = 5

    /// The defaults: loopback, a free port, a random token.
    public init() {}
}

/// The devtools: a web page for a running scripted store (timeline, entries with their diffs, the state at any
/// kept point, time travel, dispatch, export), served from the binary over HTTP on `host:port`, with a live
/// stream over a WebSocket. See docs/devtools.md, "Devtools".
public final class DevtoolsServer: Sendable {
    /// The page's address, with its token: what `luastore run --devtools` prints.
    public let url: String
    /// The port it listens on.
    public let port: UInt16
    let server: HTTPServer
    let front: FramingGuard
    /// The private folder of the HTTP server's socket.
    let folder: String
    let task: Task<Void, any Error>

    /// Starts serving `store`, whose journal `journal` hears (give `journal.hear` to `ScriptedStoreOptions.journal`,
    /// and keep a history for time travel: `historyEntries`). A host name is resolved (`localhost`); an address the
    /// server cannot listen on fails at once, in words.
    public static func start(store: ScriptedStore, journal: DevtoolsJournal, options: DevtoolsOptions = DevtoolsOptions()) async throws -> DevtoolsServer {
        let token = options.token ?? Self.randomToken()
        let resolved = try ListeningAddress(host: options.host, port: options.port)
        let api = DevtoolsAPI(store: store, journal: journal, options: options, token: token)
        // The HTTP server listens on a Unix socket in a folder only this user may enter; the public address is the
        // framing guard's, which hands it each request once its framing is unambiguous.
        var template = Array((FileManager.default.temporaryDirectory.path + "/luastore-devtools-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw DevtoolsFailure("cannot make a private folder for the devtools' socket: \(OutputFailure.words(errno))")
        }
        let folder = String(cString: made)
        let backend = folder + "/http.sock"
        let front: FramingGuard
        do {
            front = try FramingGuard(address: resolved, backend: backend, token: token, connectionLimit: options.connectionLimit,
                                     strangerTimeout: options.strangerSeconds)
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw DevtoolsFailure("cannot listen on \(resolved.numeric):\(options.port): \(error)")
        }
        let server = HTTPServer(address: sockaddr_un.unix(path: backend), timeout: 60, pool: .polling(), logger: .disabled,
                                handler: api)
        let failure = Protected<(any Error)?>(nil)
        let task = Task {
            do {
                try await server.run()
            } catch {
                failure.withLock { $0 = error }
                throw error
            }
        }
        // Waits until the server listens — or, at once, until it failed to: FlyingFox's own wait would wait its
        // whole timeout.
        let deadline = ContinuousClock.now + .seconds(30)
        while !(await server.isListening) {
            var reason: String?
            if let error = failure.withLock({ $0 }) { reason = Self.words(error) }
            if ContinuousClock.now >= deadline { reason = "it did not start within 30 s" }
            if let reason {
                front.stop()
                task.cancel()
                try? FileManager.default.removeItem(atPath: folder)
                throw DevtoolsFailure("the devtools' HTTP server cannot listen on \(backend): \(reason)")
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        let port = front.port
        api.listening(on: port, address: resolved.numeric, isLoopback: resolved.isLoopback)
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        return DevtoolsServer(url: "http://\(host):\(port)/?token=\(token)", port: port, address: resolved.numeric,
                              isLoopback: resolved.isLoopback, server: server, front: front, folder: folder, task: task)
    }

    /// A socket error in words: the system's message ("cannot assign requested address").
    static func words(_ error: any Error) -> String {
        if case SocketError.failed(_, let code, _) = error { return OutputFailure.words(code) }
        return "\(error)"
    }

    /// The numeric address it listens on (`127.0.0.1` for `localhost`).
    public let address: String
    /// Whether only this machine can reach it (a loopback address); otherwise the token is the only guard.
    public let isLoopback: Bool

    private init(url: String, port: UInt16, address: String, isLoopback: Bool, server: HTTPServer, front: FramingGuard,
                 folder: String, task: Task<Void, any Error>) {
        self.url = url
        self.port = port
        self.address = address
        self.isLoopback = isLoopback
        self.server = server
        self.front = front
        self.folder = folder
        self.task = task
    }

    /// Stops serving; open pages are disconnected.
    public func stop() async {
        front.stop()
        await server.stop(timeout: 1)
        task.cancel()
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// 32 hexadecimal digits from the system's random source.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let hex = String(generator.next() as UInt32, radix: 16)
            return String(repeating: "0", count: 8 - hex.count) + hex
        }.joined()
    }
}

/// Why the devtools could not start.
public struct DevtoolsFailure: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The address to listen on, from a host name or a numeric address (IPv4 or IPv6), resolved by the system.
struct ListeningAddress {
    enum Address {
        case ip4(sockaddr_in)
        case ip6(sockaddr_in6)
    }

    let address: Address
    /// The address as digits (`127.0.0.1`, `::1`).
    let numeric: String
    /// Whether it is a loopback address (127.0.0.0/8, ::1).
    let isLoopback: Bool

    init(host: String, port: UInt16) throws {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &found)
        guard status == 0, let first = found else {
            let reason = status == EAI_SYSTEM ? OutputFailure.words(errno) : String(cString: gai_strerror(status)).lowercased()
            throw DevtoolsFailure("cannot listen on '\(host)': the name does not resolve to an address (\(reason))")
        }
        defer { freeaddrinfo(found) }
        // IPv4 first when the name has both (localhost: 127.0.0.1 before ::1).
        var entry: UnsafeMutablePointer<addrinfo>? = first
        var chosen = first
        while let current = entry {
            if current.pointee.ai_family == AF_INET { chosen = current; break }
            entry = current.pointee.ai_next
        }
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        getnameinfo(chosen.pointee.ai_addr, chosen.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST)
        numeric = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if chosen.pointee.ai_family == AF_INET6 {
            var address = chosen.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
            address.sin6_port = port.bigEndian
            self.address = .ip6(address)
            isLoopback = numeric == "::1"
        } else {
            var address = chosen.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
            address.sin_port = port.bigEndian
            self.address = .ip4(address)
            isLoopback = UInt32(bigEndian: address.sin_addr.s_addr) >> 24 == 127
        }
    }
}
