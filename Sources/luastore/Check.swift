import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting

/// `luastore check APP_DIR`: loads and validates an app without running it.
struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load and validate an app (syntax, exports, init and a props call) without running it.",
        discussion: "Errors name file and line. Exit status: 0 when the app is valid, 1 when it is not.")

    @Argument(help: "The app: a folder (with app.lua), or a bundle (luastore pack).", completion: .file())
    var appDirectory: String

    @OptionGroup var modules: ModulePathOptions

    @OptionGroup var trust: TrustOptions

    func run() async throws {
        let source = try AppSource.open(appDirectory, trust: trust)
        defer { source.remove() }
        let failures = Protected<[String]>([])
        var options = ScriptedStoreOptions(log: { _ in }, failures: { failure in
            failures.withLock { $0.append("\(failure.stage.rawValue): \(failure.error)") }
        })
        options.modulePath = modules.templates
        source.configure(&options)
        do {
            let store = try await ScriptedStore(app: source.folder, options: options)
            let props = try await store.props()
            _ = try JSONText.encode(props)
            store.shutdown()
        } catch let error as ScriptFailure {
            Console.error("\(error.error) (\(error.stage.rawValue))")
            throw ExitCode.appFailure
        } catch let error as LuaError {
            Console.error("\(error) (props)")
            throw ExitCode.appFailure
        } catch {
            Console.error("props: \(error)")
            throw ExitCode.appFailure
        }
        if !failures.withLock({ $0 }).isEmpty {
            for failure in failures.withLock({ $0 }) { Console.error(failure) }
            throw ExitCode.appFailure
        }
        Console.out("ok: \(appDirectory)")
    }
}
