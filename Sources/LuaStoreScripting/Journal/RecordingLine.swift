import Foundation
import LuaKit
import LuaStoreCore

/// The lines of a recording.
public enum RecordingLine {
    /// The header's `format`.
    public static let format = "luastore-recording"
    /// The format version this build writes (4: the header has the store's clock and each entry its time; 3: every
    /// line ends with its `sum`, the header has its `seq`).
    public static let version: Int64 = 6
    /// The format versions this build reads (2: no sums, no `seq` in the header; before 4, no times; before 6, no
    /// `random`).
    public static let readableVersions: ClosedRange<Int64> = 2...6

    /// The header line.
    public static func header(app: String, start: JournalStart) throws -> String {
        var line: [UInt8] = []
        line.append(contentsOf: #"{"format":"\#(format)","version":\#(version),"app":"#.utf8)
        RecordingJSON.quote(app, into: &line)
        line.append(contentsOf: #","schemaVersion":\#(start.schemaVersion),"scripts":"\#(start.scripts)","seq":\#(start.sequence)"#.utf8)
        line.append(contentsOf: #","time":\#(start.time),"started":\#(start.clock.started)"#.utf8)
        if start.clock.utcOffsetSeconds != 0 { line.append(contentsOf: #","utcOffset":\#(start.clock.utcOffsetSeconds)"#.utf8) }
        if !start.clock.environment.isEmpty {
            line.append(contentsOf: #","environment":{"#.utf8)
            for (index, name) in start.clock.environment.keys.sorted().enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                RecordingJSON.quote(name, into: &line)
                line.append(UInt8(ascii: ":"))
                RecordingJSON.quote(start.clock.environment[name] ?? "", into: &line)
            }
            line.append(UInt8(ascii: "}"))
        }
        if !start.clientActions.isEmpty {
            line.append(contentsOf: #","clients":["#.utf8)
            for (index, action) in start.clientActions.enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                line.append(UInt8(ascii: "["))
                RecordingJSON.quote(action.id, into: &line)
                line.append(UInt8(ascii: ","))
                RecordingJSON.appendInteger(Int64(clamping: action.sequence), into: &line)
                if let failure = action.failure {
                    line.append(UInt8(ascii: ","))
                    RecordingJSON.quote(failure, into: &line)
                }
                line.append(UInt8(ascii: "]"))
            }
            line.append(UInt8(ascii: "]"))
        }
        if let random = start.random { appendRandom(random, to: &line) }
        line.append(contentsOf: #","state":"#.utf8)
        try RecordingJSON.encode(start.state, into: &line)
        appendSum(to: &line, from: 0)
        return String(decoding: line, as: UTF8.self)
    }

    // MARK: Sums

    /// What every line of format 3 or later ends with: `,"sum":"` 16 hex digits `"}`.
    static let sumSuffixLength = 26

    /// Ends the line begun at `start` in `line` (its last field written, its closing brace not): appends its sum —
    /// FNV-1a (64 bits) of the line's bytes so far, which any change of one byte changes — and the brace.
    static func appendSum(to line: inout [UInt8], from start: Int) {
        let sum = sum(of: line[start...])
        let digits = line.count + 8
        line.append(contentsOf: SumsToWrite.suffix)
        line.withUnsafeMutableBufferPointer { writeDigits(of: sum, at: $0.baseAddress! + digits) }
    }

    /// Writes the 16 hexadecimal digits of `sum` at `digits`.
    private static func writeDigits(of sum: UInt64, at digits: UnsafeMutablePointer<UInt8>) {
        for place in 0..<16 {
            let digit = UInt8(truncatingIfNeeded: sum >> UInt64(60 - 4 * place)) & 15
            digits[place] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
        }
    }

    /// The sums of lines made one after another, written once they are all made: FNV-1a takes four cycles a
    /// byte, each waiting on the last, so four lines are summed side by side (a run's entries are written so).
    struct SumsToWrite {
        /// Each line's first byte and where its sum's digits go (the bytes summed end 8 before them).
        private var lines: [(start: Int, digits: Int)] = []

        /// A line's last field, its digits to come, and its closing brace.
        static let suffix = Array(#","sum":"0000000000000000"}"#.utf8)

        /// Ends the line begun at `start` with its sum's field, its digits left to `write`, and the brace.
        mutating func appendSuffix(to line: inout [UInt8], from start: Int) {
            let suffix = line.count
            line.append(contentsOf: Self.suffix)
            lines.append((start, suffix + 8))
        }

        /// Writes the sum of each line `appendSuffix` ended.
        func write(into line: inout [UInt8]) {
            guard !lines.isEmpty else { return }
            let summed = lines.map { $0.start..<($0.digits - 8) }
            line.withUnsafeMutableBufferPointer { buffer in
                let bytes = buffer.baseAddress!
                for (index, sum) in RecordingLine.sums(of: summed, in: UnsafePointer(bytes)).enumerated() {
                    RecordingLine.writeDigits(of: sum, at: bytes + lines[index].digits)
                }
            }
        }
    }

    /// FNV-1a of each range of `bytes`: four ranges side by side while each has bytes left (FNV-1a takes four
    /// cycles a byte, each waiting on the last; four sums at once take about the time of one), then each alone.
    static func sums(of ranges: [Range<Int>], in bytes: UnsafePointer<UInt8>) -> [UInt64] {
        var sums = [UInt64](repeating: basis, count: ranges.count)
        var index = 0
        while index + 4 <= ranges.count {
            let (a, b, c, d) = (ranges[index], ranges[index + 1], ranges[index + 2], ranges[index + 3])
            let together = Swift.min(a.count, b.count, c.count, d.count)
            var four = (basis, basis, basis, basis)
            for offset in 0..<together {
                four.0 = (four.0 ^ UInt64(bytes[a.lowerBound + offset])) &* prime
                four.1 = (four.1 ^ UInt64(bytes[b.lowerBound + offset])) &* prime
                four.2 = (four.2 ^ UInt64(bytes[c.lowerBound + offset])) &* prime
                four.3 = (four.3 ^ UInt64(bytes[d.lowerBound + offset])) &* prime
            }
            (sums[index], sums[index + 1], sums[index + 2], sums[index + 3]) = four
            for lane in 0..<4 {
                let range = ranges[index + lane]
                for position in (range.lowerBound + together)..<range.upperBound {
                    sums[index + lane] = (sums[index + lane] ^ UInt64(bytes[position])) &* prime
                }
            }
            index += 4
        }
        for lane in index..<ranges.count {
            for position in ranges[lane] { sums[lane] = (sums[lane] ^ UInt64(bytes[position])) &* prime }
        }
        return sums
    }

    /// FNV-1a's offset basis and prime (64 bits).
    private static let basis: UInt64 = 0xcbf2_9ce4_8422_2325
    private static let prime: UInt64 = 0x0000_0100_0000_01b3

    static func sum(of bytes: ArraySlice<UInt8>) -> UInt64 {
        bytes.withUnsafeBufferPointer { buffer in
            guard let start = buffer.baseAddress else { return basis }
            var hash = basis
            for offset in 0..<buffer.count { hash = (hash ^ UInt64(start[offset])) &* prime }
            return hash
        }
    }

    /// `line` (one line of a recording, format 3 or later, without its line break) with its sum made anew for what it holds
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

    /// Whether a line of format 3 or later ends with the sum of what comes before its `sum` field (and says why not).
    static func checkSum(_ line: ArraySlice<UInt8>) throws(RecordingJSON.Malformed) {
        guard try writtenSum(line) == sum(of: line[..<(line.endIndex - sumSuffixLength)]) else {
            throw RecordingJSON.Malformed(description: "the line's \"sum\" does not match its contents (the line was changed or damaged)")
        }
    }

    /// The sum a line of format 3 or later ends with (and why it does not end with one).
    private static func writtenSum(_ line: ArraySlice<UInt8>) throws(RecordingJSON.Malformed) -> UInt64 {
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
        return written
    }

    /// Which of the lines at `ranges` of `bytes` end with the sum of what comes before their `sum` field: their
    /// sums made four at a time (a replay's window of lines). A line that does not is checked alone
    /// (`checkSum`, `RecordingReader.entry`), which says why.
    public static func sumsMatch(_ ranges: [Range<Int>], in bytes: [UInt8]) -> [Bool] {
        var matching = [Bool](repeating: false, count: ranges.count)
        var written: [(line: Int, sum: UInt64)] = [] // (the lines that end with a sum at all)
        written.reserveCapacity(ranges.count)
        for (line, range) in ranges.enumerated() {
            if let sum = try? writtenSum(bytes[range]) { written.append((line, sum)) }
        }
        guard !written.isEmpty else { return matching }
        let made = bytes.withUnsafeBufferPointer { buffer in
            sums(of: written.map { ranges[$0.line].lowerBound..<(ranges[$0.line].upperBound - sumSuffixLength) }, in: buffer.baseAddress!)
        }
        for (index, line) in written.enumerated() { matching[line.line] = line.sum == made[index] }
        return matching
    }

    /// The sequence number an entry line begins with (`{"seq":N,…`), or nil for another line: read from its
    /// first bytes, without parsing the line (a durable store's writer and replay's read-ahead look at every line).
    public static func entrySequence(_ line: ArraySlice<UInt8>) -> UInt64? {
        let prefix = #"{"seq":"#.utf8
        guard line.starts(with: prefix) else { return nil }
        return leadingNumber(line.dropFirst(prefix.count))
    }

    /// The sequence number a header line (a snapshot) holds — its first `"seq"` field, which comes before the
    /// state — or nil for another line: found without parsing the line (a durable store's writer sorts every line).
    public static func headerSequence(_ line: ArraySlice<UInt8>) -> UInt64? {
        guard line.starts(with: #"{"format":"#.utf8) else { return nil }
        let field = #","seq":"#.utf8
        var index = line.startIndex
        while index + field.count <= line.endIndex {
            if line[index..<index + field.count].elementsEqual(field) { return leadingNumber(line[(index + field.count)...]) }
            index += 1
        }
        return nil
    }

    /// The decimal number `bytes` begin with (at most 19 digits, which an `UInt64` holds), or nil.
    public static func leadingNumber(_ bytes: ArraySlice<UInt8>) -> UInt64? {
        var value: UInt64 = 0
        var digits = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 19 else { break }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// The line of one journal entry, following an entry (or header) of time `previousTime`.
    public static func entry(_ entry: JournalEntry, after previousTime: Int64) throws -> String {
        var line: [UInt8] = []
        try append(entry, after: previousTime, to: &line)
        return String(decoding: line, as: UTF8.self)
    }

    /// Appends the line of one journal entry (without its newline), as UTF-8: its time is written as what it adds
    /// to `previousTime`, the time of the line before (the header's `time` for the first), when it adds anything.
    public static func append(_ entry: JournalEntry, after previousTime: Int64, to line: inout [UInt8]) throws {
        let start = line.count
        line.append(contentsOf: #"{"seq":"#.utf8)
        RecordingJSON.appendInteger(Int64(clamping: entry.sequence), into: &line)
        appendTime(entry.time, after: previousTime, to: &line)
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
        if let random = entry.random { appendRandom(random, to: &line) }
        line.append(contentsOf: #","scripts":""#.utf8)
        line.append(contentsOf: entry.scripts.utf8)
        line.append(UInt8(ascii: "\""))
        appendSum(to: &line, from: start)
    }

    /// Appends the `random` field: the state of `math.random`'s generator, 64 hexadecimal digits.
    private static func appendRandom(_ random: LuaRandomState, to line: inout [UInt8]) {
        line.append(contentsOf: #","random":""#.utf8)
        line.append(contentsOf: random.description.utf8)
        line.append(UInt8(ascii: "\""))
    }

    private static let entryStart = Array(#"{"seq":"#.utf8)
    private static let changesKey = Array(#","changes":"#.utf8)

    /// Appends an entry's `dt`: the milliseconds from `previous` to `time`, when there are any.
    private static func appendTime(_ time: Int64, after previous: Int64, to line: inout [UInt8]) {
        let (delta, overflow) = time.subtractingReportingOverflow(previous)
        guard delta != 0 || overflow else { return }
        line.append(contentsOf: #","dt":"#.utf8)
        RecordingJSON.appendInteger(overflow ? 0 : delta, into: &line)
    }

    /// Appends the lines of a run's entries (each with its newline) as `append(_:after:to:)` writes them, straight
    /// from the run: no `JournalEntry` is made. (All of them ran at the run's time.)
    static func append(_ run: JournalRun, after previousTime: Int64, to output: inout [UInt8]) throws {
        // What every line of the run has alike, made once: between the sequence number and the action, and after
        // the changes.
        var middle = Array(#","origin":"#.utf8)
        append(run.origin, to: &middle)
        middle.append(contentsOf: #","action":"#.utf8)
        let end = Array(#","scripts":""#.utf8) + Array(run.scripts.utf8) + [UInt8(ascii: "\"")]
        var sums = SumsToWrite()
        defer { sums.write(into: &output) }
        var previous = previousTime
        try run.forEachAction { sequence, position, action, written, random in
            let start = output.count
            output.append(contentsOf: entryStart)
            RecordingJSON.appendInteger(Int64(clamping: sequence), into: &output)
            appendTime(run.time, after: previous, to: &output)
            previous = run.time
            output.append(contentsOf: middle)
            try RecordingJSON.encode(action, into: &output)
            output.append(contentsOf: changesKey)
            if let changes = written?.changes {
                output.append(contentsOf: changes)
            } else {
                try append(run.changes(at: position), to: &output)
            }
            if let random { appendRandom(random, to: &output) }
            output.append(contentsOf: end)
            sums.appendSuffix(to: &output, from: start)
            output.append(10)
        }
    }

    /// Appends an entry's origin.
    private static func append(_ origin: JournalEntry.Origin, to line: inout [UInt8]) {
        switch origin {
        case .outside: line.append(contentsOf: #""outside""#.utf8)
        case .client(let id):
            line.append(contentsOf: #"{"client":"#.utf8)
            RecordingJSON.quote(id, into: &line)
            line.append(UInt8(ascii: "}"))
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
        /// Its sequence number (the entry's `seq`).
        public var sequence: UInt64
        /// The action (the entry's `action`).
        public var action: LuaValue
        /// What it changed (nil when it failed — and, for an action read from a line, until `readChanges()`
        /// reads them).
        public var changes: [StateChange]?
        /// The failure's message (nil when it was applied).
        public var failure: String?
        /// When it ran, in milliseconds since 1970-01-01 UTC (nil in recordings older than format 4).
        public var time: Int64?
        /// The id its sender gave it (origin `{"client": id}`, format 5 on).
        public var clientId: String?
        /// Where the failure happened (`file:line`), when the line says.
        public var failureLocation: String?
        /// The failure as a person reads it: `app.lua:5: boom`.
        public var failureText: String? { failure.map { message in failureLocation.map { "\($0): \(message)" } ?? message } }
        /// The `changes` as the line wrote them (JSON), when read from a line (`RecordingReader`): compared
        /// without reading by `JournalEntry.changesAreEncoded(as:)`, read by `readChanges()`.
        public var changesJSON: ArraySlice<UInt8>?

        /// What it changed: `changes`, or what `changesJSON` says (nil when it failed).
        public func readChanges() throws(RecordingJSON.Malformed) -> [StateChange]? {
            if let changes { return changes }
            guard failure == nil, let changesJSON else { return nil }
            return try RecordingLine.changes(from: RecordingJSON.Value(parsing: changesJSON))
        }
    }

    /// The changes a line's `changes` list holds (`[[path…], value]`, or `[[path…]]` for a removal).
    public static func changes(from list: RecordingJSON.Value) throws(RecordingJSON.Malformed) -> [StateChange] {
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
