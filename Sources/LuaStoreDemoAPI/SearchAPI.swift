import FlyingFox
import FlyingSocks
import Foundation
import PollingSocketPool

/// The small HTTP API the `search` sample talks to: `GET /search?q=TEXT` answers
/// `{"query": TEXT, "results": [{"title": …}, …]}` with the words of a fixed list that contain TEXT.
/// `q=slow…` waits two seconds first (to show cancellation), `q=error…` answers 500 (to show failures),
/// and `delay=MS` delays any answer.
public enum SearchAPI {
    /// The words searched.
    public static let words = [
        "lua", "luastore", "luajit", "lunar", "reducer", "redux", "react", "reactive", "store", "state", "stream",
        "subscription", "swift", "sandbox", "scope", "props", "presenter", "proxy", "journal", "transaction",
        "timer", "table", "thread", "effect", "equating", "observer", "reload", "replay",
    ]

    /// Answers one search (without waiting).
    public static func answer(query: String) -> (status: Int, body: String) {
        if query.hasPrefix("error") { return (500, #"{"error":"the search backend failed"}"#) }
        let matches = words.filter { !query.isEmpty && $0.contains(query.lowercased()) }
        let results = matches.map { #"{"title":"\#($0)"}"# }.joined(separator: ",")
        return (200, #"{"query":\#(jsonString(query)),"results":[\#(results)]}"#)
    }

    static func jsonString(_ text: String) -> String {
        let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// Starts the API on 127.0.0.1:`port` (0 picks a free port) and returns the server and its port.
    public static func start(port: UInt16) async throws -> (server: HTTPServer, task: Task<Void, any Error>, port: UInt16) {
        let server = HTTPServer(address: try sockaddr_in.inet(ip4: "127.0.0.1", port: port), timeout: 30,
                                pool: .polling(), logger: .disabled)
        await server.appendRoute("GET /search") { request in
            let query = request.query["q"] ?? ""
            var delay = Int(request.query["delay"] ?? "") ?? 0
            if query.hasPrefix("slow") { delay = max(delay, 2000) }
            if delay > 0 { try await Task.sleep(for: .milliseconds(delay)) }
            let (status, body) = answer(query: query)
            return HTTPResponse(statusCode: HTTPStatusCode(status, phrase: status == 200 ? "OK" : "Internal Server Error"),
                                headers: [.contentType: "application/json"], body: Data(body.utf8))
        }
        let task = Task { try await server.run() }
        try await server.waitUntilListening(timeout: 60) // (bounded; a loaded machine once took over 5 s to schedule the listener)
        guard case .ip4(_, let actualPort) = await server.listeningAddress else { throw URLError(.cannotConnectToHost) }
        return (server, task, actualPort)
    }
}
