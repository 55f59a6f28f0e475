import Foundation
import LuaKit
import LuaStoreCore

/// Recordings, format 2 (README, "Recordings"): JSON Lines — a header (format, version, app, schema version,
/// the scripts' digest, the initial state), then one line per journal entry (an action with its changes or its
/// failure, a reload). Values are written losslessly in plain JSON: integers without a fraction or exponent,
/// floats always with one; a list `1..n` as an array, a table whose keys are all strings as an object, any other
/// table as `{"$map": [[key, value], …]}`; an empty table as `{}`.
public enum RecordingJSON {
    /// A value the format cannot hold (a number that is not finite, in an action from Swift).
    public struct Unrepresentable: Error, CustomStringConvertible {
        public let description: String
    }

    /// Appends `value`, losslessly.
    public static func encode(_ value: LuaValue, into output: inout String) throws {
        switch value {
        case .nil: output += "null"
        case .boolean(let flag): output += flag ? "true" : "false"
        case .integer(let integer): output += String(integer)
        case .number(let number):
            guard number.isFinite else { throw Unrepresentable(description: "\(number) cannot be recorded (not a finite number)") }
            output += "\(number)" // Swift writes the shortest exact form, always with "." or "e"
        case .string(let text): RecordingJSON.quote(text, into: &output)
        case .table(let table):
            if table.fields.isEmpty, !table.array.isEmpty {
                output += "["
                for (index, element) in table.array.enumerated() {
                    if index > 0 { output += "," }
                    try encode(element, into: &output)
                }
                output += "]"
            } else if table.array.isEmpty, table.fields.keys.allSatisfy({ if case .string = $0 { true } else { false } }),
                      !(table.fields.count == 1 && table.fields[.string("$map")] != nil) {
                output += "{"
                for (index, entry) in table.sortedFields.enumerated() {
                    if index > 0 { output += "," }
                    RecordingJSON.quote(entry.key.text, into: &output)
                    output += ":"
                    try encode(entry.value, into: &output)
                }
                output += "}"
            } else {
                output += "{\"$map\":["
                var first = true
                for (index, element) in table.array.enumerated() {
                    if !first { output += "," }
                    first = false
                    output += "[\(index + 1),"
                    try encode(element, into: &output)
                    output += "]"
                }
                for entry in table.sortedFields {
                    if !first { output += "," }
                    first = false
                    output += "["
                    try encode(entry.key.value, into: &output)
                    output += ","
                    try encode(entry.value, into: &output)
                    output += "]"
                }
                output += "]}"
            }
        }
    }

    /// `value`, losslessly.
    public static func encode(_ value: LuaValue) throws -> String {
        var output = ""
        try encode(value, into: &output)
        return output
    }

    /// Appends `text` as a JSON string.
    public static func quote(_ text: String, into output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20: output += String(format: "\\u%04x", scalar.value)
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }

    /// A line or value that is not what the format says.
    public struct Malformed: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// The value `json` encodes.
    public static func decode(_ json: RecordedJSON) throws(Malformed) -> LuaValue {
        switch json {
        case .null: return .nil
        case .boolean(let flag): return .boolean(flag)
        case .integer(let integer): return .integer(integer)
        case .float(let number): return .number(number)
        case .string(let text): return .string(text)
        case .array(let items):
            var array: [LuaValue] = []
            for item in items { array.append(try decode(item)) }
            return .table(LuaTable(array: array))
        case .object(let fields):
            if fields.count == 1, case .array(let pairs)? = fields["$map"] {
                var table = LuaTable()
                for pair in pairs {
                    guard case .array(let parts) = pair, parts.count == 2, let key = LuaKey(exactly: try decode(parts[0])) else {
                        throw Malformed(description: "a $map entry must be [key, value] with a string, number or boolean key")
                    }
                    table[key] = try decode(parts[1])
                }
                return .table(table)
            }
            var table = LuaTable()
            for (key, item) in fields { table[.string(key)] = try decode(item) }
            return .table(table)
        }
    }

    /// The value a JSON text encodes.
    public static func decode(text: Substring) throws(Malformed) -> LuaValue {
        try decode(try RecordedJSON(parsing: text))
    }
}

/// The lines of a recording.
public enum RecordingLine {
    /// The header's `format`.
    public static let format = "luastore-recording"
    /// The format version this build writes and reads.
    public static let version: Int64 = 2

    /// The header line.
    public static func header(app: String, start: (state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64)) throws -> String {
        var line = "{\"format\":\"\(format)\",\"version\":\(version),\"app\":"
        RecordingJSON.quote(app, into: &line)
        line += ",\"schemaVersion\":\(start.schemaVersion),\"scripts\":\"\(start.scripts)\",\"state\":"
        try RecordingJSON.encode(start.state, into: &line)
        return line + "}"
    }

    /// The line of one journal entry.
    public static func entry(_ entry: JournalEntry) throws -> String {
        var line = "{\"seq\":\(entry.sequence),\"origin\":"
        switch entry.origin {
        case .outside: line += "\"outside\""
        case .child: line += "\"child\""
        case .reload: line += "\"reload\""
        case .effect(let kind, let subscription):
            line += "{\"effect\":"
            RecordingJSON.quote(kind, into: &line)
            if let subscription {
                line += ",\"subscription\":"
                RecordingJSON.quote(subscription, into: &line)
            }
            line += "}"
        }
        switch entry.event {
        case .action(let action):
            line += ",\"action\":"
            try RecordingJSON.encode(action, into: &line)
        case .reload(let from, let to):
            line += ",\"reload\":{\"from\":\(from),\"to\":\(to)}"
        case .failedReload:
            line += ",\"reload\":\"failed\""
        }
        if let failure = entry.failure {
            line += ",\"failure\":{\"stage\":\"\(failure.stage.rawValue)\",\"message\":"
            RecordingJSON.quote(failure.error.message, into: &line)
            if let location = failure.error.location {
                line += ",\"location\":"
                RecordingJSON.quote(location, into: &line)
            }
            line += "}"
        } else {
            line += ",\"changes\":["
            for (index, change) in entry.changes.enumerated() {
                if index > 0 { line += "," }
                line += "["
                try RecordingJSON.encode(.table(LuaTable(array: change.path.map(\.value))), into: &line)
                if let value = change.value {
                    line += ","
                    try RecordingJSON.encode(value, into: &line)
                }
                line += "]"
            }
            line += "]"
        }
        line += ",\"scripts\":\"\(entry.scripts)\"}"
        return line
    }
}

/// An output file opened and written as Unix tools do: through symbolic links, to devices, FIFOs and
/// `/dev/stdout`; created if missing (mode 0666 less the umask), truncated otherwise, never replaced by a
/// rename. Writes are buffered and made off the caller's thread; the file holds whole lines only, so after a
/// crash it is valid up to its last complete line. The first failing write is kept, and `close` returns it in
/// words ("no space left on device").
public final class OutputFile: @unchecked Sendable {
    /// The path it was opened at.
    public let path: String
    private let descriptor: Int32
    private let queue = DispatchQueue(label: "luastore.output")
    // Only on `queue`:
    private var buffer: [UInt8] = []
    private var failure: String?
    private var pending = 0
    private let pendingLock = NSLock()

    /// Opens (creates, truncates) `path` for writing.
    public init(path: String) throws(OutputFailure) {
        self.path = path
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw OutputFailure(path: path, reason: OutputFailure.words(errno)) }
        descriptor = fd
        buffer.reserveCapacity(1 << 16)
    }

    /// Queues one line, made on the writer's thread by `make` (which may throw: then the file records why).
    public func append(_ make: @escaping @Sendable () throws -> String) {
        pendingLock.withLock { pending += 1 }
        queue.async { [self] in
            if failure == nil {
                do {
                    buffer.append(contentsOf: try make().utf8)
                    buffer.append(10)
                } catch {
                    failure = "\(error)"
                }
            }
            let idle = pendingLock.withLock { () -> Bool in
                pending -= 1
                return pending == 0
            }
            if idle || buffer.count >= 1 << 16 { flush() }
        }
    }

    private func flush() {
        var offset = 0
        while offset < buffer.count, failure == nil {
            let written = buffer.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                failure = OutputFailure.words(errno)
            } else {
                offset += written
            }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Returns once every line appended before the call is written (or the file failed).
    public func flushed() async -> OutputFailure? {
        await withCheckedContinuation { continuation in
            queue.async { [self] in
                flush()
                continuation.resume(returning: failure.map { OutputFailure(path: path, reason: $0) })
            }
        }
    }

    /// Writes what is buffered, closes the file, and says what went wrong, if anything.
    public func close() -> OutputFailure? {
        queue.sync {
            flush()
            if Foundation.close(descriptor) != 0, failure == nil { failure = OutputFailure.words(errno) }
            return failure.map { OutputFailure(path: path, reason: $0) }
        }
    }
}

/// Why an output file could not be written, in words.
public struct OutputFailure: Error, CustomStringConvertible {
    /// The file.
    public let path: String
    /// What went wrong, in words.
    public let reason: String
    public var description: String { "\(path): \(reason)" }

    /// The system's message for `code`, as a sentence fragment: "no space left on device".
    public static func words(_ code: Int32) -> String {
        let text = String(cString: strerror(code))
        return text.prefix(1).lowercased() + text.dropFirst()
    }
}

/// Records a session (`run --record`) in format 2 (`RecordingLine`): the header first — the state the journal
/// starts from — then each journal entry, encoded and written off the store's thread (`OutputFile`).
public final class SessionRecorder: Sendable {
    /// Where it writes.
    public let file: OutputFile
    /// Entries heard before the header was written (an effect launched at start may act at once); `nil` once
    /// the header is out.
    private let early = Protected<[JournalEntry]?>([])

    /// A recorder writing to `file`; pass `append` as `ScriptedStoreOptions.journal`, then call `start` once the
    /// store is made.
    public init(file: OutputFile) { self.file = file }

    /// Writes the header; entries the header's state already includes are dropped, later ones follow it.
    public func start(app: String, _ start: (state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64)) {
        early.withLock { early in
            file.append { try RecordingLine.header(app: app, start: start) }
            for entry in early ?? [] where entry.sequence > start.sequence { file.append { try RecordingLine.entry(entry) } }
            early = nil
        }
    }

    /// Records one entry (on the store's thread: encoding and writing happen on the file's).
    public func append(_ entry: JournalEntry) {
        early.withLock { early in
            if early != nil {
                early?.append(entry)
            } else {
                file.append { try RecordingLine.entry(entry) }
            }
        }
    }
}
