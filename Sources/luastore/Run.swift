import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCore
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

    @Argument(help: "The app folder (with app.lua).", completion: .directory)
    var appDirectory: String

    @Option(name: .long, help: "JSON Lines actions: a file, or - for standard input.")
    var actions: String?

    @Option(name: .long, help: "Output: text (for people) or json (one compact object per props change).")
    var format: Format = .text

    @Option(name: .customLong("state-out"), help: "Write the final state as JSON to this file.")
    var stateOut: String?

    @Option(name: .customLong("settle-timeout"), help: "Seconds to wait for commands in flight after the last action.")
    var settleTimeout: Double = 3

    @Option(name: .long, help: "Record the session (each action with what it changed; format 2, JSON Lines) for `luastore replay`.")
    var record: String?

    @Flag(name: .long, help: "Reload the app's scripts when they change (reported on standard error).")
    var watch = false

    @Option(name: .customLong("allow-host"), help: "A host HTTP effects may reach (repeatable); loopback is always allowed.")
    var allowedHosts: [String] = []

    @Option(name: .long, help: "Folder for luastore.save/load data (default: APP_DIR/.data).", completion: .directory)
    var data: String?

    func validate() throws {
        guard settleTimeout >= 0, settleTimeout.isFinite else { throw ValidationError("--settle-timeout must be a number of seconds ≥ 0") }
    }

    func run() async throws {
        let folder = URL(fileURLWithPath: appDirectory)
        let failures = Protected(0)
        let currentLine = Protected<(Int, LuaValue)?>(nil)
        let recorder: SessionRecorder?
        do {
            recorder = try record.map { path throws(OutputFailure) in SessionRecorder(file: try OutputFile(path: path)) }
        } catch {
            Console.error("cannot write the recording to \(error)")
            throw ExitCode.unusable
        }
        let format = self.format

        var options = ScriptedStoreOptions(
            notification: .everyAction,
            log: { line in Console.error("log: " + line) },
            failures: { failure in
                var text = "\(failure.stage.rawValue) failed: \(failure.error)"
                if let action = failure.action, let (line, current) = currentLine.withLock({ $0 }) {
                    text += action == current ? " (line \(line))" : " (action \((try? JSONText.encode(action, root: "action")) ?? "\(action)"))"
                }
                failures.withLock { $0 += 1 }
                Console.error(text)
            })
        options.urlPolicy.allowedHosts.formUnion(allowedHosts)
        options.storageFolder = URL(fileURLWithPath: data ?? (appDirectory + "/.data"))
        if let recorder {
            options.journal = { entry in recorder.append(entry) }
        }

        let store: ScriptedStore
        do {
            store = try await ScriptedStore(app: folder, options: options)
        } catch {
            Console.error("cannot load \(appDirectory): \(error.error) (\(error.stage.rawValue))")
            _ = recorder?.file.close()
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
        if watch {
            store.startWatching { result in
                switch result {
                case .success(.unchanged): break
                case .success(.reloaded(let from, let to)):
                    Console.error(from == to ? "reloaded" : "reloaded, migrated from schema \(from) to \(to)")
                case .failure(let error):
                    Console.error("reload failed, still running the previous version: \(error.error) (\(error.stage.rawValue))")
                }
            }
        }

        let interactive = actions == nil && isatty(STDIN_FILENO) != 0
        let input: LineSource
        if let actions, actions != "-" {
            guard let file = LineSource(path: actions) else {
                Console.error("cannot read actions from \(actions)")
                store.shutdown()
                throw ExitCode.unusable
            }
            input = file
        } else {
            input = LineSource.standardInput
        }
        if interactive { Console.error("type actions (JSON or short form like `increment`), ctrl-D to quit") }

        var number = 0
        while let line = await input.nextLine(prompt: interactive ? "> " : nil) {
            number += 1
            if line.trimmingCharacters(in: .whitespaces).isEmpty { continue }
            let action: LuaValue
            do {
                action = try ActionParser.parse(line, allowShortForm: interactive)
            } catch {
                failures.withLock { $0 += 1 }
                Console.error("line \(number): \(error)")
                continue
            }
            currentLine.withLock { $0 = (number, action) }
            store.dispatch(action)
            await store.barrier()
        }

        if !(await store.waitUntilIdle(timeout: .seconds(settleTimeout))) {
            Console.error("commands still in flight after \(settleTimeout) s were cancelled")
        }
        store.shutdown()
        await store.barrier()
        if let stateOut {
            do {
                let state = try await store.state()
                let text = try JSONText.encode(state, root: "state")
                let file = try OutputFile(path: stateOut)
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
        if let failure = recorder?.file.close() {
            Console.error("cannot write the recording to \(failure)")
            failures.withLock { $0 += 1 }
        }
        if failures.withLock({ $0 }) > 0 { throw ExitCode.appFailure }
    }
}

/// Lines from a file or standard input, read off the cooperative pool.
final class LineSource: Sendable {
    private let handle: FileHandle?

    private init(handle: FileHandle?) { self.handle = handle }

    static let standardInput = LineSource(handle: nil)

    convenience init?(path: String) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        self.init(handle: handle)
    }

    private static let reader = DispatchQueue(label: "luastore.input")

    func nextLine(prompt: String?) async -> String? {
        await withCheckedContinuation { continuation in
            Self.reader.async { [self] in
                if let prompt { FileHandle.standardError.write(Data(prompt.utf8)) }
                continuation.resume(returning: handle.map(Self.readLine(from:)) ?? Swift.readLine(strippingNewline: true))
            }
        }
    }

    private static func readLine(from handle: FileHandle) -> String? {
        var bytes: [UInt8] = []
        while true {
            guard let chunk = try? handle.read(upToCount: 1), let byte = chunk.first else {
                return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
            }
            if byte == 10 { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
    }
}
