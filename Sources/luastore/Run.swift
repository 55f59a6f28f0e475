import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCommandLine
import LuaStoreCore
import LuaStoreDevtools
import LuaStorePersistence
import LuaStoreBundles
import LuaStoreScripting

/// `luastore run APP_DIR`: runs an app interactively or on a file of actions.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run an app: interactively at a terminal, or on JSON Lines actions.",
        discussion: """
            Interactive (standard input is a terminal, no --actions): type actions as JSON objects or in the short \
            form `increment` or `add title="Buy milk"`; props are shown after each change. Scripted: --actions FILE \
            (or -, or a pipe on standard input) reads one JSON action object per line; blank lines are skipped.
            Exit status: 0 when every action was applied, 1 when any failed (the run still goes on), 2 for usage \
            errors and apps that cannot be loaded.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json
    }

    @Argument(help: "The app: a folder (with app.lua), or a bundle (luastore pack).", completion: .file())
    var appDirectory: String

    @OptionGroup var modules: ModulePathOptions

    @OptionGroup var trust: TrustOptions

    @OptionGroup var clock: ClockOptions

    @Option(name: .long, help: "JSON Lines actions: a file, or - for standard input.")
    var actions: String?

    @Option(name: .long, help: "Output: text (for people) or json (one compact object per props change).")
    var format: Format = .text

    @Option(name: .customLong("state-out"), help: "Write the final state as JSON to this file.")
    var stateOut: String?

    @Option(name: .customLong("settle-timeout"), help: "Seconds to wait for commands in flight after the last action.")
    var settleTimeout: Double = 3

    @Option(name: .long, help: "Record the session (each action with what it changed and when; format 5, JSON Lines) for `luastore replay`.")
    var record: String?

    @Flag(name: .long, help: "Reload the app's scripts when they change (reported on standard error).")
    var watch = false

    @Flag(name: .customLong("watch-poll"), help: "Like --watch, but look for changes every 10 ms instead of being told by the kernel (network file systems, folders shared into containers).")
    var watchPoll = false

    @Option(name: .customLong("allow-host"), help: "A host HTTP effects may reach (repeatable); loopback is always allowed.")
    var allowedHosts: [String] = []

    @Option(name: .long, help: "Folder for luastore.save/load data (default: APP_DIR/.data).", completion: .directory)
    var data: String?

    @Option(name: .customLong("max-line-bytes"), help: ArgumentHelp("The longest action line read (64 MiB by default); a longer one ends the input with an error naming it.", valueName: "bytes"))
    var maxLineBytes = LineReader.defaultMaximumLength

    @Option(name: .customLong("time-budget-ms"), help: ArgumentHelp("Milliseconds a script may run per call (init, an action, props) before it is stopped (200 by default, or $LUASTORE_TIME_BUDGET_MS).", valueName: "ms"))
    var timeBudget: Double = TimeBudgetDefault.milliseconds

    @Option(name: .long, help: ArgumentHelp("Serve the devtools page on this port (0 picks a free one) and print its address; the run then goes on serving after its input ends, until interrupted.", valueName: "port"))
    var devtools: UInt16?

    @Option(name: .customLong("devtools-host"), help: "The address the devtools listen on (default 127.0.0.1, loopback only).")
    var devtoolsHost = "127.0.0.1"

    @Option(name: .customLong("devtools-keep"), help: "Journal entries the devtools keep (and the history time travel reaches).")
    var devtoolsKeep = 100_000

    @Option(name: .customLong("devtools-keep-bytes"), help: ArgumentHelp("About how much memory the devtools' kept entries may take (256M by default; K, M, G: KiB, MiB, GiB); the oldest go first.", valueName: "size"))
    var devtoolsKeepBytes = ByteSize(DevtoolsJournal.defaultByteCapacity)

    @Option(name: .long, help: ArgumentHelp("Keep the state in this SQLite file across runs: what each action changed is written as it commits, and a run on an existing file resumes from it (init does not run; migrate does when schemaVersion grew).", valueName: "file"))
    var persist: String?

    @Option(name: .customLong("persist-sync"), help: "full: each action is on disk before its props line; batch (default): commits grouped, a crash loses at most the last few milliseconds.")
    var persistSync: Durability = .batch

    @Flag(name: .customLong("persist-reset"), help: "Start the --persist file over, empty (init runs).")
    var persistReset = false

    @Flag(name: .customLong("persist-recover"), help: "Open a --persist file whose log a crash left damaged, keeping what comes before the damage (it is refused otherwise, naming what would be dropped).")
    var persistRecover = false

    @Option(name: .customLong("persist-snapshot-every"), help: ArgumentHelp("Write a snapshot of the whole state every this many actions (older log entries then go).", valueName: "actions"))
    var persistSnapshotEvery = Int(StoreDatabase.defaultSnapshotInterval)

    func validate() throws {
        try TimeBudgetDefault.validate()
        if persist == nil, persistSync != .batch || persistReset || persistRecover || persistSnapshotEvery != Int(StoreDatabase.defaultSnapshotInterval) {
            throw ValidationError("--persist-sync, --persist-reset, --persist-recover and --persist-snapshot-every go with --persist FILE")
        }
        guard persistSnapshotEvery >= 1 else { throw ValidationError("--persist-snapshot-every must be at least 1") }
        guard settleTimeout >= 0, settleTimeout.isFinite else { throw ValidationError("--settle-timeout must be a number of seconds ≥ 0") }
        guard LuaLimits.isTimeBudget(milliseconds: timeBudget) else { throw ValidationError(LuaLimits.timeBudgetRule("--time-budget-ms")) }
        guard maxLineBytes >= 1 else { throw ValidationError("--max-line-bytes must be at least 1") }
        guard devtoolsKeep >= 1 else { throw ValidationError("--devtools-keep must be at least 1") }
        if devtools == nil, devtoolsHost != "127.0.0.1" || devtoolsKeep != 100_000 || devtoolsKeepBytes.bytes != DevtoolsJournal.defaultByteCapacity {
            throw ValidationError("--devtools-host, --devtools-keep and --devtools-keep-bytes go with --devtools PORT")
        }
    }

    func run() async throws {
        let source = try AppSource.open(appDirectory, trust: trust)
        let installed = Protected<[URL]>([]) // (what later versions of a bundle were unpacked into)
        defer {
            source.remove()
            for folder in installed.withLock({ $0 }) { try? FileManager.default.removeItem(at: folder) }
        }
        let folder = source.folder
        let failures = Protected(0)
        let lines = DispatchedLines()
        try refuseOutputsOverInputs(folder, bundle: source.bundle)
        let recorder: SessionRecorder?
        do {
            recorder = try record.map { path throws(OutputFailure) in SessionRecorder(file: try OutputFile(path: path, mode: .stream)) }
        } catch {
            Console.error("cannot write the recording to \(error)")
            throw ExitCode.unusable
        }
        let format = self.format
        // Once the --persist database could not be written, the store refuses every action: the first failure
        // is said, the refusals after it only counted (and the input is no longer read).
        let persisted = Protected<StoreDatabase?>(nil)
        let stop = Protected((said: false, refused: 0))

        var options = ScriptedStoreOptions(
            notification: .everyAction,
            log: { line in Console.error("log: " + line) },
            failures: { failure in
                if persisted.withLock({ $0?.failure }) != nil {
                    let quiet = stop.withLock { stop in
                        defer { stop.said = true }
                        if stop.said { stop.refused += 1 }
                        return stop.said
                    }
                    if quiet {
                        failures.withLock { $0 += 1 }
                        return
                    }
                }
                // (An effect's message names it: `save "todos" failed: …`.)
                var text = failure.stage == .effect ? "\(failure.error)" : "\(failure.stage.rawValue) failed: \(failure.error)"
                if let line = failure.dispatchIndex.flatMap(lines.line(of:)) {
                    text += " (line \(line))"
                } else if let action = failure.action {
                    text += " (action \((try? JSONText.encode(action, root: "action")) ?? "\(action)"))"
                }
                // (A spent budget names the line it stopped at; the traceback says how the script got there.)
                if failure.error.kind == .timeout, let traceback = failure.error.scriptTraceback { text += "\n" + traceback }
                failures.withLock { $0 += 1 }
                Console.error(text)
            })
        options.urlPolicy.allowedHosts.formUnion(allowedHosts)
        options.limits.timeBudget = .microseconds(Int64(timeBudget * 1000))
        // (A bundle's data goes beside it: what it unpacks into is removed when the run ends.)
        options.storageFolder = try Self.storageFolder(named: data, default: source.bundle.map { $0 + ".data" } ?? appDirectory + "/.data")
        options.modulePath = modules.templates
        options.clock = try clock.storeClock()
        source.configure(&options)
        options.protectedFiles = [actions, stateOut, record, source.bundle].compactMap { $0 }.filter { $0 != "-" }
        let devtoolsJournal = devtools.map { _ in DevtoolsJournal(capacity: devtoolsKeep, bytes: devtoolsKeepBytes.bytes) }
        options.recorder = recorder
        var database: StoreDatabase?
        if let persist {
            do {
                database = try StoreDatabase(path: persist, app: folder.lastPathComponent, durability: persistSync,
                                             snapshotInterval: UInt64(persistSnapshotEvery), reset: persistReset, recover: persistRecover)
                if let recovered = database?.recovered { Console.error("--persist \(persist): \(recovered)") }
            } catch {
                Console.error("cannot keep the state in \(error)")
                recorder?.file?.discard()
                throw ExitCode.unusable
            }
            options.persistence = database
            persisted.withLock { $0 = database }
        }
        if let devtoolsJournal {
            options.journal = { entry in devtoolsJournal.hear(entry) }
            options.historyEntries = devtoolsKeep
            options.subscriptionsChanged = { change in devtoolsJournal.hear(change) }
        }

        let store: ScriptedStore
        do {
            store = try await ScriptedStore(app: folder, options: options)
            if let unpacked = source.unpacked { store.ownUnpackedFolder(unpacked) } // (gone once a new version is in)
        } catch {
            Console.error("cannot load \(appDirectory): \(error.error) (\(error.stage.rawValue))")
            recorder?.file?.discard()
            _ = database?.close()
            throw ExitCode.unusable
        }
        if let recorder {
            do {
                recorder.start(app: folder.lastPathComponent, try await store.journalStart())
            } catch {
                Console.error("cannot record the initial state: \(error)")
                failures.withLock { $0 += 1 }
            }
        }
        store.observeProps { props in
            switch format {
            case .json:
                do {
                    Console.out(try JSONText.encode(props))
                } catch {
                    failures.withLock { $0 += 1 }
                    Console.error("props cannot be written as JSON: \(error)")
                }
            case .text:
                Console.out(TextRenderer.render(props))
                Console.out("")
            }
            return .active
        }
        await store.barrier()
        var server: DevtoolsServer?
        if let port = devtools, let devtoolsJournal {
            var settings = DevtoolsOptions()
            settings.host = devtoolsHost
            settings.port = port
            settings.app = folder.lastPathComponent
            settings.recordedTo = record
            do {
                let started = try await DevtoolsServer.start(store: store, journal: devtoolsJournal, options: settings)
                server = started
                if !started.isLoopback {
                    Console.error("warning: the devtools listen on \(started.address), which other machines may reach: anyone who has the page's address (its token) can read the state and dispatch actions")
                }
                Console.error("devtools: \(started.url)\n", prefixed: false)
            } catch {
                Console.error("cannot serve the devtools: \(error)")
                store.shutdown()
                recorder?.file?.discard()
                _ = database?.close()
                throw ExitCode.unusable
            }
        }
        var bundleWatch: Task<Void, Never>?
        if let bundle = source.bundle, watch || watchPoll {
            bundleWatch = watchBundle(bundle, store: store, installed: installed)
        } else if watch || watchPoll {
            store.startWatching(polls: watchPoll) { result in
                switch result {
                case .success(.unchanged): break
                case .success(.reloaded(let from, let to)):
                    Console.error(from == to ? "reloaded" : "reloaded, migrated from schema \(from) to \(to)")
                case .failure(let error):
                    Console.error("reload failed, still running the previous version: \(error.error) (\(error.stage.rawValue))")
                }
            }
        }

        // (SIGINT, SIGTERM: the input ends there, and the run finishes as when it ends.)
        let interruption = Interruption()
        if actions == nil && isatty(STDIN_FILENO) != 0 {
            interruption.onSignal { TerminalLines.interrupt() }
            await runInteractively(store, lines: lines, failures: failures) {
                persisted.withLock { $0?.failure } != nil || interruption.signal != nil
            }
        } else {
            let input: ActionInput
            do {
                input = try ActionInput.open(actions ?? "-", maximumLineLength: maxLineBytes)
            } catch {
                Console.error("cannot read actions from \(actions ?? "-"): \(error.reason)")
                store.shutdown()
                recorder?.file?.discard()
                _ = database?.close()
                throw ExitCode.unusable
            }
            interruption.onSignal { input.interrupt() }
            await run(store, input: input, lines: lines, failures: failures) {
                persisted.withLock { $0?.failure } != nil || interruption.signal != nil
            }
            if let failure = input.failure {
                Console.error("cannot read actions from \(actions ?? "standard input"): \(failure)")
                failures.withLock { $0 += 1 }
            }
        }

        let interrupted = interruption.signal
        if let interrupted {
            Console.error("interrupted (\(Interruption.name(interrupted))): no more actions are read; the run ends with what was "
                + "read (interrupt again to stop at once)")
        }
        if let server {
            if interrupted == nil {
                Console.error("the actions are done; the devtools still serve \(server.url) until interrupted (ctrl-C)")
                await interruption.wait()
            }
            await server.stop()
            // (A run that ends while the devtools travel goes back to the present first: the actions held meanwhile
            // are reduced, never dropped.)
            await store.resume()
        }
        bundleWatch?.cancel()
        await bundleWatch?.value
        if !(await store.waitUntilIdle(timeout: .seconds(settleTimeout))) {
            Console.error("commands still in flight after \(settleTimeout) s were cancelled")
        }
        store.shutdown()
        await store.barrier()
        if let stateOut {
            do {
                let state = try await store.state()
                let text = try JSONText.encode(state, root: "state")
                let file = try OutputFile(path: stateOut, mode: .whole)
                file.append { text }
                if let failure = file.close() { throw failure }
            } catch let failure as OutputFailure {
                Console.error("cannot write the state to \(failure)")
                failures.withLock { $0 += 1 }
            } catch {
                Console.error("cannot write the state to \(stateOut): \(error)")
                failures.withLock { $0 += 1 }
            }
        }
        if let failure = recorder?.file?.close() {
            Console.error("cannot write the recording to \(failure)")
            failures.withLock { $0 += 1 }
        }
        if let database, let failure = database.close() {
            let refused = stop.withLock { $0.refused }
            Console.error("the store stopped: it cannot keep its state in \(failure)"
                + (refused > 0 ? "; \(refused) later action(s) were refused" : "") + ", and the rest of the input was not read; "
                + "the file holds the state as of entry #\(database.status.sequence)"
                + (persistSync == .batch ? " (with batch sync, actions shown after it are not kept)" : ""))
            failures.withLock { $0 += 1 }
        }
        if failures.withLock({ $0 }) > 0 { throw ExitCode.appFailure }
        if let interrupted { throw ExitCode(128 + interrupted) } // (as a shell reports a process a signal ended)
    }
}

extension Run {
    /// Where `save` and `load` keep data: `--data DIR` as given, else `fallback` (the app's `.data`, or the one beside
    /// its bundle) — which may not be a symbolic link: an app folder that brings one (`.data -> /etc`) would have its
    /// saves written anywhere. Exits 2 naming it.
    static func storageFolder(named data: String?, default fallback: String) throws -> URL {
        if let data { return URL(fileURLWithPath: data) }
        var status = stat()
        if lstat(fallback, &status) == 0, status.st_mode & S_IFMT == S_IFLNK {
            Console.error("the data folder \(fallback) is a symbolic link: a store keeps its saves in a folder of its own (name another with --data DIR)")
            throw ExitCode.unusable
        }
        return URL(fileURLWithPath: fallback)
    }
}
