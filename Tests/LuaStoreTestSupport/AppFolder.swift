import Foundation

/// An app folder written for one test, removed when it ends (callers `defer` `remove()`).
public struct AppFolder: Sendable {
    public let url: URL

    public init(_ files: [String: String]) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        for (path, contents) in files { try write(path, contents) }
    }

    public func write(_ path: String, _ contents: String) throws {
        let file = url.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: file)
    }

    public func remove() { try? FileManager.default.removeItem(at: url) }
}
