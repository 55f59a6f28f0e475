import Foundation
import LuaStoreTestSupport
import Testing

/// The LuaStoreSwiftTypes build-tool plugin, as a package that depends on LuaStore uses it: a real `swift build` of a
/// small host whose target names a copy of samples/todos in its `luastore-types.json`. The types follow the Lua on
/// every build: a props field renamed in Lua fails the Swift build where the old name is used; a contract with a
/// problem, or a configuration that names no app, fails it in words.
@Suite struct SwiftTypesPluginTests {
    /// The host package and its build folder, kept under `.build` between runs (a second run builds only what changed).
    static let place = CLI.packageRoot.appendingPathComponent(".build/swift-types-plugin-test")
    static var hostPackage: URL { place.appendingPathComponent("package") }
    static var app: URL { hostPackage.appendingPathComponent("app") }

    static let manifest = """
        // swift-tools-version:6.2
        import PackageDescription

        let package = Package(
            name: "TodosHost",
            dependencies: [.package(name: "LuaStore", path: \(CLI.packageRoot.path.debugDescription))],
            targets: [
                .executableTarget(
                    name: "Host",
                    dependencies: [.product(name: "LuaStoreScripting", package: "LuaStore")],
                    plugins: [.plugin(name: "LuaStoreSwiftTypes", package: "LuaStore")]
                )
            ]
        )

        """

    static let host = """
        import Foundation
        import LuaStoreScripting

        var options = ScriptedStoreOptions()
        options.storageFolder = FileManager.default.temporaryDirectory.appendingPathComponent("todos-host-\\(getpid())")
        let store = try await ScriptedStore(app: URL(fileURLWithPath: "app"), options: options)
        _ = await store.send(.todoAdded(title: "milk"))
        let props: TodosProps = try await store.decodedProps()
        print(props.left)
        store.shutdown()
        try? FileManager.default.removeItem(at: options.storageFolder!)

        """

    /// Writes the host package afresh (the same text as the last run's: nothing is built again for it).
    static func writePackage() throws {
        let files = FileManager.default
        try? files.removeItem(at: hostPackage)
        try files.createDirectory(at: hostPackage.appendingPathComponent("Sources/Host"), withIntermediateDirectories: true)
        try files.copyItem(at: CLI.packageRoot.appendingPathComponent("samples/todos"), to: app)
        try? files.removeItem(at: app.appendingPathComponent("todos_spec.lua"))
        try Data(manifest.utf8).write(to: hostPackage.appendingPathComponent("Package.swift"))
        try Data(host.utf8).write(to: hostPackage.appendingPathComponent("Sources/Host/main.swift"))
        try configure(#"{ "apps": [ { "path": "../../app", "prefix": "Todos" } ] }"#)
    }

    static func configure(_ text: String) throws {
        try Data(text.utf8).write(to: hostPackage.appendingPathComponent("Sources/Host/luastore-types.json"))
    }

    static func build() async throws -> ChildProcessResult {
        try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"),
                                  ["swift", "build", "--package-path", hostPackage.path, "--scratch-path", place.appendingPathComponent("scratch").path],
                                  timeout: .seconds(900))
    }

    /// Replaces `old` with `new` in one of the app's files.
    static func edit(_ file: String, _ old: String, _ new: String) throws {
        let url = app.appendingPathComponent(file)
        let text = try String(contentsOf: url, encoding: .utf8)
        #expect(text.contains(old), "\(file) has no \(old)")
        try Data(text.replacingOccurrences(of: old, with: new).utf8).write(to: url)
    }

    @Test(.startsChildProcesses, .timeLimit(.minutes(20))) func theTypesFollowTheLuaOnEveryBuild() async throws {
        try Self.writePackage()
        let built = try await Self.build()
        #expect(built.status == 0, "\(built.output)\n\(built.errors)")
        let ran = try await runChildProcess(Self.place.appendingPathComponent("scratch/debug/Host"), [], directory: Self.hostPackage)
        #expect(ran.status == 0 && ran.output == "1 item left\n", "\(ran.output)\n\(ran.errors)")

        // A props field renamed in Lua (its declaration and the code that makes it): the host no longer compiles.
        try Self.edit("app.lua", "---@field left string", "---@field remaining string")
        try Self.edit("view.lua", "    left = counts.left", "    remaining = counts.left")
        let renamed = try await Self.build()
        #expect(renamed.status != 0)
        #expect((renamed.output + renamed.errors).contains("main.swift:9:13: error: value of type 'TodosProps' has no member 'left'"),
                "\(renamed.output)\n\(renamed.errors)")

        // A declaration outside the notation: the build fails naming the file and line, as a compiler does.
        try Self.edit("app.lua", "---@field canClear boolean", "---@field canClear boolen")
        let misdeclared = try await Self.build()
        #expect(misdeclared.status != 0)
        let line = try #require(try String(contentsOf: Self.app.appendingPathComponent("app.lua"), encoding: .utf8)
            .components(separatedBy: "\n").firstIndex { $0.contains("boolen") }) + 1
        #expect((misdeclared.output + misdeclared.errors).contains("\(Self.app.path)/app.lua:\(line): error: "),
                "\(misdeclared.output)\n\(misdeclared.errors)")

        // A configuration that names no app's folder.
        try Self.configure(#"{ "apps": [ { "folder": "../../app" } ] }"#)
        let unconfigured = try await Self.build()
        #expect(unconfigured.status != 0)
        #expect((unconfigured.output + unconfigured.errors).contains("luastore-types.json:1: error: not a list of apps"),
                "\(unconfigured.output)\n\(unconfigured.errors)")
        #expect((unconfigured.output + unconfigured.errors).contains("apps[0].path is missing"))
    }
}
