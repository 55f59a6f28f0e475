import FlyingFox
import FlyingSocks
import Foundation
import LuaStoreConcurrency
import PollingSocketPool

/// A real HTTP server on 127.0.0.1 (FlyingFox) with the routes the URL effect tests need.
public final class TestServer: Sendable {
    public let server: HTTPServer
    public let task: Task<Void, any Error>
    public let port: UInt16
    /// Requests to `/slow` that started, and that ran to the end without being cut off.
    public let slowStarted: Protected<Int>
    public let slowFinished: Protected<Int>

    private init(server: HTTPServer, task: Task<Void, any Error>, port: UInt16, slowStarted: Protected<Int>, slowFinished: Protected<Int>) {
        self.server = server
        self.task = task
        self.port = port
        self.slowStarted = slowStarted
        self.slowFinished = slowFinished
    }

    public var base: String { "http://127.0.0.1:\(port)" }

    public static func start() async throws -> TestServer {
        // A handler that has not answered within the server's timeout gets a 500 instead: a bound no route's own
        // wait (`/hang`'s 30 s) reaches, and no loaded machine, whose busy tasks can keep even `/hello` from
        // running for seconds (at 5 s, a test once read its answer as a server error).
        let server = HTTPServer(address: try sockaddr_in.inet(ip4: "127.0.0.1", port: 0), timeout: 90, pool: .polling())
        let slowStarted = Protected(0)
        let slowFinished = Protected(0)
        await server.appendRoute("GET /hello") { _ in
            HTTPResponse(statusCode: .ok, headers: [.contentType: "text/plain"], body: Data("hello".utf8))
        }
        await server.appendRoute("GET /json") { _ in
            HTTPResponse(statusCode: .ok, headers: [.contentType: "application/json; charset=utf-8"],
                         body: Data(#"{"name":"widget","items":[1,2.5,true,null],"nested":{"ok":false}}"#.utf8))
        }
        await server.appendRoute("GET /spellings") { _ in // ("é" composed and decomposed: two names, two Lua keys)
            HTTPResponse(statusCode: .ok, headers: [.contentType: "application/json"], body: Data("{\"\u{E9}\":1,\"e\u{301}\":2}".utf8))
        }
        await server.appendRoute("GET /search") { request in
            let query = request.query.first { $0.name == "q" }?.value ?? ""
            return HTTPResponse(statusCode: .ok, headers: [.contentType: "text/plain"], body: Data("results for \(query)".utf8))
        }
        await server.appendRoute("GET /error") { _ in
            HTTPResponse(statusCode: .internalServerError, headers: [.contentType: "text/plain"], body: Data("broken".utf8))
        }
        await server.appendRoute("GET /slow") { _ in
            slowStarted.withLock { $0 += 1 }
            try await Task.sleep(for: .seconds(2))
            slowFinished.withLock { $0 += 1 }
            return HTTPResponse(statusCode: .ok, body: Data("finally".utf8))
        }
        // Answers only after 30 s: a request to it that ends sooner was cancelled or timed out. (Counted in
        // `slowStarted` too.)
        await server.appendRoute("GET /hang") { _ in
            slowStarted.withLock { $0 += 1 }
            try await Task.sleep(for: .seconds(30))
            return HTTPResponse(statusCode: .ok, body: Data("too late".utf8))
        }
        await server.appendRoute("GET /big") { _ in
            HTTPResponse(statusCode: .ok, body: Data(repeating: 0x61, count: 3 << 20))
        }
        await server.appendRoute("GET /hop") { request in // (a redirect to the URL `to` names)
            HTTPResponse(statusCode: .found, headers: HTTPHeaders([HTTPHeader("Location"): request.query["to"] ?? "/hello"]))
        }
        await server.appendRoute("GET /redirect") { _ in
            HTTPResponse(statusCode: .found, headers: HTTPHeaders([HTTPHeader("Location"): "http://example.com/"]))
        }
        await server.appendRoute("POST /echo") { request in
            let body = try await request.bodyData
            let header = request.headers[HTTPHeader("X-Test")] ?? ""
            let text = #"{"method":"POST","header":"\#(header)","length":\#(body.count)}"#
            return HTTPResponse(statusCode: .ok, headers: [.contentType: "application/json"], body: Data(text.utf8))
        }
        let task = Task { try await server.run() }
        // (A loaded test machine: as the whole suite starts beside two busy loops, hundreds of tests at once, the
        // server's first turn once came after more than 30 s — `ReadmeExample`'s wait, in `suite-under-load`.)
        try await server.waitUntilListening(timeout: 120)
        guard case .ip4(_, let port) = await server.listeningAddress else {
            throw URLError(.cannotConnectToHost)
        }
        return TestServer(server: server, task: task, port: port, slowStarted: slowStarted, slowFinished: slowFinished)
    }

    public func stop() async {
        await server.stop(timeout: 0)
        task.cancel()
    }
}
