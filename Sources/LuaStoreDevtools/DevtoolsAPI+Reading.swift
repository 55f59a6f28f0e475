import FlyingFox
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// The routes that read: the session, entries, state, search, the first entry where a condition holds, replay and the exports.
extension DevtoolsAPI {
    // MARK: Reading

    func session() async -> HTTPResponse {
        let bounds = journal.bounds
        let store = self.store
        var busy = false
        let status: (history: (kept: [UInt64], at: UInt64?), travel: (traveling: Bool, held: Int))
        do {
            status = try await promptly { (await store.history(), await store.travelStatus()) }
            lastStatus.withLock { $0 = status }
        } catch {
            busy = true
            status = lastStatus.withLock { $0 }
        }
        let (history, travel) = status
        var json = JSONWriter()
        json.object { json in
            json.field("app", options.app)
            json.field("first", bounds.first)
            json.field("last", bounds.last)
            json.field("count", bounds.count)
            json.field("capacity", journal.capacity)
            json.object("history") { json in
                json.field("first", history.kept.first ?? 0)
                json.field("last", history.kept.last ?? 0)
                json.field("at", history.at ?? 0)
            }
            json.field("traveling", travel.traveling)
            json.field("held", travel.held)
            json.field("unlocked", unlocked.withLock { $0 })
            json.field("busy", busy)
            if let imported = source.imported {
                json.object("imported") { json in
                    json.field("name", imported.name)
                    json.field("entries", imported.entries)
                    json.field("recordedFirst", imported.recordedFirst)
                    json.field("skippedReloads", imported.skippedReloads)
                    json.field("cutShort", imported.cutShort)
                    if let divergence = imported.divergence {
                        json.object("divergence") { json in
                            json.field("seq", divergence.sequence)
                            json.field("path", divergence.path)
                        }
                    }
                }
            } else {
                json.field("imported", raw: "null")
            }
            json.field("persistence", raw: persistence())
            json.array("plugins", store.mountedManifests.sorted { $0.key < $1.key }) { json, mount in
                json.object { json in Self.writePlugin(mount.key, mount.value.name, mount.value.version.description, into: &json) }
            }
            json.array("types", journal.types) { json, type in json.value(type) }
        }
        return Self.json(json)
    }

    /// A mounted plugin's fields: its mount key, name and version.
    static func writePlugin(_ key: String, _ name: String, _ version: String, into json: inout JSONWriter) {
        json.field("key", key)
        json.field("name", name)
        json.field("version", version)
    }

    /// The store's database (`null` without one): its file, durability, size on disk, last entry committed and
    /// when (milliseconds since 1970), and why writing failed, if it did.
    func persistence() -> String {
        guard let status = store.persistence?.status else { return "null" }
        var json = JSONWriter()
        json.object { json in
            json.field("path", status.path)
            json.field("durability", status.durability)
            json.field("bytes", status.bytes)
            json.field("sequence", status.sequence)
            json.field("committed", status.committed.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) })
            json.field("failure", status.failure)
        }
        return json.text
    }

    /// What each plugin the app mounts has cost so far: `{"plugins": [{key, name, version, calls, nanoseconds,
    /// allocations, failures}]}`, in the order actions reach them (empty for an app without mounts).
    func plugins() async throws -> HTTPResponse {
        let store = self.store
        let costs = try await promptly { await store.pluginCosts() }
        var json = JSONWriter()
        json.object { json in
            json.array("plugins", costs) { json, cost in
                json.object { json in
                    Self.writePlugin(cost.key, cost.name, cost.version, into: &json)
                    json.field("calls", cost.calls)
                    json.field("nanoseconds", cost.nanoseconds)
                    json.field("allocations", cost.allocations)
                    json.field("failures", cost.failures)
                }
            }
        }
        return Self.json(json)
    }

    func entries(_ request: HTTPRequest) throws -> HTTPResponse {
        let offset = try Self.count(request, "offset", absent: 0)
        let limit = try Self.count(request, "limit", absent: 100, most: 500)
        let filter = try EntryFilter(request.query)
        var json = JSONWriter()
        json.object { json in
            if filter.isEmpty {
                json.field("total", journal.bounds.count)
                json.field("offset", offset)
                json.array("entries", journal.entries(offset: offset, limit: limit)) { json, item in Summary.write(item, into: &json) }
            } else {
                let matches = matching(filter)
                json.field("total", matches.count)
                json.field("offset", offset)
                json.array("entries", matches.dropFirst(offset).prefix(limit).compactMap(journal.entry)) { json, item in
                    Summary.write(item, into: &json)
                }
            }
        }
        return Self.json(json)
    }

    /// The sequences of the kept entries `filter` admits, oldest first: scanned once, then extended as entries
    /// arrive (the last filter asked for is kept).
    func matching(_ filter: EntryFilter) -> [UInt64] {
        let first = journal.bounds.first
        return filters.withLock { cache in
            if cache?.filter != filter { cache = FilterCache(filter: filter, scanned: 0, matches: []) }
            for item in journal.entries(after: cache!.scanned) {
                if filter.admits(item.entry) { cache!.matches.append(item.entry.sequence) }
                cache!.scanned = item.entry.sequence
            }
            let dropped = cache!.matches.firstIndex { $0 >= first } ?? cache!.matches.count // (no longer kept)
            if dropped > 0 { cache!.matches.removeFirst(dropped) }
            return cache!.matches
        }
    }

    func sequence(_ request: HTTPRequest, _ name: String = "seq") throws -> UInt64 {
        guard let text = request.query[name], Self.isDigits(text), let value = UInt64(text) else {
            throw Refusal(400, "'\(name)' must be an entry's sequence number")
        }
        return value
    }

    /// A count of the query (`offset`, `limit`): `absent` when it is not given, at most `most`; anything but a whole
    /// number from 0 written in digits is refused, naming it.
    static func count(_ request: HTTPRequest, _ name: String, absent: Int, most: Int = .max) throws -> Int {
        guard let text = request.query[name] else { return absent }
        guard isDigits(text), let value = Int(text) else { throw Refusal(400, "'\(name)' must be a whole number from 0 (digits)") }
        return min(value, most)
    }

    /// A yes-or-no of the query (`failed`, `before`): 1 or 0, false when it is not given.
    static func flag(_ query: [HTTPRequest.QueryItem], _ name: String) throws -> Bool {
        switch query[name] {
        case nil, "0": return false
        case "1": return true
        default: throw Refusal(400, "'\(name)' is 1 or 0")
        }
    }

    static func isDigits(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    func entry(_ request: HTTPRequest) async throws -> HTTPResponse {
        let sequence = try sequence(request)
        guard let item = journal.entry(sequence) else {
            throw Refusal(404, "entry \(sequence) is not kept (entries \(journal.bounds.first)–\(journal.bounds.last) are)")
        }
        let changes = item.entry.changes
        let details: Result<(before: [LuaValue], props: Result<LuaValue, LuaError>), any Error>
        do {
            let store = self.store, paths = changes.map(\.path)
            details = .success(try await promptly { try await store.details(of: sequence, paths: paths) })
        } catch let refusal as Refusal {
            throw refusal // (the store is busy: say so, rather than that the state is not kept)
        } catch {
            details = .failure(error)
        }
        var json = JSONWriter()
        json.object { json in
            json.key("summary")
            Summary.write(item, into: &json)
            // (Its line as a recording holds it after the entry before: its time as what it adds to that one's.)
            let previousTime = journal.entry(sequence - 1)?.time ?? item.time
            json.field("line", raw: (try? RecordingLine.entry(item.entry, after: previousTime)) ?? "null")
            json.array("commands", item.entry.commands) { json, command in json.value(recorded: command.payload) }
            if let subscriptions = journal.subscriptions(after: sequence) {
                json.object("subscriptions") { json in
                    json.object("launched") { json in
                        for key in subscriptions.launched.keys.sorted() { json.field(key, recorded: subscriptions.launched[key]!.payload) }
                    }
                    json.array("cancelled", subscriptions.cancelled) { json, key in json.value(key) }
                }
            }
            // (Each change's path as Lua names it, rendered here: the page shows these, never renders its own.)
            json.array("paths", changes) { json, change in json.value(LuaPath.render(root: "state", keys: change.path)) }
            switch details {
            case .success(let details):
                if !changes.isEmpty { json.array("before", details.before) { json, value in json.value(recorded: value) } }
                switch details.props {
                case .success(let props): json.field("props", recorded: props)
                case .failure(let error): json.field("propsNote", "the props failed: \(error)")
                }
            case .failure(let error):
                let message = (error as? ScriptFailure)?.error.message ?? "\(error)"
                json.field("beforeNote", "the state at this entry is not kept: \(message)")
                json.field("propsNote", "the state at this entry is not kept")
            }
        }
        return Self.json(json)
    }

    /// `seq` (absent: now), `before` (1: just before the entry), `path` (a JSON list of keys), `offset`, `limit`.
    func point(_ request: HTTPRequest) throws -> (sequence: UInt64?, before: Bool) {
        let sequence: UInt64? = request.query["seq"] == nil ? nil : try self.sequence(request)
        return (sequence, try Self.flag(request.query, "before"))
    }

    func state(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (sequence, before) = try point(request)
        let path = try Self.path(request.query["path"] ?? "[]")
        let offset = try Self.count(request, "offset", absent: 0)
        let limit = try Self.count(request, "limit", absent: 200, most: 1000)
        let store = self.store
        guard let slice = try await promptly({ try await store.inspect(path, at: sequence, before: before, offset: offset, limit: limit) }) else {
            throw Refusal(404, "no table at \(LuaPath.render(root: "state", keys: path))")
        }
        var json = JSONWriter()
        json.object { json in
            json.field("count", slice.count)
            json.field("offset", slice.offset)
            json.array("items", slice.items) { json, item in
                json.object { json in
                    json.field("key", recorded: item.key.value)
                    if let size = item.size {
                        json.field("size", size)
                    } else if let value = item.value {
                        json.field("value", recorded: value)
                    }
                }
            }
        }
        return Self.json(json)
    }

    func search(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (sequence, _) = try point(request)
        guard let text = request.query["q"], !text.isEmpty else { throw Refusal(400, "'q' must be the text to look for") }
        let store = self.store
        let matches = try await promptly { try await store.search(text, at: sequence, limit: 200) }
        var json = JSONWriter()
        json.object { json in
            json.array("matches", matches) { json, match in
                json.object { json in
                    json.field("path", recorded: .table(LuaTable(array: match.path.map(\.value))))
                    json.field("text", LuaPath.render(root: "state", keys: match.path))
                    if let value = match.value { json.field("value", recorded: value) }
                }
            }
        }
        return Self.json(json)
    }

    /// `where`: a Lua expression on `state`; the first kept entry after which it holds.
    func firstEntry(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard let expression = request.query["where"], !expression.isEmpty else {
            throw Refusal(400, "'where' must be a Lua expression on the state, such as state.count > 3")
        }
        do {
            let found = try await store.firstEntry(where: expression)
            var json = JSONWriter()
            json.object { json in
                switch found {
                case .start:
                    json.field("result", "start")
                case .entry(let sequence):
                    json.field("result", "entry")
                    json.field("seq", sequence)
                case .never(let checked):
                    json.field("result", "never")
                    json.field("checked", checked)
                }
            }
            return Self.json(json)
        } catch {
            throw Refusal(400, "the condition failed: \(error.error)")
        }
    }

    func replay() async throws -> HTTPResponse {
        let report = try await DevtoolsReplay.run(store: store, journal: journal)
        var json = JSONWriter()
        json.object { json in
            json.field("replayed", report.replayed)
            json.field("propsCompared", report.propsCompared)
            json.field("matches", report.divergence == nil)
            guard let divergence = report.divergence else { return }
            json.object("divergence") { json in
                json.field("seq", divergence.sequence)
                json.field("what", divergence.what)
                json.field("action", recorded: divergence.action)
                json.object("scripts") { json in
                    json.field("then", divergence.scripts.then)
                    json.field("now", divergence.scripts.now)
                }
                json.array("differences", divergence.differences) { json, difference in
                    json.object { json in
                        json.field("path", difference.path)
                        if difference.then != .nil { json.field("then", recorded: difference.then) }
                        if difference.now != .nil { json.field("now", recorded: difference.now) }
                    }
                }
            }
        }
        return Self.json(json)
    }

    static func path(_ text: String) throws -> [LuaKey] {
        // (A JSON object would read as an empty table: a list is asked for by its bracket.)
        guard text.drop(while: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }).first == "[" else {
            throw Refusal(400, "'path' must be a JSON list of keys")
        }
        let value: LuaValue
        do {
            value = try RecordingJSON.decode(text: Substring(text))
        } catch {
            throw Refusal(400, "'path' must be a JSON list of keys: \(error)")
        }
        if value == .nil || value.table?.array.isEmpty == true && value.table?.fieldCount == 0 { return [] }
        guard let table = value.table, table.fieldCount == 0 else { throw Refusal(400, "'path' must be a JSON list of keys") }
        var keys: [LuaKey] = []
        for element in table.array {
            guard let key = LuaKey(exactly: element) else { throw Refusal(400, "'path' holds \(element), which is not a key") }
            keys.append(key)
        }
        return keys
    }

    /// The kept entries an export holds, oldest first: those after the newest a rewind undid (the ones up to it no
    /// longer lead to the state).
    func exportedEntries() -> [DevtoolsJournal.Kept] {
        let rewound = journal.rewoundThrough
        var kept: [DevtoolsJournal.Kept] = []
        journal.forEachKept { item in if item.entry.sequence > rewound { kept.append(item) } }
        return kept
    }

    /// The session as a recording (`luastore replay` reads it): a header with the state before the oldest exported
    /// entry (from the history: nothing is converted until asked for), then every exported entry — after a rewind,
    /// from the state it left.
    func export() async throws -> HTTPResponse {
        let kept = exportedEntries()
        let position = await store.journalPosition()
        let header: JournalStart
        if let first = kept.first {
            var start = JournalStart(state: try await DevtoolsReplay.stateBefore(first.entry.sequence, of: store), scripts: first.entry.scripts,
                                     schemaVersion: position.schemaVersion, sequence: first.entry.sequence - 1, time: first.time,
                                     clock: store.recordedClock)
            start.random = await store.randomState(after: first.entry.sequence - 1)
            header = start
        } else {
            header = try await store.journalStart()
        }
        var text = try RecordingLine.header(app: options.app, start: header) + "\n"
        var time = header.time
        for item in kept {
            text += try RecordingLine.entry(item.entry, after: time)
            text += "\n"
            time = item.time
        }
        return HTTPResponse(statusCode: .ok,
                            headers: [.contentType: "application/x-ndjson", .cacheControl: "no-store",
                                      .contentDisposition: "attachment; filename=\"\(options.app).luastore-recording.jsonl\""],
                            body: Data(text.utf8))
    }

    /// The kept session as a busted spec (`luastore test` runs it; docs/cli.md, "A session as a spec"): from the state
    /// before the oldest exported entry (`exportedEntries`), one test per exported action, with the props after each where they changed (as
    /// the history gives them; without props when it no longer holds those entries).
    func exportSpec() async throws -> HTTPResponse {
        let entries = exportedEntries().map(\.entry)
        let start: LuaValue, scripts: String
        if let first = entries.first {
            (start, scripts) = (try await DevtoolsReplay.stateBefore(first.sequence, of: store), first.scripts)
        } else {
            let header = try await store.journalStart()
            (start, scripts) = (header.state, header.scripts)
        }
        let applied = entries.filter { entry in
            if case .action = entry.event { return entry.failure == nil }
            return false
        }.map(\.sequence)
        var props: [UInt64: LuaValue] = [:]
        if let along = try? await store.props(along: applied) {
            for (sequence, result) in zip(applied, along) { if case .success(let value) = result { props[sequence] = value } }
        }
        var spec = SessionSpec(name: "\(options.app) session", scripts: scripts, start: start, clock: store.recordedClock)
        var last: LuaValue?
        for entry in entries {
            let after = props[entry.sequence]
            guard let step = SessionSpec.Step(entry: entry, props: after != last ? after : nil) else { continue }
            if after != nil { last = after }
            spec.steps.append(step)
        }
        return HTTPResponse(statusCode: .ok,
                            headers: [.contentType: "text/x-lua; charset=utf-8", .cacheControl: "no-store",
                                      .contentDisposition: "attachment; filename=\"\(options.app)_session_spec.lua\""],
                            body: Data(try spec.text().utf8))
    }
}
