import Foundation
import LuaKit
import LuaStoreCore

/// The lines of a recording.
public enum RecordingLine {
    /// The header's `format`.
    public static let format = "luastore-recording"
    /// The format version this build writes (3: every line ends with its `sum`, the header has its `seq`).
    public static let version: Int64 = 3
    /// The format versions this build reads (2: no sums, no `seq` in the header).
    public static let readableVersions: ClosedRange<Int64> = 2...3

    /// The header line.
    public static func header(app: String, start: (state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64)) throws -> String {
        var line: [UInt8] = []
        line.append(contentsOf: #"{"format":"\#(format)","version":\#(version),"app":"#.utf8)
        RecordingJSON.quote(app, into: &line)
        line.append(contentsOf: #","schemaVersion":\#(start.schemaVersion),"scripts":"\#(start.scripts)","seq":\#(start.sequence),"state":"#.utf8)
        try RecordingJSON.encode(start.state, into: &line)
        appendSum(to: &line, from: 0)
        return String(decoding: line, as: UTF8.self)
    }

    // MARK: Sums

    /// What every line of format 3 ends with: `,"sum":"` 16 hex digits `"}`.
    static let sumSuffixLength = 26

    /// Ends the line begun at `start` in `line` (its last field written, its closing brace not): appends its sum —
    /// FNV-1a (64 bits) of the line's bytes so far, which any change of one byte changes — and the brace.
    static func appendSum(to line: inout [UInt8], from start: Int) {
        let hash = sum(of: line[start...])
        line.append(contentsOf: #","sum":""#.utf8)
        LuaJSON.appendHex(hash, digits: 16, into: &line)
        line.append(contentsOf: #""}"#.utf8)
    }

    static func sum(of bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBufferPointer { buffer in
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in buffer {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01b3
            }
            return hash
        }
    }

    /// `line` (one line of a recording, format 3, without its line break) with its sum made anew for what it holds
    /// now: for tools that edit recordings on purpose (a damaged line is what the sum is there to refuse).
    public static func withSum(_ line: String) -> String {
        var bytes = Array(line.utf8)
        if (try? checkSum(ArraySlice(bytes))) != nil || bytes.count > sumSuffixLength
            && bytes[(bytes.count - sumSuffixLength)...].starts(with: #","sum":""#.utf8) {
            bytes.removeLast(sumSuffixLength)
        } else if bytes.last == UInt8(ascii: "}") {
            bytes.removeLast()
        }
        appendSum(to: &bytes, from: 0)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether a line of format 3 ends with the sum of what comes before its `sum` field (and says why not).
    static func checkSum(_ line: ArraySlice<UInt8>) throws(RecordingJSON.Malformed) {
        let suffix = #","sum":""#.utf8
        let sumStart = line.endIndex - sumSuffixLength
        guard line.count > sumSuffixLength, line[sumStart..<(sumStart + suffix.count)].elementsEqual(suffix),
              line[line.endIndex - 2] == UInt8(ascii: "\""), line[line.endIndex - 1] == UInt8(ascii: "}") else {
            throw RecordingJSON.Malformed(description: "the line does not end with its \"sum\"")
        }
        var written: UInt64 = 0
        for byte in line[(sumStart + suffix.count)..<(line.endIndex - 2)] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: throw RecordingJSON.Malformed(description: "the line's \"sum\" is not 16 hexadecimal digits")
            }
            written = written << 4 | UInt64(digit)
        }
        guard written == sum(of: line[..<sumStart]) else {
            throw RecordingJSON.Malformed(description: "the line's \"sum\" does not match its contents (the line was changed or damaged)")
        }
    }

    /// The line of one journal entry.
    public static func entry(_ entry: JournalEntry) throws -> String {
        var line: [UInt8] = []
        try append(entry, to: &line)
        return String(decoding: line, as: UTF8.self)
    }

    /// Appends the line of one journal entry (without its newline), as UTF-8.
    public static func append(_ entry: JournalEntry, to line: inout [UInt8]) throws {
        let start = line.count
        line.append(contentsOf: #"{"seq":"#.utf8)
        RecordingJSON.appendInteger(Int64(clamping: entry.sequence), into: &line)
        line.append(contentsOf: #","origin":"#.utf8)
        append(entry.origin, to: &line)
        switch entry.event {
        case .action(let action):
            line.append(contentsOf: #","action":"#.utf8)
            try RecordingJSON.encode(action, into: &line)
        case .reload(let from, let to):
            line.append(contentsOf: #","reload":{"from":\#(from),"to":\#(to)}"#.utf8)
        case .failedReload:
            line.append(contentsOf: #","reload":"failed""#.utf8)
        }
        if let failure = entry.failure {
            line.append(contentsOf: #","failure":{"stage":"\#(failure.stage.rawValue)","message":"#.utf8)
            RecordingJSON.quote(failure.error.message, into: &line)
            if let location = failure.error.location {
                line.append(contentsOf: #","location":"#.utf8)
                RecordingJSON.quote(location, into: &line)
            }
            line.append(UInt8(ascii: "}"))
        } else if let encoded = entry.encodedChanges {
            line.append(contentsOf: #","changes":"#.utf8)
            line.append(contentsOf: encoded)
        } else {
            line.append(contentsOf: #","changes":"#.utf8)
            try append(entry.changes, to: &line)
        }
        line.append(contentsOf: #","scripts":""#.utf8)
        line.append(contentsOf: entry.scripts.utf8)
        line.append(UInt8(ascii: "\""))
        appendSum(to: &line, from: start)
    }

    /// Appends the lines of a run's entries (each with its newline) as `append(_:to:)` writes them, straight
    /// from the run: no `JournalEntry` is made.
    static func append(_ run: JournalRun, to output: inout [UInt8]) throws {
        var origin: [UInt8] = []
        append(run.origin, to: &origin)
        try run.forEachAction { sequence, position, action, written in
            let start = output.count
            output.append(contentsOf: #"{"seq":"#.utf8)
            RecordingJSON.appendInteger(Int64(clamping: sequence), into: &output)
            output.append(contentsOf: #","origin":"#.utf8)
            output.append(contentsOf: origin)
            output.append(contentsOf: #","action":"#.utf8)
            try RecordingJSON.encode(action, into: &output)
            output.append(contentsOf: #","changes":"#.utf8)
            if let changes = written?.changes {
                output.append(contentsOf: changes)
            } else {
                try append(run.changes(at: position), to: &output)
            }
            output.append(contentsOf: #","scripts":""#.utf8)
            output.append(contentsOf: run.scripts.utf8)
            output.append(UInt8(ascii: "\""))
            appendSum(to: &output, from: start)
            output.append(10)
        }
    }

    /// Appends an entry's origin.
    private static func append(_ origin: JournalEntry.Origin, to line: inout [UInt8]) {
        switch origin {
        case .outside: line.append(contentsOf: #""outside""#.utf8)
        case .child: line.append(contentsOf: #""child""#.utf8)
        case .reload: line.append(contentsOf: #""reload""#.utf8)
        case .effect(let kind, let subscription):
            line.append(contentsOf: #"{"effect":"#.utf8)
            RecordingJSON.quote(kind, into: &line)
            if let subscription {
                line.append(contentsOf: #","subscription":"#.utf8)
                RecordingJSON.quote(subscription, into: &line)
            }
            line.append(UInt8(ascii: "}"))
        }
    }

    /// Appends changes as a recording's `changes` array: the bytes the barrier writes for the same changes
    /// (`json.c`), which a test holds both to.
    static func append(_ changes: [StateChange], to line: inout [UInt8]) throws {
        line.append(UInt8(ascii: "["))
        for (index, change) in changes.enumerated() {
            if index > 0 { line.append(UInt8(ascii: ",")) }
            line.append(contentsOf: "[[".utf8)
            for (position, key) in change.path.enumerated() {
                if position > 0 { line.append(UInt8(ascii: ",")) }
                try RecordingJSON.encode(key.value, into: &line)
            }
            line.append(UInt8(ascii: "]"))
            if let value = change.value {
                line.append(UInt8(ascii: ","))
                try RecordingJSON.encode(value, into: &line)
            }
            line.append(UInt8(ascii: "]"))
        }
        line.append(UInt8(ascii: "]"))
    }

    /// An action as a recording holds it: its sequence number, the action, and what it changed or why it failed.
    public struct RecordedAction: Sendable {
        public var sequence: UInt64
        public var action: LuaValue
        /// What it changed (nil when it failed — and, for an action read with `recordedAction(line:)`, until
        /// `readChanges()` reads them).
        public var changes: [StateChange]?
        /// The failure's message (nil when it was applied).
        public var failure: String?
        /// The `changes` as the line wrote them (JSON), when read from a line with `recordedAction(line:)`.
        public var changesJSON: ArraySlice<UInt8>?

        /// What it changed: `changes`, or what `changesJSON` says (nil when it failed).
        public func readChanges() throws(RecordingJSON.Malformed) -> [StateChange]? {
            if let changes { return changes }
            guard failure == nil, let changesJSON else { return nil }
            return try RecordingLine.changes(from: RecordedJSON(parsing: changesJSON))
        }
    }

    /// The recorded action of an entry line; nil for a line that is not an action (a reload). Its changes are
    /// kept as the line wrote them (`changesJSON`), not read: `JournalEntry.changesAreEncoded(as:)` compares
    /// them without reading, `readChanges()` reads them.
    public static func recordedAction(line: ArraySlice<UInt8>) throws(RecordingJSON.Malformed) -> RecordedAction? {
        let (fields, changesJSON) = try RecordedJSON.parsing(line, spanOf: "changes", readsIt: false)
        guard var recorded = try recordedOutcome(fields) else { return nil }
        if recorded.failure == nil {
            guard let changesJSON else { throw RecordingJSON.Malformed(description: "no \"changes\"") }
            recorded.changesJSON = changesJSON
        }
        return recorded
    }

    /// The recorded action of an entry line (its parsed fields); nil for a line that is not an action (a reload).
    public static func recordedAction(_ fields: RecordedJSON) throws(RecordingJSON.Malformed) -> RecordedAction? {
        guard var recorded = try recordedOutcome(fields) else { return nil }
        if recorded.failure == nil {
            guard let list = fields["changes"] else { throw RecordingJSON.Malformed(description: "no \"changes\"") }
            recorded.changes = try changes(from: list)
        }
        return recorded
    }

    /// An entry line's sequence number, action and failure, from its fields (its changes are the caller's).
    static func recordedOutcome(_ fields: RecordedJSON) throws(RecordingJSON.Malformed) -> RecordedAction? {
        guard let actionJSON = fields["action"] else { return nil }
        guard case .integer(let sequence)? = fields["seq"], sequence > 0 else { throw RecordingJSON.Malformed(description: "no \"seq\"") }
        let action = try RecordingJSON.decode(actionJSON)
        guard case .object(let failure)? = fields["failure"] else {
            return RecordedAction(sequence: UInt64(sequence), action: action, changes: nil, failure: nil)
        }
        guard case .string(let message)? = failure["message"] else { throw RecordingJSON.Malformed(description: "a failure without a message") }
        return RecordedAction(sequence: UInt64(sequence), action: action, changes: nil, failure: message)
    }

    /// The changes a line's `changes` list holds (`[[path…], value]`, or `[[path…]]` for a removal).
    public static func changes(from list: RecordedJSON) throws(RecordingJSON.Malformed) -> [StateChange] {
        guard case .array(let items) = list else { throw RecordingJSON.Malformed(description: "\"changes\" must be a list") }
        var changes: [StateChange] = []
        changes.reserveCapacity(items.count)
        for item in items {
            guard case .array(let parts) = item, (1...2).contains(parts.count), case .array(let keys) = parts[0] else {
                throw RecordingJSON.Malformed(description: "a change must be [path] or [path, value]")
            }
            var path: [LuaKey] = []
            path.reserveCapacity(keys.count)
            for key in keys {
                guard let key = LuaKey(exactly: try RecordingJSON.decode(key)) else {
                    throw RecordingJSON.Malformed(description: "a path key must be a string, number or boolean")
                }
                path.append(key)
            }
            // (A removal's value is no value, not Lua's nil: `.some(.nil)` would be the literal `nil` here.)
            let value: LuaValue? = parts.count == 2 ? .some(try RecordingJSON.decode(parts[1])) : .none
            changes.append(StateChange(path: path, value: value))
        }
        return changes
    }
}
