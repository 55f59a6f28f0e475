import Foundation

/// A folder of modules other than the VM's `moduleRoot` (`LuaVM.makeNamespace(root:chunkPrefix:)`).
struct ModuleFolder: Equatable {
    let root: URL
    /// What its chunk names start with.
    let chunkPrefix: String
}

/// Finds an app's modules for `require`: `a.b` (or `a/b`, as Lua's own `require` takes it) is `ROOT/a/b.lua` or
/// `ROOT/a/b/init.lua`, and the files `loadfile` and `dofile` name; nothing outside `ROOT` is ever read (names
/// are plain identifiers joined by dots or slashes; paths may not climb out; symbolic links may not lead out).
struct ModuleResolver {
    let root: URL?
    /// Lua path templates searched after `root` (`/usr/share/lua/5.4/?.lua`); `./` entries are `root`'s
    /// (`./src/?.lua` is `ROOT/src/?.lua`).
    var path: [String] = []
    let maximumBytes: Int

    struct Module {
        /// The file's bytes, as Lua reads source: a string literal may hold bytes that are not UTF-8 text.
        let source: Data
        let chunkName: String
        /// Whether `chunkName` is the file's name as the module path's template made it (`lua/m.lua`), which Lua names
        /// a module by, with no prefix of the host's.
        var asFound = false
        /// The app folder's file as the template named it (`vendor/m.lua`, `./libs/m.lua`), which stock Lua names a
        /// module by.
        var templated: String?
    }

    /// The module `name` names, or — found nowhere — nil and a line for each file looked for, in order, worded as
    /// Lua's searcher words them (`no file './a/b.lua'`), for `require`'s message: the templates of the path a
    /// script starts with (`./?.lua`, `./?/init.lua`, then the module path's).
    func resolve(_ name: String) throws(HostFailure) -> (module: Module?, tried: [String]) {
        try resolve(name, templates: Self.rootTemplateOrder + path.filter { !Self.rootTemplates.contains($0) })
    }

    /// The module `name` names as the templates of `package.path` find it (`templates`: a script may change it, as
    /// `package.path = "./libs/?.lua;" .. package.path` does), in their order, as Lua's searcher tries them: `?`
    /// replaced by the name, its dots made slashes. A relative file is the app folder's and may not climb out of it
    /// (`./` is the folder itself); an absolute one is read only inside the app folder or a folder of the module
    /// path. A file the sandbox does not read is listed as such, whether it exists or not.
    func resolve(_ name: String, templates: [String]) throws(HostFailure) -> (module: Module?, tried: [String]) {
        guard let root else { throw .message("require: module '\(name)' not found (no module folder is set)") }
        // Dots are separators, as Lua's searcher reads them (`a.b` is `a/b`); an empty part is an empty path
        // component, which the file system skips, as it does for stock Lua (`require("../src.lib")` is `./src/lib.lua`).
        let parts = name.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "." || $0 == "/" })
        guard !parts.isEmpty, parts.allSatisfy({ LuaPath.isIdentifier(String($0)) || Self.isPlainName($0) }) else {
            throw .message("require: '\(name)' is not a module name (use names like 'lib.util')")
        }
        let relative = parts.joined(separator: "/")
        // (Named as Lua's searcher names the file — every dot of the name a slash, empty components kept: `./m` is
        // `.///m.lua` —, in messages and chunk names; read at the path the parts make.)
        let literal = name.replacingOccurrences(of: ".", with: "/")
        let what = "require: module '\(name)'"
        // (The module path's folders as named, not resolved: its files may be links elsewhere, as Debian's are.)
        let shared = path.compactMap { Self.folder(of: $0, resolvingLinks: false) }
        var tried: [String] = []
        for template in templates {
            let candidate = template.replacingOccurrences(of: "?", with: relative)
            let shown = template.replacingOccurrences(of: "?", with: literal)
            let climbs = candidate.split(separator: "/").contains("..")
            if candidate.hasPrefix("/") {
                // (Inside the app's folder — the path a library makes of its script's own folder, as Penlight's
                // `require_here` does —, its links followed only where they stay inside, as `io.open` reads it; or
                // inside a folder of the module path.)
                let url = URL(fileURLWithPath: candidate).standardizedFileURL
                let inApp = Self.isInside(url.resolvingSymlinksInPath(), anyOf: [root.resolvingSymlinksInPath().path])
                guard !climbs, inApp || Self.isInside(url, anyOf: shared) else {
                    tried.append("no file '\(shown)' (the sandbox reads only the app's folder and the module path)")
                    continue
                }
                tried.append("no file '\(shown)'")
                guard Self.isRegularFile(url) else { continue }
                var module = try read(url, root: nil, chunkName: shown, what: what)
                module.asFound = true
                return (module, tried)
            }
            guard !climbs else {
                tried.append("no file '\(shown)' (the sandbox reads only the app's folder and the module path)")
                continue
            }
            var inside = Substring(candidate)
            while inside.hasPrefix("./") { inside = inside.dropFirst(2) }
            tried.append("no file '\(shown)'")
            guard !inside.isEmpty else { continue }
            let url = root.appendingPathComponent(String(inside)).standardizedFileURL.resolvingSymlinksInPath()
            guard Self.isRegularFile(url) else { continue }
            var module = try read(url, root: root, chunkName: String(inside), what: what)
            module.templated = shown
            return (module, tried)
        }
        if let library = LuaModulePath.cModuleTemplates.lazy.map({ $0.replacingOccurrences(of: "?", with: relative) })
            .first(where: { FileManager.default.fileExists(atPath: $0) }) {
            throw .message("require: module '\(name)' is a C module (\(library)); the sandbox loads Lua source only")
        }
        return (nil, tried)
    }

    /// Whether `url` (resolved) lies inside one of `folders`.
    private static func isInside(_ url: URL, anyOf folders: [String]) -> Bool {
        folders.contains { url.path.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") }
    }

    /// Whether `url` names a regular file (a folder is no module, though `fopen` would open it).
    private static func isRegularFile(_ url: URL) -> Bool {
        var isFolder: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) && !isFolder.boolValue
    }

    /// The file `path` names (relative to the app's folder) for `caller` (`loadfile`, `dofile`).
    func resolveFile(_ path: String, for caller: String) throws(HostFailure) -> Module {
        guard let root else { throw .message("\(caller): '\(path)' cannot be read (no module folder is set)") }
        guard !path.isEmpty else { throw .message("cannot open : No such file or directory") } // (as Lua's)
        guard !path.hasPrefix("/"), !path.split(separator: "/").contains("..") else {
            throw .message("\(caller): '\(path)' is not a path inside the app folder (scripts read only the app's own files)")
        }
        let url = root.appendingPathComponent(path).standardizedFileURL.resolvingSymlinksInPath()
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else {
            throw .message("cannot open \(path): No such file or directory")
        }
        guard !isFolder.boolValue else { throw .message("cannot read \(path): Is a directory") } // (as Lua's)
        return try read(url, root: root, chunkName: String(url.path.dropFirst(root.path.count + 1)), what: "\(caller): '\(path)'")
    }

    /// Why a file `io.open` asked for cannot be read, in the words and number Lua's `io.open` gives (the path first).
    struct Unreadable: Error {
        let message: String
        let number: Int32
    }

    /// The bytes of the file `path` names for `io.open` and `io.lines` (`luakit`, `luastore test`): relative to
    /// `root`, or absolute; after symbolic links it must be a regular file inside `root` or a folder of the module
    /// path (fixtures, the libraries' own data), and at most `maximumBytes` long.
    func readData(_ path: String) -> Result<Data, Unreadable> {
        guard let root else { return .failure(Unreadable(message: "\(path): No such file or directory", number: 2)) }
        let named = path.hasPrefix("/") ? URL(fileURLWithPath: path) : root.appendingPathComponent(path)
        let url = named.standardizedFileURL.resolvingSymlinksInPath()
        let folders = [root.standardizedFileURL.resolvingSymlinksInPath().path] + self.path.compactMap { Self.folder(of: $0) }
        guard Self.isInside(url, anyOf: folders) else {
            return .failure(Unreadable(message: "\(path): Permission denied (the sandbox reads only the project's folder and the module path)", number: 13))
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder) else {
            return .failure(Unreadable(message: "\(path): No such file or directory", number: 2))
        }
        let attributes = try? FileManager.default.attributesOfItem(atPath: url.path)
        guard !isFolder.boolValue, attributes?[.type] as? FileAttributeType == .typeRegular else {
            return .failure(Unreadable(message: "\(path): Permission denied (not a regular file)", number: 13))
        }
        let size = attributes?[.size] as? Int ?? 0
        guard size <= maximumBytes else {
            return .failure(Unreadable(message: "\(path): File too large (\(size) bytes; the limit is \(maximumBytes))", number: 27))
        }
        guard let data = FileManager.default.contents(atPath: url.path) else {
            return .failure(Unreadable(message: "\(path): Permission denied", number: 13))
        }
        return .success(data)
    }

    /// The folder an absolute template of the module path reads from (`/usr/share/lua/5.4/?.lua`: `/usr/share/lua/5.4/`).
    /// (`resolvingLinks`: the folder the links on the way lead to.)
    private static func folder(of template: String, resolvingLinks: Bool = true) -> String? {
        guard template.hasPrefix("/"), let mark = template.firstIndex(of: "?") else { return nil }
        let prefix = template[..<mark]
        guard let slash = prefix.lastIndex(of: "/") else { return nil }
        let folder = URL(fileURLWithPath: String(prefix[...slash])).standardizedFileURL
        return (resolvingLinks ? folder.resolvingSymlinksInPath() : folder).path
    }

    /// The text of the file at `url` (resolved), which must lie inside `root` when one is given.
    private func read(_ url: URL, root: URL?, chunkName: String, what: String) throws(HostFailure) -> Module {
        if let root, !url.path.hasPrefix(root.path + "/") { throw .message("\(what) leads outside the app folder") }
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0
        guard size <= maximumBytes else { throw .message("\(what) is \(size) bytes; the limit is \(maximumBytes)") }
        guard let file = FileManager.default.contents(atPath: url.path) else { throw .message("\(what) cannot be read") }
        let data = LuaVM.fileSource(file)
        guard data.first != 0x1B else { throw .message("\(what) is a binary chunk; only source text loads") }
        return Module(source: data, chunkName: chunkName)
    }

    /// The templates the app folder itself answers first, in their order.
    static let rootTemplateOrder = ["./?.lua", "./?/init.lua"]
    static let rootTemplates = Set(rootTemplateOrder)

    private static func isPlainName(_ part: Substring) -> Bool {
        guard let first = part.utf8.first, first != UInt8(ascii: "-") else { return false }
        return part.utf8.allSatisfy { $0 == 95 || $0 == 45 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
    }
}

/// Lua's module path, as stock `lua5.4` takes it: `LUA_PATH_5_4`, else `LUA_PATH`, else its default; `;;` in either
/// stands for the default. Only source text loads in the sandbox: a C module (`.so`) found where stock Lua would
/// load it is refused, naming it.
public enum LuaModulePath {
    /// Debian's `lua5.4` default `package.path`.
    public static let defaultTemplates = [
        "/usr/local/share/lua/5.4/?.lua", "/usr/local/share/lua/5.4/?/init.lua",
        "/usr/local/lib/lua/5.4/?.lua", "/usr/local/lib/lua/5.4/?/init.lua",
        "/usr/share/lua/5.4/?.lua", "/usr/share/lua/5.4/?/init.lua",
        "./?.lua", "./?/init.lua",
    ]

    /// Where stock Lua finds C modules (Debian's default `package.cpath`), to name a C module it would load.
    static let cModuleTemplates = [
        "/usr/local/lib/lua/5.4/?.so", "/usr/lib/x86_64-linux-gnu/lua/5.4/?.so", "/usr/lib/aarch64-linux-gnu/lua/5.4/?.so",
        "/usr/lib/lua/5.4/?.so",
    ]

    /// The templates of `path` (`a/?.lua;b/?.lua`), `;;` standing for the default.
    public static func templates(_ path: String) -> [String] {
        let expanded = path.replacingOccurrences(of: ";;", with: ";" + defaultTemplates.joined(separator: ";") + ";")
        return expanded.split(separator: ";").map(String.init).filter { !$0.isEmpty }
    }

    /// The path a command takes: `option` (`--lua-path`), else `LUA_PATH_5_4`, else `LUA_PATH`, else the default.
    public static func resolve(option: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        if let given = option ?? environment["LUA_PATH_5_4"] ?? environment["LUA_PATH"] { return templates(given) }
        return defaultTemplates
    }
}
