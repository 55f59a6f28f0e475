import ArgumentParser
import Foundation
import LuaKit
import LuaStoreScripting

/// `luastore test APP_DIR`: runs the app's Lua specs.
struct SpecTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run an app's specs (*_spec.lua in the app folder or its spec/ folder).",
        discussion: """
            Specs use describe(name, fn), it(name, fn), before_each(fn) and expect(value).to.equal(x) (deep), \
            .to.be(x), .to.be_nil(), .to.be_truthy(), .to.be_falsy(), .to.contain(x), .to.fail(text); `to_not` negates. \
            `require("app")` loads the app. Each spec runs with its own time budget. Ends with `N passed, N failed`; \
            exits 1 if any failed, naming each by file and line.
            """)

    @Argument(help: "The app folder.", completion: .directory)
    var appDirectory: String

    func run() async throws {
        let folder = URL(fileURLWithPath: appDirectory).standardizedFileURL
        let files = Self.specFiles(in: folder)
        guard !files.isEmpty else {
            Console.error("no *_spec.lua files in \(appDirectory) or \(appDirectory)/spec")
            throw ExitCode.unusable
        }
        let thread = LuaThread(name: "luastore-test")
        var passed = 0
        var failed = 0
        for file in files {
            let (filePassed, fileFailed) = thread.sync { Self.run(file: file, folder: folder) }
            passed += filePassed
            failed += fileFailed
        }
        Console.out("\(passed) passed, \(failed) failed")
        if failed > 0 { throw ExitCode.appFailure }
    }

    static func specFiles(in folder: URL) -> [String] {
        var files: [String] = []
        for (directory, prefix) in [(folder, ""), (folder.appendingPathComponent("spec"), "spec/")] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            files += names.filter { $0.hasSuffix("_spec.lua") }.sorted().map { prefix + $0 }
        }
        return files
    }

    /// Runs one spec file in a fresh VM (on its LuaThread); returns how many passed and failed.
    static func run(file: String, folder: URL) -> (Int, Int) {
        do throws(LuaError) {
            let vm = try LuaVM(moduleRoot: folder, print: { line in Console.out("  " + line) })
            try EffectsModule.define(in: vm)
            let library = try vm.load(EmbeddedLua.luastoreSpec.source, chunkName: EmbeddedLua.luastoreSpec.path)
            guard let spec = try vm.callForReferences(library, arguments: []).first ?? nil else {
                throw LuaError(.runtime, "the spec library did not load")
            }
            var globals: [String: LuaReference] = [:]
            func function(_ name: String) throws(LuaError) -> LuaReference {
                guard let value = try vm.field(.string(name), of: spec) else {
                    throw LuaError(.runtime, "the spec library has no '\(name)'")
                }
                return value
            }
            for name in ["describe", "it", "expect", "before_each"] {
                globals[name] = try function(name)
            }
            guard let source = try? String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8) else {
                Console.out("FAIL \(file): cannot read the file")
                return (0, 1)
            }
            let chunk = try vm.load(source, chunkName: file, globals: globals)
            try vm.call(chunk)
            let count = try vm.call(try function("count")).first?.integer ?? 0
            let name = try function("name")
            let runOne = try function("run")
            var passed = 0
            var failed = 0
            for index in stride(from: Int64(1), through: count, by: 1) {
                let title = (try? vm.call(name, .integer(index)).first?.string) ?? "spec \(index)"
                do {
                    try vm.call(runOne, .integer(index))
                    passed += 1
                } catch {
                    failed += 1
                    let location = error.location ?? file
                    Console.out("FAIL \(location): \(title): \(error.message)")
                }
            }
            return (passed, failed)
        } catch {
            Console.out("FAIL \(error.location ?? file): \(error.message)")
            return (0, 1)
        }
    }
}
