import Foundation

/// Finds an app's modules for `require`: `a.b` (or `a/b`, as Lua's own `require` takes it) is `ROOT/a/b.lua` or
/// `ROOT/a/b/init.lua`, and the files `loadfile` and `dofile` name; nothing outside `ROOT` is ever read (names
/// are plain identifiers joined by dots or slashes; paths may not climb out; symbolic links may not lead out).
struct ModuleResolver {
    let root: URL?
    let maximumBytes: Int

    struct Module {
        let source: String
        let chunkName: String
    }

    func resolve(_ name: String) throws(HostFailure) -> Module {
        guard let root else { throw .message("require: module '\(name)' not found (no module folder is set)") }
        let parts = name.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "." || $0 == "/" })
        guard !parts.isEmpty, parts.allSatisfy({ LuaPath.isIdentifier(String($0)) || Self.isPlainName($0) }) else {
            throw .message("require: '\(name)' is not a module name (use names like 'lib.util')")
        }
        let relative = parts.joined(separator: "/")
        for candidate in [relative + ".lua", relative + "/init.lua"] {
            let url = root.appendingPathComponent(candidate).standardizedFileURL.resolvingSymlinksInPath()
            guard FileManager.default.fileExists(atPath: url.path) else { continue }
            return try read(url, root: root, chunkName: candidate, what: "require: module '\(name)'")
        }
        throw .message("require: module '\(name)' not found (looked for \(relative).lua and \(relative)/init.lua in the app folder)")
    }

    /// The file `path` names (relative to the app's folder) for `caller` (`loadfile`, `dofile`).
    func resolveFile(_ path: String, for caller: String) throws(HostFailure) -> Module {
        guard let root else { throw .message("\(caller): '\(path)' cannot be read (no module folder is set)") }
        guard !path.isEmpty, !path.hasPrefix("/"), !path.split(separator: "/").contains("..") else {
            throw .message("\(caller): '\(path)' is not a path inside the app folder (scripts read only the app's own files)")
        }
        let url = root.appendingPathComponent(path).standardizedFileURL.resolvingSymlinksInPath()
        guard FileManager.default.fileExists(atPath: url.path) else { throw .message("cannot open \(path): No such file or directory") }
        return try read(url, root: root, chunkName: String(url.path.dropFirst(root.path.count + 1)), what: "\(caller): '\(path)'")
    }

    /// The text of the file at `url` (resolved), which must lie inside `root`.
    private func read(_ url: URL, root: URL, chunkName: String, what: String) throws(HostFailure) -> Module {
        guard url.path.hasPrefix(root.path + "/") else { throw .message("\(what) leads outside the app folder") }
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
        guard size <= maximumBytes else { throw .message("\(what) is \(size) bytes; the limit is \(maximumBytes)") }
        guard let data = FileManager.default.contents(atPath: url.path) else { throw .message("\(what) cannot be read") }
        guard data.first != 0x1B else { throw .message("\(what) is a binary chunk; only source text loads") }
        guard let source = String(data: data, encoding: .utf8) else { throw .message("\(what) is not UTF-8 text") }
        return Module(source: source, chunkName: chunkName)
    }

    private static func isPlainName(_ part: Substring) -> Bool {
        guard let first = part.utf8.first, first != UInt8(ascii: "-") else { return false }
        return part.utf8.allSatisfy { $0 == 95 || $0 == 45 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
    }
}
