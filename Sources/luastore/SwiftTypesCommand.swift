import ArgumentParser
import Foundation
import LuaStoreCommandLine
import LuaStoreContract
import LuaStoreScripting

/// `luastore swift-types APP`: Swift types from the app's declared contract (docs/contracts.md).
struct SwiftTypesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swift-types",
        abstract: "Write Swift types from an app's contract (and its mounted plugins'): a Codable struct per class, an enum of its actions, typed send and props.",
        discussion: """
            The app declares its contract in LuaLS annotations (docs/contracts.md). The file imports LuaKit and \
            LuaStoreScripting; generate it again whenever the annotations change. Exit status: 0 when written, 1 when \
            the contract has problems or has no Swift type, 2 for a bad argument.
            """)

    @Argument(help: "The app: a folder (with app.lua).", completion: .directory)
    var app: String

    @Option(name: .long, help: "A prefix for every type's name (the types of two apps in one module).")
    var prefix: String = ""

    @Flag(name: .long, help: "Also import LuaStoreTesting and give ScriptedTestStore typed send, sendFailing and receive.")
    var testing = false

    @Option(name: [.short, .long], help: ArgumentHelp("Write the file here (default: standard output).", valueName: "file"))
    var output: String?

    func validate() throws {
        guard SwiftTypes.isPrefix(prefix) else {
            throw ValidationError("--prefix is a Swift name's start: letters and digits, a letter first")
        }
    }

    func run() throws {
        let folder = URL(fileURLWithPath: app)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: app, isDirectory: &isFolder), isFolder.boolValue else {
            Console.error("\(app) is not an app's folder")
            throw ExitCode.unusable
        }
        let main = (try? AppManifest.load(folder: folder))??.main ?? "app.lua"
        let (contract, problems) = AppContract.read(app: folder, main: main)
        let (mounted, mountProblems) = AppContract.readMounted(app: folder)
        if !(problems + mountProblems).isEmpty {
            for problem in problems + mountProblems { Console.error("\(problem)") }
            throw ExitCode.failure
        }
        let text: String
        do {
            text = try SwiftTypes.generate(contract, mounted: mounted, prefix: prefix, source: app, testing: testing)
        } catch {
            Console.error("\(error)")
            throw ExitCode.failure
        }
        guard let output else {
            Console.out(String(text.dropLast())) // (the text ends with its line break; `out` adds one)
            return
        }
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
        } catch {
            Console.error("cannot write \(output): \(OutputFailure.obstacle(to: output) ?? "\(error.localizedDescription)")")
            throw ExitCode.unusable
        }
    }
}
