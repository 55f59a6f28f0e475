import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// Importing a recording (the `--record` or export format) to browse it: its actions are applied, in order, by a
/// store of their own loaded from the app's folder (effects off), starting from the header's state and keeping
/// a history of every entry, so the page shows it as it shows the running app — timeline, diffs, the state and
/// props at any point, queries, time travel. What each action changed is compared with what the recording says:
/// where the scripts now compute something else, the first such entry is named (from there on, the states shown
/// are the current scripts'). Entries are numbered from 1; reloads in the recording are skipped, as `replay` does.
enum DevtoolsImport {
    struct Summary: Sendable {
        var name: String
        var entries: Int
        /// The recorded sequence number of the first action.
        var recordedFirst: UInt64
        var skippedReloads: Int
        var divergence: (sequence: UInt64, path: String)?
    }

    static func load(_ bytes: [UInt8], name: String, folder: URL) async throws -> DevtoolsAPI.Source {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        while let last = lines.last, last.isEmpty { lines.removeLast() }
        guard let first = lines.first else { throw DevtoolsAPI.Refusal(400, "\(name):1: not a recording (it is empty)") }
        var reader: RecordingReader
        do {
            reader = try RecordingReader(header: first)
        } catch {
            throw DevtoolsAPI.Refusal(400, "\(name):1: \(error)")
        }
        let initial = reader.header.state
        var recorded: [RecordingLine.RecordedAction] = []
        var skipped = 0
        for (index, line) in lines.enumerated().dropFirst() where !line.isEmpty {
            do {
                guard let entry = try reader.entry(line) else {
                    skipped += 1 // a reload
                    continue
                }
                recorded.append(entry)
            } catch {
                throw DevtoolsAPI.Refusal(400, "\(name):\(index + 1): not a recorded entry: \(error)")
            }
        }
        let recordedFirst = recorded.first?.sequence ?? 0

        let journal = DevtoolsJournal(capacity: max(1, recorded.count))
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.historyEntries = max(1, recorded.count)
        options.historyBytes = .max
        options.journal = { journal.hear($0) }
        options.subscriptionsChanged = { journal.hear($0) }
        let replayer: Replayer
        do {
            replayer = try await Replayer(app: folder, from: initial, options: options)
        } catch {
            throw DevtoolsAPI.Refusal(409, "the app's scripts do not load: \(error.error) (\(error.stage.rawValue))")
        }
        let now = await replayer.reduce(recorded.map(\.action))

        var summary = Summary(name: name, entries: recorded.count, recordedFirst: recordedFirst, skippedReloads: skipped)
        for (offset, (entry, replayed)) in zip(recorded, now).enumerated() {
            let divergence: Replayer.Divergence?
            do {
                divergence = try Replayer.divergence(entry.recorded, now: replayed, limit: 1)
            } catch {
                throw DevtoolsAPI.Refusal(400, "\(name): the entry of action \(entry.sequence) is not a recorded entry (\(error))")
            }
            if let first = divergence?.differences.first {
                summary.divergence = (replayed?.sequence ?? UInt64(offset + 1), first.path)
                break
            }
        }
        return DevtoolsAPI.Source(store: replayer.store, journal: journal, imported: summary)
    }
}
