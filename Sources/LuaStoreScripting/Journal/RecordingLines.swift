import LuaKit

/// The one reader of recordings: the lines of a recording (a file, standard input, an upload, a durable store's
/// rows), its header first, then its actions in order, a batch at a time — each line checked by `RecordingReader`,
/// their sums made four at a time. `luastore replay`, the devtools' import and a durable store's resume read
/// through it; they differ only in what they do with the actions.
public struct RecordingLines {
    /// Why a recording cannot be read further: the line it stopped at, and why.
    public struct Problem: Error, CustomStringConvertible {
        /// Where reading stopped, which decides how `message(name:)` words the problem.
        public enum Kind: Sendable {
            /// Not a line: no header to read.
            case empty
            /// The input could not be read (`line` is the last line read).
            case unreadable
            /// The first line is not a header this luastore reads.
            case header
            /// A line after the header is not an entry the format defines.
            case entry
        }

        /// Which kind of problem it is.
        public var kind: Kind
        /// The line's number (1: the header).
        public var line: Int
        /// The sequence number the line begins with, where it has one.
        public var sequence: UInt64?
        /// Why, in words.
        public var reason: String

        /// The problem as a tool says it of the recording `name`: `name:5: not a recorded entry: …`.
        public func message(name: String) -> String {
            switch kind {
            case .empty: "\(name):1: not a recording (it is empty)"
            case .unreadable: "cannot read \(name): \(reason)"
            case .header: "\(name):1: \(reason)"
            case .entry: "\(name):\(line): not a recorded entry: \(reason)"
            }
        }

        public var description: String { message(name: "the recording") }
    }

    /// A recorded action, as `next(upTo:until:)` and `rest()` hand it over.
    public typealias Recorded = RecordingLine.RecordedAction

    private let lines: LineReader
    private var reader: RecordingReader
    /// Entries at or below this sequence number are passed over (a durable store's rows may begin before the
    /// snapshot that holds them).
    private let kept: UInt64?
    /// A failure to read found after lines that were read before it: thrown by the next `next`.
    private var pending: Problem?
    /// The header.
    public var header: RecordingReader.Header { reader.header }
    /// The number of a last line cut short (a crash while it was written), which ended the recording; nil if none.
    public private(set) var cutShort: Int?
    /// The reloads passed over (actions are replayed by the scripts of now).
    public private(set) var reloads = 0
    /// The sequence number of the last entry read (an action or a reload; the header's for none).
    public private(set) var last: UInt64?
    /// The time of the last entry read (the header's `time` for none), in milliseconds since 1970-01-01 UTC.
    public var time: Int64 { reader.time }
    /// The state of `math.random`'s generator after the last entry read (`RecordingReader.random`).
    public var random: LuaRandomState? { reader.random }

    /// Reads the header from `lines`. `passingOverKept`: entries the header's state already holds (their sequence
    /// number is at most the header's) are passed over rather than refused.
    public init(_ lines: LineReader, passingOverKept: Bool = false) throws(Problem) {
        try self.init(lines, passingOverKept: passingOverKept, decodingState: true)
    }

    /// The header's state, decoded now (for lines read without decoding it); a problem of the header otherwise.
    package func decodedHeaderState() throws(Problem) -> LuaValue {
        do {
            return try reader.header.decodedState()
        } catch {
            throw Problem(kind: .header, line: 1, reason: error.description)
        }
    }

    /// Reads the header from `lines`; with `decodingState` false its state is left as text (`Header.stateText`,
    /// `decodedState()`), for a reader that compares it where it lies (`ScriptedStore.stateMatches`).
    package init(_ lines: LineReader, passingOverKept: Bool = false, decodingState: Bool) throws(Problem) {
        self.lines = lines
        let first: (line: ArraySlice<UInt8>, complete: Bool)?
        do {
            first = try lines.next()
        } catch {
            throw Problem(kind: .unreadable, line: 0, reason: error.reason)
        }
        guard let first else { throw Problem(kind: .empty, line: 1, reason: "it is empty") }
        do {
            reader = try RecordingReader(header: first.line, decodingState: decodingState)
        } catch {
            throw Problem(kind: .header, line: 1, reason: error.description)
        }
        kept = passingOverKept ? reader.header.sequence : nil
        last = reader.header.sequence
    }

    /// The next recorded actions, at most `limit` of them and none past `until`; empty at the end. Reloads are
    /// passed over; a last line cut short ends the recording (`cutShort` names it); any other line that is not
    /// what the format says is refused, naming it. Lines are read a batch at a time and their sums checked four at
    /// a time, then each is read in order, as if alone.
    public mutating func next(upTo limit: Int = 4_096, until: UInt64? = nil) throws(Problem) -> [Recorded] {
        if let pending {
            self.pending = nil
            throw pending
        }
        var entries: [Recorded] = []
        while entries.count < limit {
            let batch = Batch(lines, upTo: limit - entries.count, until: until)
            guard !batch.ranges.isEmpty || batch.failure != nil else { break }
            let matching = header.version >= 3 ? RecordingLine.sumsMatch(batch.ranges, in: batch.bytes) : []
            for (index, range) in batch.ranges.enumerated() {
                let line = batch.bytes[range]
                let sequence = RecordingLine.entrySequence(line)
                if let kept, let sequence, sequence <= kept { continue }
                let entry: Recorded?
                do {
                    entry = try reader.entry(line, sumChecked: !matching.isEmpty && matching[index])
                } catch where !batch.complete[index] {
                    cutShort = batch.numbers[index]
                    lines.finish()
                    return entries
                } catch {
                    throw Problem(kind: .entry, line: batch.numbers[index], sequence: sequence, reason: error.description)
                }
                last = sequence ?? last
                guard let entry else { // a reload
                    reloads += 1
                    continue
                }
                if let until, entry.sequence > until {
                    lines.finish()
                    return entries
                }
                entries.append(entry)
            }
            if let failure = batch.failure { // (after the lines read before it, as if read one by one)
                let problem = Problem(kind: .unreadable, line: lines.number, reason: failure.reason)
                guard entries.isEmpty else {
                    pending = problem
                    return entries
                }
                throw problem
            }
        }
        return entries
    }

    /// Every action left (a recording held whole: an upload, a resume).
    public mutating func rest() throws(Problem) -> [Recorded] {
        var all: [Recorded] = []
        while true {
            let more = try next()
            if more.isEmpty { return all }
            all += more
        }
    }

    /// Lines read ahead, copied into one buffer (a line read from a `LineReader` is good until the next is read):
    /// at most `limit` of them, the last one the first whose `seq` is past `until`, if any; and why the input could
    /// not be read further, if it could not (said once the lines before are read).
    private struct Batch {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        var numbers: [Int] = []
        var complete: [Bool] = []
        var failure: LineReader.Unreadable?

        init(_ lines: LineReader, upTo limit: Int, until: UInt64?) {
            bytes.reserveCapacity(min(limit * 256, 64 << 10)) // (grown as lines come: a resume of a few lines stays small)
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
}
