import Foundation
import Hummingbird
import Logging

/// The files `--web` serves: those of its folder, and nothing else — a path holding a NUL byte (which the file
/// system would cut the path at: `/index.html%00.txt` served `index.html`) and a file or folder that a symbolic
/// link brings from outside the folder are not found. Hummingbird's `LocalFileSystem` does the reading.
struct WebFolder: FileProvider {
    typealias FileAttributes = LocalFileSystem.FileAttributes
    typealias FileIdentifier = String

    /// The folder, its symbolic links resolved.
    let root: String
    let files: LocalFileSystem

    init(_ folder: URL, logger: Logger) {
        root = Self.realPath(folder.path) ?? folder.standardizedFileURL.path
        files = LocalFileSystem(rootFolder: root, threadPool: .singleton, logger: logger)
    }

    /// The file's real path, when it lies in the folder (the folder itself too); nil otherwise, or when there is
    /// no such file.
    func getFileIdentifier(_ path: String) -> String? {
        guard !path.utf8.contains(0), let named = files.getFileIdentifier(path), let real = Self.realPath(named),
              real == root || real.hasPrefix(root + "/") else { return nil }
        return real
    }

    func getAttributes(id: String) async throws -> FileAttributes? { try await files.getAttributes(id: id) }

    func loadFile(id: String, context: some RequestContext) async throws -> ResponseBody {
        try await files.loadFile(id: id, context: context)
    }

    func loadFile(id: String, range: ClosedRange<Int>, context: some RequestContext) async throws -> ResponseBody {
        try await files.loadFile(id: id, range: range, context: context)
    }

    /// `path` with every symbolic link resolved (nil when it does not exist).
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// Refuses, with the reason in words, a request whose path (its escapes decoded) holds a NUL byte or a `..`
/// component, before any route or the web folder sees it. (The web folder's own check answered an empty 400.)
struct PathGuard<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let problem = Self.refusal(path: request.uri.path) { throw HTTPError(.badRequest, message: problem) }
        return try await next(request, context)
    }

    /// What is wrong with `path` (escapes not yet decoded), in words, or nil.
    static func refusal(path raw: String) -> String? {
        let path = raw.removingPercentEncoding ?? raw
        if path.utf8.contains(0) { return "a path holds no NUL byte (%00)" }
        if path.split(separator: "/").contains("..") { return "a path has no '..' part" }
        // (`/stores//actions`: no route matches an empty key, and a bare 404 would not say why.)
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        if parts.count >= 3, parts[1] == "stores", parts[2].isEmpty, let problem = StoreKey.check("") {
            return "\(problem): the path names none (/stores/KEY/…)"
        }
        return nil
    }
}

/// Without tokens (`--no-auth`, loopback only) any page a browser on this machine shows could reach the server:
/// by a name that resolves to the loopback (DNS rebinding) or from a page of another origin (a form, a script, a
/// WebSocket, which browsers open across origins). So a request must name the server by a loopback address or
/// `localhost` (the Host header), and one a page sends must come from the server's own origin (the Origin header);
/// anything else is refused (403), in words.
struct LocalPageGuard<Context: RequestContext>: RouterMiddleware {
    /// The address the server listens on (a name given to `--listen` is the server's own too).
    let listening: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let problem = Self.refusal(host: request.head.authority ?? "", origin: request.headers[.origin], listening: listening) {
            throw HTTPError(.forbidden, message: problem)
        }
        return try await next(request, context)
    }

    /// Why a request naming the server as `host` (its Host header), sent by a page of `origin` (its Origin header),
    /// is refused by a server listening on `listening`, in words — or nil.
    static func refusal(host: String, origin: String?, listening: String) -> String? {
        // (A request without a Host is no browser's: nothing a page sends is let in by it.)
        guard host.isEmpty || isLocal(name(ofAuthority: host)) || name(ofAuthority: host) == listening.lowercased() else {
            return "the Host '\(host)' does not name this server: without tokens it answers only to a loopback address or localhost"
        }
        // (`null` is a page whose origin is hidden — a sandboxed frame, a data: or file: page — never the server's own.)
        if let origin = origin?.lowercased(), !isOwn(origin: origin, host: host.lowercased()) {
            return "requests from the page at \(origin) are refused: without tokens the server answers only its own pages"
        }
        return nil
    }

    /// Whether a request with `origin` comes from the server's own pages: a page's origin (`http:`, `https:`) is
    /// the server's own address; another client's (a node of the cluster forwarding a live connection says
    /// `ws://127.0.0.1`) names a loopback address.
    static func isOwn(origin: String, host: String) -> Bool {
        if origin.hasPrefix("http://") || origin.hasPrefix("https://") { return origin == "http://" + host || origin == "https://" + host }
        guard let separator = origin.range(of: "://") else { return false }
        return isLocal(name(ofAuthority: String(origin[separator.upperBound...])))
    }

    /// The host of an authority (`localhost:8080`, `[::1]:8080`), lower case, without its port or brackets.
    static func name(ofAuthority authority: String) -> String {
        var text = Substring(authority.lowercased())
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") { return String(text[text.index(after: text.startIndex)..<close]) }
        if let colon = text.lastIndex(of: ":") { text = text[..<colon] }
        return String(text)
    }

    /// `localhost` or a loopback address (`127.0.0.0/8`, `::1`).
    static func isLocal(_ name: String) -> Bool {
        if name == "localhost" || name == "::1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}

/// A request for one of the server's own addresses with a method it does not serve there (`PUT /stores/k/state`,
/// `GET /stores/k/actions`) is told so — 405, with the methods it does serve (`Allow`) — not answered as if the
/// address did not exist.
struct MethodGuard<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response: Response
        do {
            response = try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            throw Self.refusal(request) ?? error
        }
        guard response.status == .notFound, let refusal = Self.refusal(request) else { return response }
        throw refusal
    }

    /// The 405 for `request`, when its path is one of the server's own and its method not one served there.
    static func refusal(_ request: Request) -> HTTPError? {
        let parts = request.uri.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let served: String
        switch (parts.count, parts.first, parts.last) {
        case (1, "health", _), (1, "metrics", _): served = "GET"
        case (3, "stores", "actions"): served = "POST"
        case (3, "stores", "props"), (3, "stores", "state"), (3, "stores", "live"): served = "GET"
        default: return nil
        }
        guard request.method.rawValue != served else { return nil }
        let shape = parts.count == 3 ? "/stores/{key}/\(parts.last!)" : "/\(parts.first!)"
        return HTTPError(.methodNotAllowed, headers: [.allow: served],
                         message: "\(request.method.rawValue) is not served at \(shape): it answers \(served)")
    }
}
