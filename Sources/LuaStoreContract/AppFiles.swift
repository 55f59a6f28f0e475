import Foundation

/// An app's Lua files, as `luastore check` reads them: specs left out, and the folders of plugins it holds (a
/// folder below it with a manifest, `luastore.json`, of its own) apart.
public enum AppFiles {
    /// `relative` in `folder`, its symbolic links resolved — nil when that leads outside `folder` (itself resolved).
    /// Nothing outside an app's folder is read, symbolic links included: a file or a plugin's folder named inside
    /// it but linked from elsewhere is not the app's.
    public static func inside(_ relative: String, of folder: URL) -> URL? {
        let root = folder.standardizedFileURL.resolvingSymlinksInPath()
        let url = root.appendingPathComponent(relative).standardizedFileURL.resolvingSymlinksInPath()
        return url.path.hasPrefix(root.path + "/") ? url : nil
    }

    /// The files by namespace, paths relative to `folder`: first the app's own (empty when it has none), then each
    /// plugin's.
    public static func namespaces(in folder: URL) -> [[String]] {
        let root = folder.standardizedFileURL.resolvingSymlinksInPath()
        var byRoot: [String: [String]] = ["": []]
        let enumerator = FileManager.default.enumerator(atPath: root.path)
        var pluginRoots: [String] = []
        var files: [String] = []
        while let relative = enumerator?.nextObject() as? String {
            if relative.hasSuffix("/luastore.json") { pluginRoots.append(String(relative.dropLast("luastore.json".count))) }
            if relative.hasSuffix(".lua"), !relative.hasSuffix("_spec.lua"), !relative.hasPrefix("spec/") { files.append(relative) }
        }
        for file in files.sorted() {
            let owner = pluginRoots.filter { file.hasPrefix($0) }.max { $0.count < $1.count } ?? ""
            byRoot[owner, default: []].append(file)
        }
        return [byRoot[""] ?? []] + byRoot.keys.filter { !$0.isEmpty }.sorted().compactMap { byRoot[$0] }
    }
}
