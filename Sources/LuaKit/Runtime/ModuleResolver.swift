import Foundation

/// Finds an app's modules for `require`: `a.b` is `ROOT/a/b.lua` or `ROOT/a/b/init.lua`, and nothing outside
/// `ROOT` is ever read (names are plain identifiers joined by dots; symbolic links may not lead out).
struct ModuleResolver {
    let root: URL?
    let maximumBytes: Int

    struct Module {
        let source: String
        let chunkName: String
    }

    func resolve(_ name: String) throws(HostFailure) -> Module {
        guard let root else { throw .message("require: module '\(name)' not found (no module folder is set)") }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.allSatisfy({ LuaPath.isIdentifier(String($0)) || Self.isPlainName($0) }) else {
            throw .message("require: '\(name)' is not a module name (use names like 'lib.util')")
        }
        let relative = parts.joined(separator: "/")
        for candidate in [relative + ".lua", relative + "/init.lua"] {
            let url = root.appendingPathComponent(candidate).standardizedFileURL.resolvingSymlinksInPath()
            guard FileManager.default.fileExists(atPath: url.path) else { continue }
            guard url.path.hasPrefix(root.path + "/") else {
                throw .message("require: module '\(name)' leads outside the app folder")
            }
            let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
            guard size <= maximumBytes else {
                throw .message("require: module '\(name)' is \(size) bytes; the limit is \(maximumBytes)")
            }
            guard let data = FileManager.default.contents(atPath: url.path) else {
                throw .message("require: module '\(name)' cannot be read")
            }
            guard data.first != 0x1B else { throw .message("require: module '\(name)' is a binary chunk; only source text loads") }
            guard let source = String(data: data, encoding: .utf8) else {
                throw .message("require: module '\(name)' is not UTF-8 text")
            }
            return Module(source: source, chunkName: candidate)
        }
        throw .message("require: module '\(name)' not found (looked for \(relative).lua and \(relative)/init.lua in the app folder)")
    }

    private static func isPlainName(_ part: Substring) -> Bool {
        guard let first = part.utf8.first, first != UInt8(ascii: "-") else { return false }
        return part.utf8.allSatisfy { $0 == 95 || $0 == 45 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
    }
}
