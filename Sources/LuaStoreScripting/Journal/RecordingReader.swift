import LuaKit

/// Reads a recording line by line, checking every field the format defines: the header first, then each entry
/// — its sum (format 3 on), its time (`dt`, format 4 on), its sequence number (one more than the line before: a line lost, repeated or moved is
/// refused), its origin, its outcome, its digest, and no field the format does not have. A recording is either
/// read with the meaning it was written with or refused; the caller names the line. (`RecordingLines` reads
/// every recording through it.)
public struct RecordingReader: Sendable {
    /// What the header says.
    public struct Header: Sendable {
        /// The format version (`RecordingLine.readableVersions`: 2 to 6).
        public var version: Int64
        /// The app's name (its folder's name, as the recorder was given it).
        public var app: String
        /// The app's `schemaVersion` the state was recorded under.
        public var schemaVersion: Int64
        /// The digest of the app's Lua files the state was recorded with.
        public var scripts: String
        /// The entry the state follows (0: none); nil for format 2, which does not say.
        public var sequence: UInt64?
        /// The state (`.nil` when the header was read without decoding it: see `stateText`).
        public var state: LuaValue
        /// The state as the header writes it (JSON).
        public var stateText: ArraySlice<UInt8> = []
        /// The state, decoded from `stateText` (for a header read without decoding it).
        package func decodedState() throws(Malformed) -> LuaValue {
            do {
                return try RecordingJSON.decode(RecordingJSON.Value(parsing: stateText))
            } catch {
                throw Malformed(description: "the initial state: \(error)")
            }
        }

        /// The latest actions sent with an id before the header's entry (format 5 on: a durable store's snapshot).
        public var clientActions: [ClientAction] = []
        /// The state of `math.random`'s generator at the header's entry (format 6 on); nil: as every VM starts it.
        public var random: LuaRandomState?

        /// The time the first entry's `dt` counts from, in milliseconds since 1970-01-01 UTC (0 before format 4).
        public var time: Int64 = 0
        /// The store's clock: when it started, its offset from UTC and the environment `os.getenv` read (all 0 and
        /// empty before format 4).
        public var clock = RecordedClock(started: 0)

        /// The clock, where the recording has one (format 4 on).
        public var recordedClock: RecordedClock? { version >= 4 ? clock : nil }
        /// The time, where the recording has one (format 4 on).
        public var recordedTime: Int64? { version >= 4 ? time : nil }

        /// What a recorder writes for this header.
        public var start: JournalStart {
            var start = JournalStart(state: state, scripts: scripts, schemaVersion: schemaVersion, sequence: sequence ?? 0, time: time, clock: clock)
            start.random = random
            return start
        }
    }

    /// Why a line is not what the format says, in words.
    public typealias Malformed = RecordingJSON.Malformed

    /// The header.
    public let header: Header
    /// The sequence number the next entry must have (nil until the first entry of a format 2 recording).
    private var expected: UInt64?
    /// The last digest found well-formed (entries mostly repeat it).
    private var lastDigest: String?
    /// The last digest as its entry wrote it (quoted), to compare the next entry's with.
    private var lastDigestText: [UInt8] = []
    /// The time of the last entry read (the header's `time` before the first), in milliseconds since 1970-01-01 UTC.
    public private(set) var time: Int64
    /// The state of `math.random`'s generator after the last entry read, as the latest line that told it said (the
    /// header's before any; nil: as every VM starts it).
    public private(set) var random: LuaRandomState?

    /// Reads the header line.
    public init(header line: ArraySlice<UInt8>) throws(Malformed) {
        try self.init(header: line, decodingState: true)
    }

    /// Reads the header line; with `decodingState` false its state is only checked for the brackets, quotes and
    /// escapes that bound it, and kept as text (`Header.stateText`).
    package init(header line: ArraySlice<UInt8>, decodingState: Bool) throws(Malformed) {
        let fields: RecordingJSON.Value
        let stateText: ArraySlice<UInt8>?
        do {
            (fields, stateText) = try RecordingJSON.Value.parsing(line, spanOf: "state", readsIt: decodingState)
        } catch {
            throw Malformed(description: "not a recording: the first line is not a header (\(error))")
        }
        guard case .object(let object) = fields else { throw Malformed(description: "not a recording: the first line is not a header object") }
        guard case .string(RecordingLine.format)? = object["format"] else {
            if object["action"] != nil, stateText != nil || object["error"] != nil {
                throw Malformed(description: "a version 1 recording (the whole state after each action), which this luastore no longer replays: record the session again with `luastore run --record`")
            }
            throw Malformed(description: "not a recording (the header has no \"format\": \"\(RecordingLine.format)\")")
        }
        guard case .integer(let version)? = object["version"], RecordingLine.readableVersions.contains(version) else {
            let readable = "this luastore reads versions \(RecordingLine.readableVersions.lowerBound)–\(RecordingLine.readableVersions.upperBound)"
            guard case .integer(let version)? = object["version"] else {
                throw Malformed(description: "the header's \"version\" must be a format version number (\(readable))")
            }
            if version > RecordingLine.readableVersions.upperBound {
                throw Malformed(description: "a recording of format version \(version), written by a newer luastore (\(readable)): replay it with that luastore")
            }
            throw Malformed(description: "a recording of format version \(version), written by an older luastore, which this one no longer replays (\(readable)): record the session again with `luastore run --record`")
        }
        if version >= 3 { try RecordingLine.checkSum(line) }
        try Self.allow(object, ["format", "version", "app", "schemaVersion", "scripts", "state"] + (version >= 3 ? ["seq", "sum"] : [])
                       + (version >= 4 ? ["time", "started", "utcOffset", "environment"] : []) + (version >= 5 ? ["clients"] : []) + (version >= 6 ? ["random"] : []),
                       in: "the header")
        guard case .string(let app)? = object["app"] else { throw Malformed(description: "the header's \"app\" must be a string") }
        guard case .integer(let schemaVersion)? = object["schemaVersion"] else { throw Malformed(description: "the header's \"schemaVersion\" must be an integer") }
        let scripts = try Self.digest(object["scripts"], in: "the header")
        var sequence: UInt64?
        if version >= 3 {
            guard case .integer(let seq)? = object["seq"], seq >= 0 else { throw Malformed(description: "the header's \"seq\" must be an integer ≥ 0") }
            sequence = UInt64(seq)
        }
        guard let stateText else { throw Malformed(description: "the header has no \"state\"") }
        // (Kept as text unless decoded: a table's text starts with its bracket.)
        guard stateText.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }).map({ $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "[") }) == true else {
            throw Malformed(description: "the header's \"state\" must be a state: a table (a JSON object or list)")
        }
        var state = LuaValue.nil
        if decodingState, let stateJSON = object["state"] {
            do {
                state = try RecordingJSON.decode(stateJSON)
            } catch {
                throw Malformed(description: "the initial state: \(error)")
            }
        }
        var header = Header(version: version, app: app, schemaVersion: schemaVersion, scripts: scripts, sequence: sequence, state: state)
        header.stateText = stateText
        if let clients = object["clients"] { header.clientActions = try Self.clientActions(clients, before: sequence ?? 0) }
        if let random = object["random"] { header.random = try Self.random(random) }
        if version >= 4 {
            guard case .integer(let time)? = object["time"] else { throw Malformed(description: "the header's \"time\" must be an integer (milliseconds since 1970)") }
            guard case .integer(let started)? = object["started"] else {
                throw Malformed(description: "the header's \"started\" must be an integer (milliseconds since 1970)")
            }
            header.time = time
            header.clock.started = started
            if let offset = object["utcOffset"] {
                guard case .integer(let seconds) = offset, abs(seconds) <= Int64(StoreClock.utcOffsetLimit) else {
                    throw Malformed(description: "the header's \"utcOffset\" must be an integer of seconds within ±18 hours")
                }
                header.clock.utcOffsetSeconds = Int(seconds)
            }
            if let environment = object["environment"] {
                guard case .object(let variables) = environment else {
                    throw Malformed(description: "the header's \"environment\" must be an object of strings")
                }
                for (name, value) in variables {
                    guard case .string(let text) = value else {
                        throw Malformed(description: "the header's \"environment\" must be an object of strings (\"\(name.text)\" is not a string)")
                    }
                    header.clock.environment[name.text] = text
                }
            }
        }
        self.header = header
        time = header.time
        random = header.random
        expected = sequence.map { $0 + 1 }
    }

    /// Reads the next entry line: the recorded action (its changes kept as written, see
    /// `RecordingLine.RecordedAction.changesJSON`), or nil for a reload. Each field is looked up once; a line with a
    /// field the format does not define has more fields than those found.
    /// `sumChecked`: the line's sum was found to match already (`RecordingLine.sumsMatch`).
    public mutating func entry(_ line: ArraySlice<UInt8>, sumChecked: Bool = false) throws(Malformed) -> RecordingLine.RecordedAction? {
        let summed = header.version >= 3
        if summed && !sumChecked { try RecordingLine.checkSum(line) }
        let fields = try RecordingJSON.Value.entryFields(line)
        let seqJSON = fields.seq, origin = fields.origin, action = fields.action, reload = fields.reload
        let failure = fields.failure, changesJSON = fields.changes
        if let unknown = fields.unknown ?? (!summed && fields.hasSum ? "sum" : nil) ?? (header.version < 4 && fields.dt != nil ? "dt" : nil)
            ?? (header.version < 6 && fields.random != nil ? "random" : nil) {
            throw Malformed(description: "an entry has a field the format does not define: \"\(unknown)\"")
        }
        guard case .integer(let seq)? = seqJSON, seq > 0 else { throw Malformed(description: "no \"seq\" (a positive integer)") }
        let sequence = UInt64(seq)
        if let expected, sequence != expected {
            throw Malformed(description: sequence < expected
                ? "entry \(sequence) comes after entry \(expected - 1): entries are numbered one after another (a line repeated or out of order)"
                : "entry \(sequence) follows entry \(expected - 1): \(sequence - expected) \(sequence - expected == 1 ? "entry is" : "entries are") missing")
        }
        let random = try fields.random.map { value throws(Malformed) in try Self.random(value) }
        if let dt = fields.dt {
            guard case .integer(let delta) = dt, delta != 0, case (let sum, false) = time.addingReportingOverflow(delta) else {
                throw Malformed(description: "\"dt\" must be a non-zero integer (the milliseconds since the line before)")
            }
            time = sum
        }
        var clientId: String?
        if case .string("outside")? = origin {
        } else if header.version >= 5, case .object(let fields)? = origin, let client = fields["client"] {
            try Self.allow(fields, ["client"], in: "an origin")
            guard case .string(let id) = client, !id.isEmpty else { throw Malformed(description: "a client's origin needs its id: {\"client\": \"…\"}") }
            clientId = id
        } else {
            try Self.checkOrigin(origin)
        }
        if let scripts = fields.scripts, scripts.elementsEqual(lastDigestText) {} else {
            lastDigest = try Self.digest(try fields.scripts.map { text throws(Malformed) in try RecordingJSON.Value(parsing: text) }, in: "an entry")
            lastDigestText = fields.scripts.map(Array.init) ?? []
        }
        var message: String?
        var failureLocation: String?
        if let failure {
            (message, failureLocation) = try Self.checkFailure(failure)
            if changesJSON != nil { throw Malformed(description: "an entry has both \"changes\" and a \"failure\"") }
        }
        switch (action, reload) {
        case (_?, _?):
            throw Malformed(description: "an entry has both an \"action\" and a \"reload\"")
        case (nil, nil):
            throw Malformed(description: "an entry needs an \"action\" or a \"reload\"")
        case (nil, let reload?):
            switch reload {
            case .string("failed"):
                guard message != nil else { throw Malformed(description: "a failed reload needs its \"failure\"") }
            case .object(let versions):
                try Self.allow(versions, ["from", "to"], in: "a reload")
                guard case .integer? = versions["from"], case .integer? = versions["to"] else {
                    throw Malformed(description: "a reload's \"from\" and \"to\" must be integers")
                }
                guard message == nil else { throw Malformed(description: "a reload that took place has no \"failure\"") }
            default:
                throw Malformed(description: "\"reload\" must be {\"from\": …, \"to\": …} or \"failed\"")
            }
            expected = sequence + 1
            if let random { self.random = random }
            return nil
        case (let action?, nil):
            var recorded = RecordingLine.RecordedAction(sequence: sequence, action: try RecordingJSON.decode(action), changes: nil, failure: message,
                                                        time: header.version >= 4 ? time : nil, clientId: clientId)
            recorded.failureLocation = failureLocation
            if message == nil {
                guard let changesJSON else { throw Malformed(description: "no \"changes\"") }
                recorded.changesJSON = changesJSON
            }
            expected = sequence + 1
            if let random { self.random = random }
            return recorded
        }
    }

    /// The state of `math.random`'s generator a `random` field gives: 64 hexadecimal digits.
    private static func random(_ value: RecordingJSON.Value) throws(Malformed) -> LuaRandomState {
        guard case .string(let text) = value, let random = LuaRandomState(hexadecimal: text) else {
            throw Malformed(description: "\"random\" must be 64 hexadecimal digits (the state of math.random's generator)")
        }
        return random
    }

    /// Refuses a field the format does not define (a damaged name reads as an unknown field).
    private static func allow(_ object: [RecordingJSON.Value.Name: RecordingJSON.Value], _ names: [RecordingJSON.Value.Name], in what: String)
        throws(Malformed) {
        for key in object.keys where !names.contains(key) {
            throw Malformed(description: "\(what) has a field the format does not define: \"\(key.text)\"")
        }
    }

    /// A digest: 16 lowercase hexadecimal digits.
    private static func digest(_ value: RecordingJSON.Value?, in what: String) throws(Malformed) -> String {
        guard case .string(let text)? = value, text.utf8.count == 16,
              text.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw Malformed(description: "\(what)'s \"scripts\" must be a digest of 16 hexadecimal digits")
        }
        return text
    }

    /// A header's `clients`: `[[id, seq], [id, seq, failure], …]`, each before the header's entry, in order.
    private static func clientActions(_ value: RecordingJSON.Value, before sequence: UInt64) throws(Malformed) -> [ClientAction] {
        let shape = "the header's \"clients\" must be a list of [id, seq] or [id, seq, failure]"
        guard case .array(let items) = value else { throw Malformed(description: shape) }
        var actions: [ClientAction] = []
        actions.reserveCapacity(items.count)
        for item in items {
            guard case .array(let fields) = item, fields.count == 2 || fields.count == 3, case .string(let id) = fields[0], !id.isEmpty,
                  case .integer(let seq) = fields[1], seq > 0, UInt64(seq) <= sequence else { throw Malformed(description: shape) }
            var action = ClientAction(id: id, sequence: UInt64(seq))
            if fields.count == 3 {
                guard case .string(let failure) = fields[2] else { throw Malformed(description: shape) }
                action.failure = failure
            }
            actions.append(action)
        }
        return actions
    }

    private static func checkOrigin(_ origin: RecordingJSON.Value?) throws(Malformed) {
        switch origin {
        case .string("outside")?, .string("child")?, .string("reload")?:
            return
        case .object(let fields)?:
            try allow(fields, ["effect", "subscription"], in: "an origin")
            guard case .string? = fields["effect"] else { throw Malformed(description: "an effect's origin needs its \"effect\" kind") }
            if let key = fields["subscription"], case .string = key {} else if fields["subscription"] != nil {
                throw Malformed(description: "an origin's \"subscription\" must be a string")
            }
        case .string(let name)?:
            throw Malformed(description: "the origin \"\(name)\" is not one the format defines (\"outside\", \"child\", \"reload\" or {\"effect\": …})")
        case _?:
            throw Malformed(description: "the origin is not one the format defines (\"outside\", \"child\", \"reload\" or {\"effect\": …})")
        case nil:
            throw Malformed(description: "no \"origin\"")
        }
    }

    /// The failure's message, once its fields are checked.
    private static func checkFailure(_ failure: RecordingJSON.Value) throws(Malformed) -> (message: String, location: String?) {
        guard case .object(let fields) = failure else { throw Malformed(description: "\"failure\" must be an object") }
        try allow(fields, ["stage", "message", "location"], in: "a failure")
        guard case .string(let stage)? = fields["stage"], ScriptFailure.Stage(rawValue: stage) != nil else {
            throw Malformed(description: "a failure's \"stage\" must be one the format defines (\"reduce\", \"load\", …)")
        }
        guard case .string(let message)? = fields["message"] else { throw Malformed(description: "a failure without a message") }
        var location: String?
        if case .string(let text)? = fields["location"] { location = text } else if fields["location"] != nil {
            throw Malformed(description: "a failure's \"location\" must be a string")
        }
        return (message, location)
    }
}
