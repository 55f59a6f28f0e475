import ArgumentParser
import Foundation
import LuaKit
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
        guard timeBudget > 0, timeBudget.isFinite else { throw ValidationError("--time-budget-ms must be a number of milliseconds > 0") }
    }

    typealias Recorded = RecordingLine.RecordedAction

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
        let lines: LineReader
        do {
            lines = try LineReader(path: recording, maximumLength: maxLineBytes)
        } catch {
            Console.error("cannot read \(recording): \(error.reason)")
            throw ExitCode.unusable
        }
        var reader = try Self.header(lines, name: recording)
        let initial = reader.header.state
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.modulePath = modules.templates
        // (Each action's journal entry is compared, whatever the observers see: they are told once per burst, as a
        // session's were — except when a spec is written, which needs the props after each action.)
        options.notification = writeSpec == nil ? .batched : .everyAction
        options.limits.timeBudget = .microseconds(Int64(timeBudget * 1000))
        let replayer: Replayer
        do {
            replayer = try await Replayer(app: URL(fileURLWithPath: appDirectory), from: nil, options: options) // (init runs: its state is compared with the recording's)
        } catch {
            Console.error("cannot load \(appDirectory): \(error.error) (\(error.stage.rawValue))")
            throw ExitCode.unusable
        }
        let store = replayer.store
        defer { store.shutdown() }
        let start = try await store.journalStart()
        if let difference = JournalComparison.differences(initial, start.state, path: "state", limit: 1).first {
            try report(replayed: 0, divergence: (0, nil, difference.path, difference.then, difference.now))
        }
        if let writeSpec {
            try await replayWritingSpec(replayer, lines: lines, reader: &reader, to: writeSpec)
            return
        }
        // The recording is read a window of entries at a time (a long session is never held whole); each
        // window's actions are dispatched without waiting for each (the store takes them in order, and each makes
        // one journal entry), then each entry is compared with what was recorded, in order. The store reduces a
        // window while the next is read and the one before compared, on this thread; a malformed line of the next
        // window is reported after this one was compared, as if read after it.
        var replayed = 0
        var window = try Self.entries(from: lines, reader: &reader, name: recording, upTo: Self.window, until: until)
        if !window.isEmpty { replayer.start(window.map(\.action)) }
        while !window.isEmpty {
            let next = Result { try Self.entries(from: lines, reader: &reader, name: recording, upTo: Self.window, until: until) }
            let now = await replayer.finish(window.count)
            if case .success(let next) = next, !next.isEmpty { replayer.start(next.map(\.action)) }
            for (entry, now) in zip(window, now) {
                replayed += 1
                try compare(entry, with: now, replayed: replayed)
            }
            window = try next.get()
        }
        try report(replayed: replayed, divergence: nil)
    }

    /// The replay for `--write-spec`: each action sent on its own (so that the props after it are known), compared
    /// as the replay compares; the spec is written once every action matched.
    func replayWritingSpec(_ replayer: Replayer, lines: LineReader, reader: inout RecordingReader, to path: String) async throws {
        let store = replayer.store
        let props = Protected<[LuaValue]>([])
        store.observeProps { value in
            props.withLock { $0.append(value) }
            return .active
        }
        await store.barrier()
        var seen = props.withLock { $0.count }
        var writer = SessionSpec(name: URL(fileURLWithPath: recording).lastPathComponent,
                                 scripts: reader.header.scripts, start: reader.header.state,
                                 timeBudget: .microseconds(Int64(timeBudget * 1000)))
        var replayed = 0
        while true {
            let window = try Self.entries(from: lines, reader: &reader, name: recording, upTo: Self.window, until: until)
            if window.isEmpty { break }
            for entry in window {
                let now = await replayer.send(entry.action)
                replayed += 1
                try compare(entry, with: now, replayed: replayed)
                let after = props.withLock { list in (list.count, list.last) }
                writer.steps.append(SessionSpec.Step(recorded: entry, props: after.0 > seen ? after.1 : nil))
                seen = after.0
            }
        }
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
        try report(replayed: replayed, divergence: nil)
        if !json { Console.out("wrote \(path): \(writer.steps.count) tests (run them with `luastore test \(appDirectory)`)") }
    }

    /// Compares what a recorded action did then with what it did now (its journal entry); reports and exits 1 at a
    /// divergence, 2 when the recorded entry cannot be read.
    func compare(_ entry: Recorded, with now: JournalEntry?, replayed: Int) throws {
        let divergence: Replayer.Divergence?
        do {
            divergence = try Replayer.divergence(entry.recorded, now: now, limit: 1)
        } catch {
            Console.error("\(recording): the entry of action \(entry.sequence) is not a recorded entry (\(error))")
            throw ExitCode.unusable
        }
        if let first = divergence?.differences.first {
            try report(replayed: replayed, divergence: (entry.sequence, entry.action, first.path, first.then, first.now))
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

    /// The recording's reader, from its header line.
    static func header(_ lines: LineReader, name: String) throws -> RecordingReader {
        guard let first = try read(lines, name: name) else {
            Console.error("\(name):1: not a recording (the file is empty)")
            throw ExitCode.unusable
        }
        do {
            return try RecordingReader(header: first.line)
        } catch {
            Console.error("\(name):1: \(error)")
            throw ExitCode.unusable
        }
    }

    /// The next recorded actions, at most `limit` of them and none past `until`; empty at the end. Reloads are
    /// skipped (the current scripts run throughout); a last line cut short (a crash while writing) ends the
    /// recording with a note; any other line that is not what the format says is refused, naming it. The lines are
    /// read a batch at a time and their sums checked four at a time (`RecordingLine.sumsMatch`), then each line is
    /// read in order, as if alone: a line whose sum does not match is refused as `checkSum` says.
    static func entries(from lines: LineReader, reader: inout RecordingReader, name: String, upTo limit: Int, until: UInt64?) throws -> [Recorded] {
        var entries: [Recorded] = []
        while entries.count < limit {
            let batch = Batch(lines, upTo: limit - entries.count, until: until)
            guard !batch.ranges.isEmpty || batch.failure != nil else { break }
            let matching = reader.header.version >= 3 ? RecordingLine.sumsMatch(batch.ranges, in: batch.bytes) : []
            for (index, range) in batch.ranges.enumerated() {
                let entry: Recorded?
                do {
                    entry = try reader.entry(batch.bytes[range], sumChecked: !matching.isEmpty && matching[index])
                } catch where !batch.complete[index] {
                    Console.error("\(name):\(batch.numbers[index]): the last line is cut short (the recording stopped mid-write); replaying up to the line before")
                    lines.finish()
                    return entries
                } catch {
                    Console.error("\(name):\(batch.numbers[index]): not a recorded entry: \(error)")
                    throw ExitCode.unusable
                }
                guard let entry else { continue } // a reload
                if let until, entry.sequence > until {
                    lines.finish()
                    return entries
                }
                entries.append(entry)
            }
            if let failure = batch.failure { // (after the lines read before it, as if read one by one)
                Console.error("cannot read \(name): \(failure.reason)")
                throw ExitCode.unusable
            }
        }
        return entries
    }

    /// Lines read ahead, copied into one buffer (a line read from a `LineReader` is good until the next is read):
    /// at most `limit` of them, the last one the first whose `seq` is past `until`, if any; and why the input could
    /// not be read further, if it could not (said once the lines before are read).
    struct Batch {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        var numbers: [Int] = []
        var complete: [Bool] = []
        var failure: LineReader.Unreadable?

        init(_ lines: LineReader, upTo limit: Int, until: UInt64?) {
            bytes.reserveCapacity(limit * 256)
            while ranges.count < limit {
                let next: (line: ArraySlice<UInt8>, complete: Bool)?
                do {
                    next = try lines.next()
                } catch {
                    failure = error
                    break
                }
                guard let (line, whole) = next else { break }
                if line.isEmpty { continue }
                ranges.append(bytes.count..<(bytes.count + line.count))
                bytes.append(contentsOf: line)
                numbers.append(lines.number)
                complete.append(whole)
                if let until, let sequence = RecordingLine.entrySequence(line), sequence > until { break }
            }
        }
    }

    /// The next line, or nil at the end; a failure to read is said in words (exit status 2).
    private static func read(_ lines: LineReader, name: String) throws -> (line: ArraySlice<UInt8>, complete: Bool)? {
        do {
            return try lines.next()
        } catch {
            Console.error("cannot read \(name): \(error.reason)")
            throw ExitCode.unusable
        }
    }
}
