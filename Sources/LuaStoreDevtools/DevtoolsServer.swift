import FlyingFox
import FlyingSocks
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

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

    public init() {}
}

/// The devtools: a web page for a running scripted store (timeline, entries with their diffs, the state at any
/// kept point, time travel, dispatch, export), served from the binary over HTTP on `host:port`, with a live
/// stream over a WebSocket. See README, "Devtools".
public final class DevtoolsServer: Sendable {
    /// The page's address, with its token: what `luastore run --devtools` prints.
    public let url: String
    /// The port it listens on.
    public let port: UInt16
    let server: HTTPServer
    let task: Task<Void, any Error>

    /// Starts serving `store`, whose journal `journal` hears (give `journal.hear` to `ScriptedStoreOptions.journal`,
    /// and keep a history for time travel: `historyEntries`).
    public static func start(store: ScriptedStore, journal: DevtoolsJournal, options: DevtoolsOptions = DevtoolsOptions()) async throws -> DevtoolsServer {
        let token = options.token ?? Self.randomToken()
        let address: any SocketAddress
        if options.host.contains(":") {
            address = try sockaddr_in6.inet6(ip6: options.host, port: options.port)
        } else {
            address = try sockaddr_in.inet(ip4: options.host, port: options.port)
        }
        let api = DevtoolsAPI(store: store, journal: journal, options: options, token: token)
        let server = HTTPServer(address: address, timeout: 60, logger: .disabled, handler: api)
        let task = Task { try await server.run() }
        do {
            try await server.waitUntilListening(timeout: 30)
        } catch {
            task.cancel()
            throw error
        }
        let port: UInt16
        switch await server.listeningAddress {
        case .ip4(_, let actual)?, .ip6(_, let actual)?: port = actual
        default: throw DevtoolsFailure("the devtools server is not listening on \(options.host)")
        }
        api.listening(on: port)
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        return DevtoolsServer(url: "http://\(host):\(port)/?token=\(token)", port: port, server: server, task: task)
    }

    private init(url: String, port: UInt16, server: HTTPServer, task: Task<Void, any Error>) {
        self.url = url
        self.port = port
        self.server = server
        self.task = task
    }

    /// Stops serving; open pages are disconnected.
    public func stop() async {
        await server.stop(timeout: 1)
        task.cancel()
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
