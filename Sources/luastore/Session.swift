import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting

/// Records a session (`run --record`) in format 2 (`RecordingLine`): the header first — the state the journal
/// starts from — then each journal entry, encoded and written off the store's thread (`OutputFile`).
final class SessionRecorder: Sendable {
    let file: OutputFile
    /// Entries heard before the header was written (an effect launched at start may act at once); `nil` once
    /// the header is out.
    private let early = Protected<[JournalEntry]?>([])

    init(file: OutputFile) { self.file = file }

    /// Writes the header; entries the header's state already includes are dropped, later ones follow it.
    func start(app: String, _ start: (state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64)) {
        early.withLock { early in
            file.append { try RecordingLine.header(app: app, start: start) }
            for entry in early ?? [] where entry.sequence > start.sequence { file.append { try RecordingLine.entry(entry) } }
            early = nil
        }
    }

    func append(_ entry: JournalEntry) {
        early.withLock { early in
            if early != nil {
                early?.append(entry)
            } else {
                file.append { try RecordingLine.entry(entry) }
            }
        }
    }
}

struct ValidationFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
