import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCommandLine
import LuaStoreCore
import LuaStoreScripting

/// `luastore replay APP_DIR FILE`: replays a recorded session without performing effects.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a session recorded with `run --record`, without effects, and compare what every action changed.",
        discussion: """
            Every recorded action (those produced by effects included) is applied in order with effects switched off; \
            what each changes must be what the recording says it changed (compared path by path: costs what changed, \
            not the state's size), and an action that failed must fail again. Reloads in the recording are skipped \
            (the current scripts run throughout). Reports the first divergence. A recording cut mid-line (a crash) \
            replays up to its last complete line. Exit status: 0 when everything matches, 1 at the first \
            divergence, 2 for unusable input.
            """)

    @Argument(help: "The app folder (with app.lua).", completion: .directory)
    var appDirectory: String

    @OptionGroup var modules: ModulePathOptions

    @Argument(help: "The recording.", completion: .file())
    var recording: String

    @Option(name: .long, help: "Stop after the entry with this sequence number.")
    var until: UInt64?

    @Flag(name: .long, help: "Print the report as one JSON object.")
    var json = false

    @Option(name: .customLong("write-spec"), help: ArgumentHelp(
        "Also write the session as a busted spec to this file (one test per action, checking what it changed, its failure and the props where they changed; run it with `luastore test`). Written only when the replay matches.",
        valueName: "file"))
    var writeSpec: String?

    @Option(name: .customLong("time-budget-ms"), help: ArgumentHelp("Milliseconds a script may run per call (init, an action) before it is stopped (200 by default, or $LUASTORE_TIME_BUDGET_MS).", valueName: "ms"))
    var timeBudget: Double = TimeBudgetDefault.milliseconds

    @Option(name: .customLong("max-line-bytes"), help: ArgumentHelp("The longest recording line read (64 MiB by default); a longer one is an error naming it.", valueName: "bytes"))
    var maxLineBytes = LineReader.defaultMaximumLength

    func validate() throws {
        try TimeBudgetDefault.validate()
        guard maxLineBytes >= 1 else { throw ValidationError("--max-line-bytes must be at least 1") }
        guard LuaLimits.isTimeBudget(milliseconds: timeBudget) else { throw ValidationError(LuaLimits.timeBudgetRule("--time-budget-ms")) }
    }

    /// Actions dispatched before the replay waits for the store and compares what they did.
    static let window = 4_096

    /// `--write-spec` may not name the recording or one of the app's scripts (checked before anything is read).
    private func refuseSpecOverInputs() throws {
        guard let writeSpec, let identity = FileIdentity(path: writeSpec) else { return }
        var inputs = FileIdentity.scripts(in: URL(fileURLWithPath: appDirectory)).map { ("the app's script \($0.0)", $0.1) }
        if let recorded = FileIdentity(path: recording) { inputs.append(("the recording \(recording)", recorded)) }
        if let same = inputs.first(where: { $0.1 == identity }) {
            Console.error("--write-spec \(writeSpec) is the same file as \(same.0): refusing to write over it (nothing was written)")
            throw ExitCode.unusable
        }
    }

    func run() async throws {
        try refuseSpecOverInputs()
        var recorded: RecordingLines
        do {
            recorded = try RecordingLines(try LineReader(path: recording, maximumLength: maxLineBytes), decodingState: false)
        } catch let unreadable as LineReader.Unreadable {
            Console.error("cannot read \(recording): \(unreadable.reason)")
            throw ExitCode.unusable
        } catch {
            throw unusable(error)
        }
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.modulePath = modules.templates
        // (Each action's journal entry is compared, whatever the observers see: they are told once per burst, as a
        // session's were — except when a spec is written, which needs the props after each action.)
        options.notification = writeSpec == nil ? .batched : .everyAction
        options.limits.timeBudget = .microseconds(Int64(timeBudget * 1000))
        // A recording that starts later than its session (a snapshot's journal, an export of kept history: its
        // header follows entry N > 0) replays from the state it holds; one from the start runs `init`, compared below.
        let startsLater = (recorded.header.sequence ?? 0) > 0
        var initial: LuaValue?
        let replayer: Replayer
        do {
            if startsLater {
                do { initial = try recorded.decodedHeaderState() } catch { throw unusable(error) }
            }
            replayer = try await Replayer(app: URL(fileURLWithPath: appDirectory), from: initial, clock: recorded.header.recordedClock,
                                          time: recorded.header.recordedTime, random: recorded.header.random, options: options)
        } catch let failure as ScriptFailure {
            Console.error("cannot load \(appDirectory): \(failure.error) (\(failure.stage.rawValue))")
            throw ExitCode.unusable
        }
        let store = replayer.store
        defer { store.shutdown() }
        UntilExit.keep(store) // (its state is not taken apart only for the process to end)
        // A recording made with other scripts (another app, or this one before an edit) is replayed with these, as
        // asked — said, so that a match is not read as the same app's.
        let scripts = await store.journalPosition().scripts
        if scripts != recorded.header.scripts {
            Console.error("note: \(recording) was recorded with other scripts (the app '\(recorded.header.app)', scripts \(recorded.header.scripts)); "
                          + "it is replayed with \(appDirectory)'s as they are now (scripts \(scripts))")
        }
        // The state `init` made is compared with the recorded one where it lies, in the recording's text; only where
        // the two may differ are both read whole, to say where.
        do {
            var matches = startsLater
            if !matches, let text = String(validating: recorded.header.stateText, as: UTF8.self) {
                matches = try await store.stateMatches(json: text)
            }
            if !matches {
                let decoded = try recorded.decodedHeaderState()
                initial = decoded
                if let difference = JournalComparison.differences(decoded, try await store.state(), path: "state", limit: 1).first {
                    try report(replayed: 0, divergence: (0, nil, difference.path, difference.then, difference.now))
                }
            }
            if writeSpec != nil, initial == nil { initial = try recorded.decodedHeaderState() } // (the spec starts from it)
        } catch let exit as ExitCode {
            throw exit
        } catch {
            throw unusable(error)
        }
        // The recording is read a window of entries at a time (a long session is never held whole); with a spec
        // to write, each action is sent on its own (the spec needs the props after each).
        var writer = writeSpec.map { _ in
            SessionSpec(name: URL(fileURLWithPath: recording).lastPathComponent, scripts: recorded.header.scripts,
                        start: initial ?? .nil, timeBudget: .microseconds(Int64(timeBudget * 1000)), clock: recorded.header.recordedClock)
        }
        var props = writer == nil ? nil : try? await store.props() // (the spec writes the props where they changed)
        let found: Replayer.Report
        do {
            found = try await replayer.replay(writer == nil ? .windowed : .oneByOne, next: {
                let window = try recorded.next(upTo: Self.window, until: until)
                if window.isEmpty, let line = recorded.cutShort {
                    Console.error("\(recording):\(line): the last line is cut short (the recording stopped mid-write); replaying up to the line before")
                }
                return window.map(Replayer.Step.init)
            }, each: { step, _, now in
                guard writer != nil else { return }
                writer?.steps.append(SessionSpec.Step(step, props: now != props ? now : nil))
                props = now ?? props
            })
        } catch {
            throw unusable(error)
        }
        if let found = found.divergence, let first = found.divergence.differences.first {
            try report(replayed: found.position, divergence: (found.step.sequence, found.step.action, first.path, first.then, first.now))
        }
        if let writer, let writeSpec { try write(writer, to: writeSpec) }
        try report(replayed: found.replayed, divergence: nil)
        if let writer, !json { Console.out("wrote \(writeSpec ?? ""): \(writer.steps.count) tests (run them with `luastore test \(appDirectory)`)") }
    }

    /// Says why the recording cannot be replayed further (exit status 2).
    private func unusable(_ error: any Error) -> ExitCode {
        switch error {
        case let problem as RecordingLines.Problem: Console.error(problem.message(name: recording))
        case let unreadable as Replayer.UnreadableEntry: Console.error("\(recording): \(unreadable)")
        default: Console.error("\(recording): \(error)")
        }
        return ExitCode.unusable
    }

    /// Writes the spec of a replay that matched.
    func write(_ writer: SessionSpec, to path: String) throws {
        if let obstacle = OutputFailure.obstacle(to: path, makingFolders: true) {
            Console.error("cannot write the spec \(path): \(obstacle)")
            throw ExitCode.appFailure
        }
        do {
            try FileManager.default.createDirectory(at: URL(fileURLWithPath: path).deletingLastPathComponent(),
                                                    withIntermediateDirectories: true)
            try OutputFile.write(Array(try writer.text().utf8), to: path)
        } catch let failure as OutputFailure {
            Console.error("cannot write the spec: \(failure)")
            throw ExitCode.appFailure
        } catch {
            Console.error("cannot write the spec \(path): \(OutputFailure.words(for: error))")
            throw ExitCode.appFailure
        }
    }

    /// Prints the report; exits 1 on a divergence.
    func report(replayed: Int, divergence: (sequence: UInt64, action: LuaValue?, path: String, recorded: LuaValue, now: LuaValue)?) throws {
        if json {
            var object = LuaTable()
            object["replayed"] = .integer(Int64(replayed))
            object["matches"] = .boolean(divergence == nil)
            if let divergence {
                object["divergence"] = .table(LuaTable(fields: [
                    "sequence": .integer(Int64(divergence.sequence)), "action": divergence.action ?? .nil, "path": .string(divergence.path),
                    "recorded": .string(Self.show(divergence.recorded)), "now": .string(Self.show(divergence.now)),
                ]))
            }
            Console.out(try JSONText.encode(.table(object), root: "report"))
        } else if let divergence {
            let action = divergence.action.map { Self.excerpt((try? JSONText.encode($0, root: "action")) ?? "\($0)") }
            Console.error(action.map { "diverges at action \(divergence.sequence): \($0)" } ?? "diverges before the first action (init)")
            Console.error("  \(divergence.path): recorded \(Self.show(divergence.recorded)), now \(Self.show(divergence.now))")
        } else {
            Console.out("replayed \(replayed) actions: every change matches the recording")
        }
        if divergence != nil { throw ExitCode.appFailure }
    }

    static func show(_ value: LuaValue) -> String {
        excerpt(value == .nil ? "nil" : (try? JSONText.encode(value, root: "value")) ?? "\(value)")
    }

    /// At most `limit` bytes of `text` (cut at a character), saying how long it was: a report quotes a few
    /// hundred bytes of a value, not the whole of a 50 MB action.
    static func excerpt(_ text: String, limit: Int = 300) -> String {
        guard text.utf8.count > limit else { return text }
        var end = text.utf8.index(text.utf8.startIndex, offsetBy: limit)
        while end > text.startIndex, text.utf8[end] & 0xC0 == 0x80 { end = text.utf8.index(before: end) } // (not mid-character)
        return String(decoding: text.utf8[..<end], as: UTF8.self) + "… (\(text.utf8.count) bytes in all)"
    }
}
