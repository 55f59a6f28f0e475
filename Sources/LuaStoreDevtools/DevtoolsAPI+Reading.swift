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
        var body = #"{"app":"#
        RecordingJSON.quote(options.app, into: &body)
        body += #","first":\#(bounds.first),"last":\#(bounds.last),"count":\#(bounds.count),"capacity":\#(journal.capacity)"#
        body += #","history":{"first":\#(history.kept.first ?? 0),"last":\#(history.kept.last ?? 0),"at":\#(history.at ?? 0)}"#
        body += #","traveling":\#(travel.traveling),"held":\#(travel.held),"unlocked":\#(unlocked.withLock { $0 }),"busy":\#(busy)"#
        if let imported = source.imported {
            body += #","imported":{"name":"#
            RecordingJSON.quote(imported.name, into: &body)
            body += #","entries":\#(imported.entries),"recordedFirst":\#(imported.recordedFirst),"skippedReloads":\#(imported.skippedReloads)"#
            body += #","cutShort":\#(imported.cutShort.map(String.init) ?? "null")"#
            if let divergence = imported.divergence {
                body += #","divergence":{"seq":\#(divergence.sequence),"path":"#
                RecordingJSON.quote(divergence.path, into: &body)
                body += "}"
            }
            body += "}"
        } else {
            body += #","imported":null"#
        }
        body += #","persistence":"# + persistence()
        body += #","plugins":["#
        let mounted = store.mountedManifests.sorted { $0.key < $1.key }
        Self.appendList(mounted, to: &body) { mount, body in
            body += #"{"key":"#
            RecordingJSON.quote(mount.key, into: &body)
            body += #","name":"#
            RecordingJSON.quote(mount.value.name, into: &body)
            body += #","version":"#
            RecordingJSON.quote(mount.value.version.description, into: &body)
            body += "}"
        }
        body += #"],"types":["#
        Self.appendList(journal.types, to: &body) { type, body in
            RecordingJSON.quote(type, into: &body)
        }
        body += "]}"
        return Self.json(body)
    }

    /// The store's database (`null` without one): its file, durability, size on disk, last entry committed and
    /// when (milliseconds since 1970), and why writing failed, if it did.
    func persistence() -> String {
        guard let status = store.persistence?.status else { return "null" }
        var body = #"{"path":"#
        RecordingJSON.quote(status.path, into: &body)
        body += #","durability":"#
        RecordingJSON.quote(status.durability, into: &body)
        body += #","bytes":\#(status.bytes),"sequence":\#(status.sequence),"committed":"#
        body += status.committed.map { String(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? "null"
        body += #","failure":"#
        if let failure = status.failure { RecordingJSON.quote(failure, into: &body) } else { body += "null" }
        return body + "}"
    }

    /// What each plugin the app mounts has cost so far: `{"plugins": [{key, name, version, calls, nanoseconds,
    /// allocations, failures}]}`, in the order actions reach them (empty for an app without mounts).
    func plugins() async throws -> HTTPResponse {
        let store = self.store
        let costs = try await promptly { await store.pluginCosts() }
        var body = #"{"plugins":["#
        Self.appendList(costs, to: &body) { cost, body in
            body += #"{"key":"#
            RecordingJSON.quote(cost.key, into: &body)
            body += #","name":"#
            RecordingJSON.quote(cost.name, into: &body)
            body += #","version":"#
            RecordingJSON.quote(cost.version, into: &body)
            body += #","calls":\#(cost.calls),"nanoseconds":\#(cost.nanoseconds),"allocations":\#(cost.allocations),"failures":\#(cost.failures)}"#
        }
        return Self.json(body + "]}")
    }

    func entries(_ request: HTTPRequest) throws -> HTTPResponse {
        let offset = Int(request.query["offset"] ?? "") ?? 0
        let limit = min(500, Int(request.query["limit"] ?? "") ?? 100)
        let filter = try EntryFilter(request.query)
        var body = ""
        if filter.isEmpty {
            let bounds = journal.bounds
            let kept = journal.entries(offset: offset, limit: limit)
            body += #"{"total":\#(bounds.count),"offset":\#(offset),"entries":["#
            Self.appendList(kept, to: &body) { item, body in
                Summary.write(item, into: &body)
            }
        } else {
            let matches = matching(filter)
            body += #"{"total":\#(matches.count),"offset":\#(offset),"entries":["#
            var written = 0
            for sequence in matches.dropFirst(offset).prefix(limit) {
                guard let item = journal.entry(sequence) else { continue }
                if written > 0 { body += "," }
                Summary.write(item, into: &body)
                written += 1
            }
        }
        body += "]}"
        return Self.json(body)
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
        guard let text = request.query[name], let value = UInt64(text) else {
            throw Refusal(400, "'\(name)' must be an entry's sequence number")
        }
        return value
    }

    func entry(_ request: HTTPRequest) async throws -> HTTPResponse {
        let sequence = try sequence(request)
        guard let item = journal.entry(sequence) else {
            throw Refusal(404, "entry \(sequence) is not kept (entries \(journal.bounds.first)–\(journal.bounds.last) are)")
        }
        var body = #"{"summary":"#
        Summary.write(item, into: &body)
        body += #","line":"#
        body += (try? RecordingLine.entry(item.entry)) ?? "null"
        body += #","commands":["#
        Self.appendList(item.entry.commands, to: &body) { command, body in
            body += Self.encoded(command.payload)
        }
        body += "]"
        if let subscriptions = journal.subscriptions(after: sequence) {
            body += #","subscriptions":{"launched":{"#
            Self.appendList(subscriptions.launched.keys.sorted(), to: &body) { key, body in
                RecordingJSON.quote(key, into: &body)
                body += ":" + Self.encoded(subscriptions.launched[key]!.payload)
            }
            body += #"},"cancelled":["#
            Self.appendList(subscriptions.cancelled, to: &body) { key, body in
                RecordingJSON.quote(key, into: &body)
            }
            body += "]}"
        }
        let changes = item.entry.changes
        // (Each change's path as Lua names it, rendered here: the page shows these, never renders its own.)
        body += #","paths":["#
        Self.appendList(changes, to: &body) { change, body in
            RecordingJSON.quote(LuaPath.render(root: "state", keys: change.path), into: &body)
        }
        body += "]"
        do {
            let store = self.store, paths = changes.map(\.path)
            let details = try await promptly { try await store.details(of: sequence, paths: paths) }
            if !changes.isEmpty {
                body += #","before":["#
                Self.appendList(details.before, to: &body) { value, body in
                    body += Self.encoded(value)
                }
                body += "]"
            }
            switch details.props {
            case .success(let props):
                body += #","props":"#
                body += Self.encoded(props)
            case .failure(let error):
                body += #","propsNote":"#
                RecordingJSON.quote("the props failed: \(error)", into: &body)
            }
        } catch let refusal as Refusal {
            throw refusal // (the store is busy: say so, rather than that the state is not kept)
        } catch {
            let message = (error as? ScriptFailure)?.error.message ?? "\(error)"
            body += #","beforeNote":"#
            RecordingJSON.quote("the state at this entry is not kept: \(message)", into: &body)
            body += #","propsNote":"#
            RecordingJSON.quote("the state at this entry is not kept", into: &body)
        }
        body += "}"
        return Self.json(body)
    }

    /// `seq` (absent: now), `before` (1: just before the entry), `path` (a JSON list of keys), `offset`, `limit`.
    func point(_ request: HTTPRequest) throws -> (sequence: UInt64?, before: Bool) {
        let sequence: UInt64? = request.query["seq"] == nil ? nil : try self.sequence(request)
        return (sequence, request.query["before"] == "1")
    }

    func state(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (sequence, before) = try point(request)
        let path = try Self.path(request.query["path"] ?? "[]")
        let offset = Int(request.query["offset"] ?? "") ?? 0
        let limit = min(1000, Int(request.query["limit"] ?? "") ?? 200)
        let store = self.store
        guard let slice = try await promptly({ try await store.inspect(path, at: sequence, before: before, offset: offset, limit: limit) }) else {
            throw Refusal(404, "no table at \(LuaPath.render(root: "state", keys: path))")
        }
        var body = #"{"count":\#(slice.count),"offset":\#(slice.offset),"items":["#
        Self.appendList(slice.items, to: &body) { item, body in
            body += #"{"key":"#
            body += Self.encoded(item.key.value)
            if let size = item.size {
                body += #","size":\#(size)"#
            } else if let value = item.value {
                body += #","value":"#
                body += Self.encoded(value)
            }
            body += "}"
        }
        body += "]}"
        return Self.json(body)
    }

    func search(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (sequence, _) = try point(request)
        guard let text = request.query["q"], !text.isEmpty else { throw Refusal(400, "'q' must be the text to look for") }
        let store = self.store
        let matches = try await promptly { try await store.search(text, at: sequence, limit: 200) }
        var body = #"{"matches":["#
        Self.appendList(matches, to: &body) { match, body in
            body += #"{"path":"#
            body += Self.encoded(.table(LuaTable(array: match.path.map(\.value))))
            body += #","text":"#
            RecordingJSON.quote(LuaPath.render(root: "state", keys: match.path), into: &body)
            if let value = match.value {
                body += #","value":"#
                body += Self.encoded(value)
            }
            body += "}"
        }
        body += "]}"
        return Self.json(body)
    }

    /// `where`: a Lua expression on `state`; the first kept entry after which it holds.
    func firstEntry(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard let expression = request.query["where"], !expression.isEmpty else {
            throw Refusal(400, "'where' must be a Lua expression on the state, such as state.count > 3")
        }
        do {
            switch try await store.firstEntry(where: expression) {
            case .start: return Self.json(#"{"result":"start"}"#)
            case .entry(let sequence): return Self.json(#"{"result":"entry","seq":\#(sequence)}"#)
            case .never(let checked): return Self.json(#"{"result":"never","checked":\#(checked)}"#)
            }
        } catch {
            throw Refusal(400, "the condition failed: \(error.error)")
        }
    }

    func replay() async throws -> HTTPResponse {
        let report = try await DevtoolsReplay.run(store: store, journal: journal)
        var body = #"{"replayed":\#(report.replayed),"propsCompared":\#(report.propsCompared),"matches":\#(report.divergence == nil)"#
        if let divergence = report.divergence {
            body += #","divergence":{"seq":\#(divergence.sequence),"what":"\#(divergence.what)","action":"#
            body += Self.encoded(divergence.action)
            body += #","scripts":{"then":"\#(divergence.scripts.then)","now":"\#(divergence.scripts.now)"},"differences":["#
            Self.appendList(divergence.differences, to: &body) { difference, body in
                body += #"{"path":"#
                RecordingJSON.quote(difference.path, into: &body)
                if difference.then != .nil { body += #","then":"# + Self.encoded(difference.then) }
                if difference.now != .nil { body += #","now":"# + Self.encoded(difference.now) }
                body += "}"
            }
            body += "]}"
        }
        body += "}"
        return Self.json(body)
    }

    static func path(_ text: String) throws -> [LuaKey] {
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

    /// The session as a recording (`luastore replay` reads it): a header with the state before the oldest kept
    /// entry (from the history: nothing is converted until asked for), then every kept entry.
    func export() async throws -> HTTPResponse {
        let bounds = journal.bounds
        let position = await store.journalPosition()
        let header: (state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64)
        if bounds.count > 0, let first = journal.entry(bounds.first) {
            header = (try await DevtoolsReplay.stateBefore(bounds.first, of: store), first.entry.scripts, position.schemaVersion, bounds.first - 1)
        } else {
            header = try await store.journalStart()
        }
        var text = try RecordingLine.header(app: options.app, start: header) + "\n"
        try journal.forEachKept { item in
            text += try RecordingLine.entry(item.entry)
            text += "\n"
        }
        return HTTPResponse(statusCode: .ok,
                            headers: [.contentType: "application/x-ndjson", .cacheControl: "no-store",
                                      .contentDisposition: "attachment; filename=\"\(options.app).luastore-recording.jsonl\""],
                            body: Data(text.utf8))
    }

    /// The kept session as a busted spec (`luastore test` runs it; docs/cli.md, "A session as a spec"): from the state
    /// before the oldest kept entry, one test per kept action, with the props after each where they changed (as
    /// the history gives them; without props when it no longer holds those entries).
    func exportSpec() async throws -> HTTPResponse {
        let bounds = journal.bounds
        var entries: [JournalEntry] = []
        journal.forEachKept { entries.append($0.entry) }
        let start: LuaValue, scripts: String
        if bounds.count > 0, let first = entries.first {
            (start, scripts) = (try await DevtoolsReplay.stateBefore(bounds.first, of: store), first.scripts)
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
        var spec = SessionSpec(name: "\(options.app) session", scripts: scripts, start: start)
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
