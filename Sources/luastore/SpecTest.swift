import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCommandLine
import LuaStoreConcurrency
import LuaStoreScripting

/// `luastore test APP_DIR [--filter PATTERN] [--output text|json|tap|junit]`: runs the app's Lua specs.
struct SpecTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run an app's specs (*_spec.lua in the app folder, *_spec*.lua under spec/, or as .busted says).",
        discussion: """
            Specs are written as for busted: describe/context, it/spec/test, pending, before_each/after_each, \
            setup/teardown (and lazy_ and strict_ forms), finally, randomize; luassert's assert (assert.are.same, \
            assert.is_not_nil, assert.has_error, assert.spy(s).was.called(2), …), spy, stub, mock and match; and \
            LuaStore's expect(value).to.equal(x). `require("app")` loads the app; modules load from the app folder, then \
            busted's lpath (./src/?.lua, …), then --lua-path. A .busted file's ROOT, pattern, exclude-pattern and lpath \
            (its _all and default tasks) apply. Each test runs with its own time budget (10 s). Exits 1 if any test failed.
            """)

    @Argument(help: "The app: a folder, or a bundle (luastore pack).", completion: .file())
    var appDirectory: String

    @OptionGroup var modules: ModulePathOptions

    @OptionGroup var trust: TrustOptions

    @Option(help: "Run only the tests whose full name (the describe blocks' names and its own) matches this Lua pattern.")
    var filter: String?

    @Option(name: .customLong("time-budget-ms"), help: ArgumentHelp("Milliseconds a test (with its hooks) may run before it is stopped, as an error (10 s by default).", valueName: "ms"))
    var timeBudget: Double = Self.defaultTestBudget

    /// A test's budget unless `--time-budget-ms` says otherwise: 10 s — a slow test fails alone, an endless one still
    /// ends (busted has no budget; an action's 200 ms is not a test's).
    static let defaultTestBudget: Double = 10_000

    func validate() throws {
        try TimeBudgetDefault.validate()
        guard LuaLimits.isTimeBudget(milliseconds: timeBudget) else { throw ValidationError(LuaLimits.timeBudgetRule("--time-budget-ms")) }
    }

    @Option(help: "How to report: text (default), json, tap or junit.")
    var output: SpecOutput = .text

    func run() async throws {
        let source = try AppSource.open(appDirectory, trust: trust)
        defer { source.remove() }
        let folder = source.folder.standardizedFileURL
        do {
            _ = try ScriptedStore.manifest(of: folder) // (an app needing another scripting API is not tested here)
        } catch {
            Console.error("cannot test \(appDirectory): \(error.error.message)")
            throw ExitCode.unusable
        }
        let thread = LuaThread(name: "luastore-test")
        let found = await thread.perform { () -> Result<(BustedProject, [String]), BustedProject.Problem> in
            do throws(BustedProject.Problem) {
                let project = try BustedProject.load(folder: folder)
                guard let vm = try? LuaVM() else { throw BustedProject.Problem(description: "cannot make a Lua VM") }
                return .success((project, try project.specFiles(in: folder, vm: vm)))
            } catch {
                return .failure(error)
            }
        }
        guard case .success(let (project, files)) = found else {
            if case .failure(let problem) = found { Console.error(problem.description) }
            throw ExitCode.unusable
        }
        guard !files.isEmpty else {
            Console.error("no spec files in \(appDirectory) (*_spec.lua in the folder, or files matching \(project.patterns.joined(separator: ", ")) under \(project.roots.joined(separator: ", ")))")
            throw ExitCode.unusable
        }
        let modulePath = project.lpath + modules.templates
        let budget = Duration.microseconds(Int64(timeBudget * 1000))
        var results: [SpecResult] = []
        // TAP goes out as busted writes it, a line as each test ends; the other reports once all have run.
        let streamed = Protected(0)
        let stream: @Sendable (SpecResult) -> Void = { result in
            guard output == .tap else { return }
            let number = streamed.withLock { count in
                count += 1
                return count
            }
            Console.out(SpecReport.tapLines(result, number: number).joined(separator: "\n"))
        }
        for file in files {
            let outcome = await thread.perform {
                Self.run(file: file, helper: project.helper, folder: folder, modulePath: modulePath, appModulePath: modules.templates,
                         filter: filter, budget: budget, onResult: stream)
            }
            switch outcome {
            case .success(let fileResults): results += fileResults
            case .failure(let problem):
                Console.error(problem.description)
                throw ExitCode.unusable
            }
        }
        Console.out(output == .tap ? "1..\(results.count)" : SpecReport(results: results).render(output))
        if results.contains(where: { $0.status == .failed || $0.status == .errored }) { throw ExitCode.appFailure }
    }

    /// A problem with the command itself (not with a spec): a malformed `--filter`.
    struct UsageProblem: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs one spec file in a fresh VM (on its LuaThread): a result for each test, in order.
    static func run(file: String, helper: String? = nil, folder: URL, modulePath: [String], appModulePath: [String], filter: String?,
                    budget: Duration, onResult: (SpecResult) -> Void = { _ in }) -> Result<[SpecResult], UsageProblem> {
        var results: [SpecResult] = []
        /// Each result as it comes (TAP writes its line then, between what the tests print, as busted does).
        func record(_ result: SpecResult) {
            results.append(result)
            onResult(result)
        }
        let clock = ContinuousClock()
        do throws(LuaError) {
            var limits = LuaLimits()
            limits.timeBudget = budget
            limits.system = .system // (as busted's: the real clock and environment; the stores specs run have none)
            // (What a spec prints goes out as busted writes it: the bytes printed, as they are, not indented.)
            let vm = try LuaVM(limits: limits, moduleRoot: folder, modulePath: modulePath, printingBytes: { Console.out(bytes: $0) },
                             errorBytes: { FileHandle.standardError.write(Data($0)) }) // (io.stderr, warn: as busted's)
            vm.moduleChunkPrefix = "./" // (modules named as stock Lua and busted name them: `./lib/util.lua:12:`)
            let replays = SessionReplays(folder: folder, modulePath: appModulePath, print: { Console.out($0) })
            try EffectsModule.define(in: vm)
            // A host chunk (`host:`): errors inside the library are located at the spec's line that called it.
            // (luassert first: the blocks take it as their chunk's argument.)
            func chunk(_ embedded: EmbeddedLuaFile) throws(LuaError) -> LuaReference {
                try vm.load(embedded.source, chunkName: "host:" + embedded.path)
            }
            func run(_ chunk: LuaReference, _ arguments: [LuaReference]) throws(LuaError) -> LuaReference {
                guard let result = try vm.callForReferences(chunk, arguments: arguments.map(LuaArgument.reference)).first ?? nil else {
                    throw LuaError(.runtime, "the spec library did not load")
                }
                return result
            }
            let values = try run(try chunk(EmbeddedLua.luastoreValues), [])
            let spies = try run(try chunk(EmbeddedLua.luastoreSpies), [values])
            let assertions = try run(try chunk(EmbeddedLua.luastoreAssert), [values, spies])
            // (With the host's `placedpcall`, which places an error where it was raised, as busted's handler does.)
            let placedCall = try run(try vm.loadTrusted("return placedpcall", chunkName: "host:placedpcall"), [])
            let spec = try run(try chunk(EmbeddedLua.luastoreSpec), [assertions, placedCall])
            func function(_ name: String) throws(LuaError) -> LuaReference {
                guard let value = try vm.field(.string(name), of: spec) else {
                    throw LuaError(.runtime, "the spec library has no '\(name)'")
                }
                return value
            }
            let sessionChunk = try vm.load(EmbeddedLua.luastoreSession.source, chunkName: "host:" + EmbeddedLua.luastoreSession.path)
            if let session = try vm.callForReferences(sessionChunk, arguments: []).first ?? nil {
                if let connect = try vm.field("connect", of: session) {
                    try vm.call(connect, arguments: [.reference(replays.open(in: vm)), .reference(replays.step(in: vm))])
                }
                try vm.call(try function("preload"), arguments: [.value("luastore.session"), .reference(session)])
            }
            let storeChunk = try vm.load(EmbeddedLua.luastoreStore.source, chunkName: "host:" + EmbeddedLua.luastoreStore.path)
            if let store = try vm.callForReferences(storeChunk, arguments: []).first ?? nil {
                if let connect = try vm.field("connect", of: store) {
                    try vm.call(connect, arguments: replays.storeFunctions(in: vm).map(LuaArgument.reference))
                }
                try vm.call(try function("preload"), arguments: [.value("luastore.store"), .reference(store)])
            }
            let exported = try function("globals")
            var globals: [String: LuaReference] = [:]
            let names = try vm.call(try function("globalnames")).first?.string ?? ""
            for name in names.split(separator: " ").map(String.init) {
                guard let value = try vm.field(.string(name), of: exported) else {
                    throw LuaError(.runtime, "the spec library has no '\(name)'")
                }
                globals[name] = value
            }
            guard let source = FileManager.default.contents(atPath: folder.appendingPathComponent(file).path) else {
                record(SpecResult(file: file, name: file, status: .errored, message: "cannot read the file", location: file))
                return .success(results)
            }
            func nextItem(_ next: LuaReference) throws(LuaError) -> Int64? {
                try vm.call(next).first?.integer
            }
            // `arg`: the runner's command line, as busted's specs see busted's (`arg[0]` the program).
            let commandLine = CommandLine.arguments
            let arguments = LuaTable(array: commandLine.dropFirst().map(LuaValue.string),
                                     fields: [.integer(0): .string(commandLine.first ?? "luastore")])
            globals["arg"] = try vm.callForReferences(try vm.load("return ...", chunkName: "=luastore"),
                                                      arguments: [.value(.table(arguments))]).first ?? nil
            // The project's helper (`.busted`'s `helper`) first, with the same globals: what it defines, the spec sees,
            // as under busted. One that fails is its file's error.
            if let helper {
                guard let helperSource = FileManager.default.contents(atPath: folder.appendingPathComponent(helper).path) else {
                    record(SpecResult(file: file, name: helper, status: .errored, message: "cannot read the helper", location: helper))
                    return .success(results)
                }
                try vm.call(try vm.load(bytes: LuaVM.fileSource(helperSource), chunkName: helper, globals: globals))
            }
            let chunk = try vm.load(bytes: LuaVM.fileSource(source), chunkName: file, globals: globals)
            try vm.call(chunk)
            let next = try function("next"), name = try function("name"), line = try function("line")
            let status = try function("status"), raise = try function("raise")
            let matches = try function("matches"), runOne = try function("run"), kind = try function("kind")
            let after = try function("after")
            // One item at a time: asking for the next runs the bodies of the blocks before it (as busted does).
            while let index = try nextItem(next) {
                let title = (try? vm.call(name, .integer(index)).first?.string) ?? "test \(index)"
                let testLine = (try? vm.call(line, .integer(index)).first?.integer).flatMap { $0 }.map { "\(file):\($0)" } ?? file
                let itemStatus = try vm.call(status, .integer(index)).first?.string
                if itemStatus == "error" {
                    do {
                        try vm.call(raise, .integer(index))
                    } catch {
                        record(SpecResult(file: file, name: title, status: .errored, message: error.message,
                                                  location: error.location ?? testLine, testLocation: testLine))
                    }
                    continue
                }
                if let filter {
                    do {
                        guard try vm.call(matches, .integer(index), .string(filter)).first == true else { continue }
                    } catch {
                        return .failure(UsageProblem(description: "--filter \(String(reflecting: filter)): \(error.message)"))
                    }
                }
                if itemStatus == "pending" {
                    record(SpecResult(file: file, name: title, status: .pending, location: testLine))
                    continue
                }
                let start = clock.now
                // (The test's end is told before its after_each hooks run, as busted tells it: what they print comes
                // after its result; one that fails is an item of its own.)
                func runAfterEach() {
                    do {
                        try vm.call(after, .integer(index))
                    } catch {
                        record(SpecResult(file: file, name: title, status: .errored, message: error.message, location: error.location ?? testLine))
                    }
                }
                do {
                    let outcome = try vm.call(runOne, .integer(index))
                    if outcome.first == "skipped" { continue } // (its block's setup failed: an error of its own)
                    defer { runAfterEach() }
                    // (A test that called `pending(reason)`: the reason, at the line of the call, as busted reports it.)
                    let isPending = outcome.first == "pending"
                    let reason = isPending && outcome.count > 1 ? outcome[1].string : nil
                    let place = isPending && outcome.count > 2 ? outcome[2].integer.map { "\(file):\($0)" } : nil
                    record(SpecResult(file: file, name: title, status: isPending ? .pending : .passed, message: reason,
                                              location: place ?? testLine, seconds: Self.seconds(clock.now - start)))
                } catch {
                    defer { runAfterEach() }
                    let failed = (try? vm.call(kind, .integer(index)).first?.string) == "failure" && error.kind == .runtime
                    // (Named again: a before_each that failed is the error, named after its block, as busted names it.)
                    let named = (try? vm.call(name, .integer(index)).first?.string) ?? title
                    let hookLine = (try? vm.call(line, .integer(index)).first?.integer).flatMap { $0 }.map { "\(file):\($0)" } ?? testLine
                    record(SpecResult(file: file, name: named, status: failed ? .failed : .errored, message: error.message,
                                              location: error.location ?? hookLine, testLocation: hookLine, seconds: Self.seconds(clock.now - start),
                                              traceback: error.kind == .timeout ? error.scriptTraceback : nil))
                }
            }
            do {
                try vm.call(try function("finish"))
            } catch {
                record(SpecResult(file: file, name: "teardown", status: .errored, message: error.message,
                                          location: error.location ?? file))
            }
        } catch {
            record(SpecResult(file: file, name: file, status: .errored, message: error.message, location: error.location ?? file))
        }
        return .success(results)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// How `luastore test` reports.
enum SpecOutput: String, ExpressibleByArgument, CaseIterable {
    case text, json, tap, junit
}

/// The outcome of one test.
struct SpecResult {
    /// As busted tells them apart: an assertion that failed (`failed`), or any other error (`errored`).
    enum Status { case passed, failed, errored, pending }

    var file: String
    var name: String
    var status: Status
    var message: String?
    /// `file:line` of the failure, or of the test.
    var location: String
    /// `file:line` of the test itself (its `it`), where it is known and differs from `location`.
    var testLocation: String?
    var seconds: Double = 0
    /// Where the test's code was when its budget ran out (the script's frames), shown under its error.
    var traceback: String?
}
