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
        let path = request.uri.path.removingPercentEncoding ?? request.uri.path
        if path.utf8.contains(0) { throw HTTPError(.badRequest, message: "a path holds no NUL byte (%00)") }
        if path.split(separator: "/").contains("..") { throw HTTPError(.badRequest, message: "a path has no '..' part") }
        return try await next(request, context)
    }
}
