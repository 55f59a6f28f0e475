import Foundation
import PackagePlugin

/// Embeds a module's `.lua` files into its binary at build time: one generated Swift file per module, with each
/// file's text as a constant of `EmbeddedLua` (see `embed-lua`). The Lua stays in `.lua` files, where editors,
/// LuaLS and luacheck see it, and chunk names and line numbers match those files; the binary needs no
/// resource bundle.
@main
struct EmbedLua: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        guard let module = target as? SourceModuleTarget else { return [] }
        // (Also a module's web page, `.html`, with its `.css` and `.js`: the devtools serve theirs from the binary.)
        let files = ["lua", "html", "css", "js"].flatMap { module.sourceFiles(withSuffix: $0) }.map(\.url)
            .sorted { $0.path < $1.path }
        guard !files.isEmpty else { return [] }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedLua.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(files.count) Lua file(s) into \(target.name)",
                executable: try context.tool(named: "embed-lua").url,
                arguments: [output.path, module.directoryURL.path, target.name] + files.map(\.path),
                inputFiles: files,
                outputFiles: [output]
            )
        ]
    }
}
