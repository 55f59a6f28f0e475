import Foundation
import PackagePlugin

/// Swift types that follow an app's Lua contract on every build: for the apps a target names in its
/// `luastore-types.json`, `luastore-swift-types` writes what `luastore swift-types` writes (docs/contracts.md), again
/// whenever the file or one of the apps' Lua files changes. A props field renamed in Lua then breaks the Swift build
/// where the old name is used; a contract with problems fails the build naming each one's file and line.
///
/// ```json
/// { "apps": [ { "path": "../../samples/todos", "prefix": "Todos", "testing": false } ] }
/// ```
///
/// `path` is an app's folder, from the target's folder; `prefix` goes before every type's name (default: none);
/// `testing` adds `ScriptedTestStore`'s typed steps (the target then depends on `LuaStoreTesting`). The file is read
/// by the tool at build time (a mistake in it is said there); here it only says which files the types depend on.
@main
struct LuaStoreSwiftTypes: BuildToolPlugin {
    struct Problem: Error, CustomStringConvertible {
        let description: String
    }

    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        guard let module = target as? SourceModuleTarget else { return [] }
        let file = module.directoryURL.appending(path: "luastore-types.json")
        guard FileManager.default.fileExists(atPath: file.path) else {
            throw Problem(description: "\(target.name) uses the LuaStoreSwiftTypes plugin but has no luastore-types.json beside its "
                          + "sources, naming its apps: {\"apps\": [{\"path\": \"…\", \"prefix\": \"…\"}]} (docs/contracts.md)")
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "LuaStoreSwiftTypes.swift")
        return [
            .buildCommand(
                displayName: "Swift types from the Lua contracts named in \(target.name)/luastore-types.json",
                executable: try context.tool(named: "luastore-swift-types").url,
                arguments: [file.path, output.path],
                inputFiles: [file] + Self.appFolders(named: file).flatMap(Self.appFiles),
                outputFiles: [output]
            )
        ]
    }

    /// The apps' folders, as far as the file can be read now (the tool reads it again, and says what is wrong).
    static func appFolders(named file: URL) -> [URL] {
        guard let data = FileManager.default.contents(atPath: file.path),
              let apps = (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["apps"] as? [[String: Any]] else { return [] }
        return apps.compactMap { $0["path"] as? String }.map {
            URL(fileURLWithPath: $0, relativeTo: file.deletingLastPathComponent()).standardizedFileURL
        }
    }

    /// The files whose change can change a contract: every `.lua` file of the app (its modules may declare, and the
    /// plugins it mounts from folders inside it), its manifest (which names its main file and its mounts).
    static func appFiles(in folder: URL) -> [URL] {
        guard let walk = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else { return [] }
        var files: [URL] = []
        for case let url as URL in walk where url.pathExtension == "lua" || url.lastPathComponent == "luastore.json" {
            files.append(url)
        }
        return files.sorted { $0.path < $1.path }
    }
}
