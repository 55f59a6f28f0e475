import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCommandLine
import LuaStoreContract
import LuaStoreCore
import LuaStoreScripting

/// `luastore check APP_DIR`: loads and validates an app without running it.
struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load and validate an app (syntax, exports, init and a props call) without running it.",
        discussion: """
            Errors name file and line. An app that declares its actions, props and state in LuaLS annotations \
            (docs/contracts.md) has them checked: the notation, the initial state and props against their \
            declarations, declared actions no reducer handles and handled ones not declared. A global read inside a function that nothing in the app sets is reported \
            (a typo, which Lua reads as nil); --globals names the ones something else sets. Exit status: 0 when \
            the app is valid, 1 when it is not.
            """)

    @Argument(help: "The app: a folder (with app.lua), or a bundle (luastore pack).", completion: .file())
    var appDirectory: String

    @OptionGroup var modules: ModulePathOptions

    @OptionGroup var trust: TrustOptions

    @Option(name: .customLong("globals"), help: ArgumentHelp(
        "Globals something outside the app's files sets (a library of the module path): not reported as unset.",
        valueName: "NAME,…"))
    var knownGlobals: String = ""

    func run() async throws {
        let source = try AppSource.open(appDirectory, trust: trust)
        defer { source.remove() }
        let failures = Protected<[String]>([])
        var options = ScriptedStoreOptions(log: { _ in }, failures: { failure in
            failures.withLock { $0.append("\(failure.stage.rawValue): \(failure.error)") }
        })
        options.modulePath = modules.templates
        source.configure(&options)
        let (contract, problems) = AppContract.read(app: source.folder)
        if !problems.isEmpty {
            for problem in problems { Console.error("\(problem)") }
            throw ExitCode.appFailure
        }
        var contractFindings: [String] = []
        do {
            let store = try await ScriptedStore(app: source.folder, options: options)
            let props = try await store.props()
            _ = try JSONText.encode(props)
            let state = try await store.state()
            if contract.declares {
                contractFindings = ContractLint.findings(in: source.folder, main: "app.lua", contract: contract, state: state)
            }
            contractFindings += ContractLint.mountFindings(of: source.folder, state: state)
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
        if !contractFindings.isEmpty {
            for finding in contractFindings { Console.error(finding) }
            throw ExitCode.appFailure
        }
        let names = Set(knownGlobals.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) })
        let findings = await GlobalsLint.findings(in: source.folder, known: names)
        if !findings.isEmpty {
            for finding in findings { Console.error("\(finding)") }
            throw ExitCode.appFailure
        }
        Console.out("ok: \(appDirectory)")
    }
}
