import FlyingFox
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// The devtools' HTTP API and page (docs/devtools.md, "Devtools", lists the routes). Every request passes `admit` first:
/// the Host header must name this server (DNS rebinding), an Origin header must be this server's (other pages
/// in the same browser), and the token must be there (a query item `token`, or the `X-Devtools-Token` header).
/// Dispatch and time travel answer 423 until the page is unlocked.
final class DevtoolsAPI: HTTPHandler, Sendable {
    /// What the page browses: the running app, or a recording imported into a store of its own.
    struct Source: Sendable {
        let store: ScriptedStore
        let journal: DevtoolsJournal
        var imported: DevtoolsImport.Summary?
    }

    let options: DevtoolsOptions
    let token: String
    let port = Protected<UInt16>(0)
    let address = Protected<(numeric: String, isLoopback: Bool)>(("127.0.0.1", true))
    let unlocked = Protected(false)
    let filters = Protected<FilterCache?>(nil)
    let running: Protected<Source>
    let browsing: Protected<Source?> = Protected(nil)
    let live: LiveClients
    /// What the store's thread says of its history and of time travel, as last heard: the session is answered
    /// with it when the store is too busy to say now.
    let lastStatus = Protected<(history: (kept: [UInt64], at: UInt64?), travel: (traveling: Bool, held: Int))>((([], nil), (false, 0)))
    /// Whether held actions are being watched (`watchHeld`).
    let watchingHeld = Protected(false)

    /// The store and journal the routes read: an imported recording's while one is browsed.
    var source: Source { browsing.withLock { $0 } ?? running.withLock { $0 } }
    var store: ScriptedStore { source.store }
    var journal: DevtoolsJournal { source.journal }

    init(store: ScriptedStore, journal: DevtoolsJournal, options: DevtoolsOptions, token: String) {
        self.running = Protected(Source(store: store, journal: journal, imported: nil))
        self.options = options
        self.token = token
        self.live = LiveClients(journal: journal, queue: options.clientQueue)
    }

    /// Says where the server listens: the port, and the numeric address the host name resolved to.
    func listening(on port: UInt16, address: String, isLoopback: Bool) {
        self.port.withLock { $0 = port }
        self.address.withLock { $0 = (address, isLoopback) }
    }

    // MARK: Admission

    /// The Host header values that name this server: the host as given, its numeric address, and for a loopback
    /// address `localhost`, each with the port.
    private var hosts: Set<String> {
        let port = self.port.withLock { $0 }
        let (address, isLoopback) = self.address.withLock { $0 }
        var names: Set<String> = [options.host.lowercased(), address]
        if isLoopback { names.insert("localhost") }
        return Set(names.map { name in "\(name.contains(":") ? "[\(name)]" : name):\(port)" })
    }

    /// Whether any Host is accepted (listening on every address: the token is the guard).
    private var anyHost: Bool { options.host == "0.0.0.0" || options.host == "::" }

    private func admit(_ request: HTTPRequest) -> HTTPResponse? {
        let host = request.headers[HTTPHeader("Host")] ?? ""
        guard anyHost || hosts.contains(host.lowercased()) else {
            return Self.refusal(403, "the Host header \(host.isEmpty ? "is missing" : "'\(host)' does not name this server")")
        }
        if let origin = request.headers[HTTPHeader("Origin")], origin != "http://" + host {
            return Self.refusal(403, "requests from the page at \(origin) are refused")
        }
        let given = request.query["token"] ?? request.headers[HTTPHeader("X-Devtools-Token")] ?? ""
        guard Self.same(given, token) else {
            return Self.refusal(401, given.isEmpty ? "a token is needed: open the address luastore printed" : "the token is wrong: open the address luastore printed")
        }
        return nil
    }

    /// Compares without stopping at the first difference.
    private static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<min(x.count, y.count) { difference |= x[index] ^ y[index] }
        return difference == 0
    }

    // MARK: Routes

    func handleRequest(_ request: HTTPRequest) async throws -> HTTPResponse {
        if let refusal = admit(request) { return refusal }
        let route = "\(request.method.rawValue) \(request.path)"
        do {
            switch route {
            case "GET /": return page()
            case "GET /api/live": return try await live.accept(request)
            case "GET /api/session": return await session()
            case "GET /api/persistence": return Self.json(persistence())
            case "GET /api/plugins": return try await plugins()
            case "GET /api/entries": return try entries(request)
            case "GET /api/entry": return try await entry(request)
            case "GET /api/state": return try await state(request)
            case "GET /api/search": return try await search(request)
            case "GET /api/export": return try await export()
            case "GET /api/export-spec": return try await exportSpec()
            case "GET /api/first": return try await firstEntry(request)
            case "POST /api/replay": return try await replay()
            case "POST /api/import":
                let body = try await Self.body(of: request, limit: options.importLimit)
                let imported = try await DevtoolsImport.load(body, name: request.query["name"] ?? "recording", folder: running.withLock { $0.store.folder })
                browse(imported)
                return await session()
            case "POST /api/back":
                browse(nil)
                return await session()
            case "POST /api/unlock", "POST /api/lock":
                unlocked.withLock { $0 = route.hasSuffix("unlock") }
                await live.broadcastStatus(of: self)
                return await session()
            case "POST /api/dispatch", "POST /api/jump", "POST /api/resume", "POST /api/rewind":
                guard unlocked.withLock({ $0 }) else {
                    return Self.refusal(423, "dispatch and time travel are locked: unlock them on the page first")
                }
                return try await change(route, request)
            default:
                return Self.refusal(404, "no such route: \(route)")
            }
        } catch let failure as Refusal {
            return Self.refusal(failure.status, failure.message)
        } catch let failure as ScriptFailure {
            return Self.refusal(409, "\(failure.error)")
        } catch {
            return Self.refusal(500, "\(route) failed: \(error)")
        }
    }

    /// Shows `imported` (nil: the running app again); the store of a recording browsed before is shut down.
    func browse(_ imported: Source?) {
        let previous = browsing.withLock { browsing in
            defer { browsing = imported }
            return browsing
        }
        previous?.store.shutdown()
        filters.withLock { $0 = nil }
    }

    /// `body`'s result, or a 503 refusal once `DevtoolsOptions.storeWait` has passed (what `body` asked of the store
    /// still happens, later, and is dropped). For reads only: a change must not be said to have failed and then
    /// take place.
    func promptly<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let storeWait = options.storeWait
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let answered = Protected(false)
            @Sendable func answer(_ result: Result<T, any Error>) {
                guard answered.withLock({ done in defer { done = true }; return !done }) else { return }
                continuation.resume(with: result)
            }
            Task {
                do { answer(.success(try await body())) } catch { answer(.failure(error)) }
            }
            Task {
                try? await Task.sleep(for: storeWait)
                answer(.failure(Refusal(503, "the store is busy reducing actions; ask again in a moment")))
            }
        }
    }

    struct Refusal: Error {
        let status: Int
        let message: String
        init(_ status: Int, _ message: String) {
            self.status = status
            self.message = message
        }
    }

    static func refusal(_ status: Int, _ message: String) -> HTTPResponse {
        json(errorJSON(message), status: status)
    }

    /// `{"error": message}`.
    static func errorJSON(_ message: String) -> String {
        var json = JSONWriter()
        json.object { json in json.field("error", message) }
        return json.text
    }

    /// `value` in a recording's lossless JSON (`null` for what it cannot hold: a number that is not finite).
    static func encoded(_ value: LuaValue) -> String { (try? RecordingJSON.encode(value)) ?? "null" }

    static func json(_ json: JSONWriter, status: Int = 200) -> HTTPResponse {
        self.json(json.text, status: status)
    }

    static func json(_ body: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(statusCode: HTTPStatusCode(status, phrase: phrase(status)),
                     headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store",
                               HTTPHeader("X-Content-Type-Options"): "nosniff"],
                     body: Data(body.utf8))
    }

    private static func phrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 423: "Locked"
        case 503: "Service Unavailable"
        case 500: "Internal Server Error"
        default: "Error"
        }
    }

    func page() -> HTTPResponse {
        HTTPResponse(statusCode: .ok,
                     headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                               HTTPHeader("Referrer-Policy"): "no-referrer",
                               HTTPHeader("X-Content-Type-Options"): "nosniff",
                               HTTPHeader("X-Frame-Options"): "DENY",
                               HTTPHeader("Content-Security-Policy"):
                                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'"],
                     body: Data(DevtoolsPage.html.utf8))
    }
}

extension JSONWriter {
    /// Writes a field whose value is a Lua value, in a recording's lossless JSON (`DevtoolsAPI.encoded`).
    mutating func field(_ name: String, recorded value: LuaValue) {
        field(name, raw: DevtoolsAPI.encoded(value))
    }

    /// Writes a Lua value, in a recording's lossless JSON.
    mutating func value(recorded value: LuaValue) {
        raw(DevtoolsAPI.encoded(value))
    }
}
