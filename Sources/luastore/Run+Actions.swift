import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCommandLine
import LuaStoreCore
import LuaStoreDevtools
import LuaStorePersistence
import LuaStoreBundles
import LuaStoreScripting

/// How `run` feeds its store: a file or standard input of actions, the interactive prompt, a watched bundle, and the
/// outputs it refuses to write over its inputs.
extension Run {
    /// `run BUNDLE --watch`: looks at the bundle file every half second; once it changed and stays the same for one
    /// look, installs it into the running store (`ScriptedStore.install(bundle:trust:)`) and says what became of it.
    func watchBundle(_ bundle: String, store: ScriptedStore, installed: Protected<[URL]>) -> Task<Void, Never> {
        let trust = self.trust
        return Task {
            func look() -> [Int] {
                var information = stat()
                guard stat(bundle, &information) == 0 else { return [] }
                return [Int(information.st_ino), Int(information.st_size), information.st_mtim.tv_sec, information.st_mtim.tv_nsec]
            }
            var seen = look()
            var pending: [Int]?
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                let now = look()
                if now == seen || now.isEmpty { pending = nil; continue }
                guard pending == now else { pending = now; continue } // (still being written)
                seen = now
                pending = nil
                let running = store.manifest.map { "\($0.name) \($0.version)" } ?? "the previous version"
                do {
                    let result = try await store.install(bundle: URL(fileURLWithPath: bundle), trust: try trust.keys(),
                                                         allowUnsigned: trust.allowUnsigned)
                    installed.withLock { $0.append(result.unpacked) }
                    let migrated = if case .reloaded(let from, let to) = result.outcome, from != to { ", migrated from schema \(from) to \(to)" } else { "" }
                    Console.error("installed \(result.manifest.name) \(result.manifest.version) in place of \(running)\(migrated)")
                } catch let failure as ScriptFailure {
                    Console.error("install failed, still running \(running): \(failure.error) (\(failure.stage.rawValue))")
                } catch {
                    Console.error("install failed, still running \(running): \(error)")
                }
            }
        }
    }

    /// Refuses, before anything is opened for writing, an output (`--record`, `--state-out`) that is the same file
    /// as an input (`--actions` or standard input, the app's bundle or scripts, the plugins it mounts) or as the
    /// other output — through links too.
    func refuseOutputsOverInputs(_ folder: URL, bundle: String?) throws {
        var inputs: [(name: String, identity: FileIdentity)] = []
        if let bundle, let identity = FileIdentity(path: bundle) { inputs.append(("the app's bundle \(bundle)", identity)) }
        if let actions, actions != "-" {
            if let identity = FileIdentity(path: actions) { inputs.append(("--actions \(actions)", identity)) }
        } else if let identity = FileIdentity(descriptor: STDIN_FILENO) {
            inputs.append(("standard input", identity))
        }
        for (path, identity) in FileIdentity.scripts(in: folder) {
            inputs.append((path.hasSuffix(".lua") ? "the app's script \(path)" : "the app's file \(path)", identity))
        }
        var outputs: [(name: String, location: String)] = []
        for (option, path) in [("--record", record), ("--state-out", stateOut), ("--persist", persist)] {
            guard let path else { continue }
            let same = FileIdentity(path: path).flatMap { identity in inputs.first { $0.identity == identity }?.name }
                ?? outputs.first { $0.location == FileIdentity.location(of: path) }?.name
            if let same {
                Console.error("\(option) \(path) is the same file as \(same): refusing to write over it (nothing was written)")
                throw ExitCode.unusable
            }
            outputs.append(("\(option) \(path)", FileIdentity.location(of: path)))
        }
    }

    /// Dispatches the actions of `input` as they come, without waiting for each to be reduced: the store takes
    /// them in order, and `lines` names the line of any that fails. Malformed lines are reported in their place
    /// (after every earlier line's failures). Standard output is kept in blocks while input is at hand, and written
    /// out whenever the run waits for input.
    /// Reads and dispatches the input's actions until it ends, or until `stopped` (checked between batches) holds.
    func run(_ store: ScriptedStore, input: ActionInput, lines: DispatchedLines, failures: Protected<Int>,
                     stopped: () -> Bool) async {
        var sinceBarrier = 0
        func settle() async {
            await store.barrier()
            lines.forgetReduced()
            sinceBarrier = 0
        }
        while true {
            if !input.hasBatchReady { // the input is slower than the store: show what is done so far
                await settle()
                Console.buffered = false
            }
            if stopped() { break }
            guard let batch = await input.next() else { break }
            Console.buffered = true
            var numbers: [Int] = []
            numbers.reserveCapacity(batch.count)
            var actions: [LuaValue] = []
            actions.reserveCapacity(batch.count)
            func dispatchTaken() {
                lines.dispatching(numbers)
                for action in actions { store.dispatch(action) }
                sinceBarrier += actions.count
                numbers.removeAll(keepingCapacity: true)
                actions.removeAll(keepingCapacity: true)
            }
            for line in batch {
                switch line.content {
                case .action(let action):
                    numbers.append(line.number)
                    actions.append(action)
                case .malformed(let reason):
                    dispatchTaken()
                    await settle() // earlier lines' failures first
                    failures.withLock { $0 += 1 }
                    Console.error("line \(line.number): \(reason)")
                }
            }
            dispatchTaken()
            if sinceBarrier >= DispatchedLines.window { await settle() }
        }
        await settle()
        Console.buffered = false
    }

    /// Reads actions typed at a terminal (JSON or the short form) after a prompt, one at a time, each reduced
    /// and its props shown before the next prompt.
    func runInteractively(_ store: ScriptedStore, lines: DispatchedLines, failures: Protected<Int>,
                                  stopped: () -> Bool) async {
        Console.error("type actions (JSON or short form like `increment`), ctrl-D to quit")
        var number = 0
        while !stopped(), let line = await TerminalLines.next(prompt: "> ") {
            number += 1
            if line.trimmingCharacters(in: .whitespaces).isEmpty { continue }
            let action: LuaValue
            do {
                action = try ActionParser.parse(line, allowShortForm: true)
            } catch {
                failures.withLock { $0 += 1 }
                Console.error("line \(number): \(error)")
                continue
            }
            lines.dispatching([number])
            store.dispatch(action)
            await store.barrier()
            lines.forgetReduced()
            if stopped() { break }
        }
    }
}
