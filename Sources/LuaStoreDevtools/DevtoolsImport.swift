import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// Importing a recording (the `--record` or export format) to browse it: its actions are applied, in order, by a
/// store of their own loaded from the app's folder (effects off), starting from the header's state and keeping
/// a history of every entry, so the page shows it as it shows the running app — timeline, diffs, the state and
/// props at any point, queries, time travel. What each action changed is compared with what the recording says:
/// where the scripts now compute something else, the first such entry is named (from there on, the states shown
/// are the current scripts'). Entries are numbered from 1; reloads in the recording are skipped and a last line cut
/// short is left out, as `replay` does (the recording is read by `RecordingLines`, compared by `Replayer.replay`).
enum DevtoolsImport {
    struct Summary: Sendable {
        var name: String
        var entries: Int
        /// The recorded sequence number of the first action.
        var recordedFirst: UInt64
        var skippedReloads: Int
        /// The number of a last line cut short (a crash while it was written), left out.
        var cutShort: Int?
        var divergence: (sequence: UInt64, path: String)?
    }

    static func load(_ bytes: [UInt8], name: String, folder: URL) async throws -> DevtoolsAPI.Source {
        var recording: RecordingLines
        let recorded: [RecordingLine.RecordedAction]
        do {
            recording = try RecordingLines(LineReader(bytes: bytes))
            recorded = try recording.rest()
        } catch {
            throw DevtoolsAPI.Refusal(400, error.message(name: name))
        }

        let journal = DevtoolsJournal(capacity: max(1, recorded.count))
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.historyEntries = max(1, recorded.count)
        options.historyBytes = .max
        options.journal = { journal.hear($0) }
        options.subscriptionsChanged = { journal.hear($0) }
        let replayer: Replayer
        do {
            replayer = try await Replayer(app: folder, from: recording.header.state, clock: recording.header.recordedClock,
                                             time: recording.header.recordedTime, random: recording.header.random, options: options)
        } catch {
            throw DevtoolsAPI.Refusal(409, "the app's scripts do not load: \(error.error) (\(error.stage.rawValue))")
        }
        var steps = recorded.map(Replayer.Step.init)
        let report: Replayer.Report
        do {
            report = try await replayer.replay(.windowed, continuing: true, next: {
                defer { steps = [] }
                return steps
            })
        } catch {
            throw DevtoolsAPI.Refusal(400, "\(name): \(error)")
        }
        var summary = Summary(name: name, entries: recorded.count, recordedFirst: recorded.first?.sequence ?? 0,
                              skippedReloads: recording.reloads, cutShort: recording.cutShort)
        if let found = report.divergence, let first = found.divergence.differences.first {
            summary.divergence = (found.now?.sequence ?? UInt64(found.position), first.path)
        }
        return DevtoolsAPI.Source(store: replayer.store, journal: journal, imported: summary)
    }
}
