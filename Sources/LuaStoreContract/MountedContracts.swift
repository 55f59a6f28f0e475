import Foundation

extension AppContract {
    /// The file of an app's `reduce`, `props` and `init`: its manifest's `main`, or `app.lua` (a manifest that cannot
    /// be read is the store's to refuse; here it names no other file).
    public static func mainFile(of folder: URL) -> String {
        manifest(of: folder)?["main"] as? String ?? "app.lua"
    }

    /// The contracts of the plugins the app in `folder` mounts from a folder (its manifest's `mounts`), in the order of
    /// their keys — the order actions reach them — and what in them is not a contract LuaStore checks, each problem's
    /// file named from the app's folder (`plugins/cart/app.lua`). A plugin that declares nothing is left out; so is a
    /// bundle (its files are checked where it is published).
    public static func readMounted(app folder: URL) -> (mounted: [(key: String, contract: AppContract)], problems: [Problem]) {
        var mounted: [(key: String, contract: AppContract)] = []
        var problems: [Problem] = []
        for plugin in mountedFolders(of: folder) {
            let (contract, found) = read(app: plugin.folder, main: mainFile(of: plugin.folder))
            problems += found.map { Problem(file: plugin.place + $0.file, line: $0.line, message: $0.message) }
            if contract.declares { mounted.append((plugin.key, contract)) }
        }
        return (mounted, problems)
    }

    /// The plugins the app in `folder` mounts from a folder, in the order of their keys: each one's key, its folder, and
    /// its path from the app's folder ending in `/` (what its files are named from in messages).
    public static func mountedFolders(of folder: URL) -> [(key: String, folder: URL, place: String)] {
        guard let mounts = manifest(of: folder)?["mounts"] as? [String: Any] else { return [] }
        return mounts.keys.sorted().compactMap { key in
            let value = mounts[key]
            guard let path = value as? String ?? (value as? [String: Any])?["path"] as? String else { return nil }
            guard let plugin = AppFiles.inside(path, of: folder) else { return nil } // (the store refuses it, naming it)
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: plugin.path, isDirectory: &isFolder), isFolder.boolValue else { return nil }
            return (key, plugin, path.hasSuffix("/") ? path : path + "/")
        }
    }

    private static func manifest(of folder: URL) -> [String: Any]? {
        guard let file = AppFiles.inside("luastore.json", of: folder), let data = FileManager.default.contents(atPath: file.path) else {
            return nil
        }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}
