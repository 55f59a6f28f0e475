import FlyingFox
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// The devtools' HTTP API and page (docs/devtools.md, "Devtools", lists the routes). Every request passes `admit` first:
/// the Host header must name this server (DNS rebinding), an Origin header must be this server's (other pages
/// in the same browser), and the token must be there (a query item `token`, or the `X-Devtools-Token` header).
/// Dispatch and time travel answer 423 until the page is unlocked.
final class DevtoolsAPI: HTTPHandler, Sendable {
    /// What the page browses: the running app, or a recording imported into a store of its own.
    struct Source: Sendable {
        let store: ScriptedStore
        let journal: DevtoolsJournal
        var imported: DevtoolsImport.Summary?
    }

    let options: DevtoolsOptions
    let token: String
    private let port = Protected<UInt16>(0)
    private let address = Protected<(numeric: String, isLoopback: Bool)>(("127.0.0.1", true))
    private let unlocked = Protected(false)
    private let filters = Protected<FilterCache?>(nil)
    private let running: Protected<Source>
    private let browsing: Protected<Source?> = Protected(nil)
    let live: LiveClients

    /// The store and journal the routes read: an imported recording's while one is browsed.
    private var source: Source { browsing.withLock { $0 } ?? running.withLock { $0 } }
    var store: ScriptedStore { source.store }
    var journal: DevtoolsJournal { source.journal }

    init(store: ScriptedStore, journal: DevtoolsJournal, options: DevtoolsOptions, token: String) {
        self.running = Protected(Source(store: store, journal: journal, imported: nil))
        self.options = options
        self.token = token
        self.live = LiveClients(journal: journal, queue: options.clientQueue)
    }

    /// Says where the server listens: the port, and the numeric address the host name resolved to.
    func listening(on port: UInt16, address: String, isLoopback: Bool) {
        self.port.withLock { $0 = port }
        self.address.withLock { $0 = (address, isLoopback) }
    }

    // MARK: Admission

    /// The Host header values that name this server: the host as given, its numeric address, and for a loopback
    /// address `localhost`, each with the port.
    private var hosts: Set<String> {
        let port = self.port.withLock { $0 }
        let (address, isLoopback) = self.address.withLock { $0 }
        var names: Set<String> = [options.host.lowercased(), address]
        if isLoopback { names.insert("localhost") }
        return Set(names.map { name in "\(name.contains(":") ? "[\(name)]" : name):\(port)" })
    }

    /// Whether any Host is accepted (listening on every address: the token is the guard).
    private var anyHost: Bool { options.host == "0.0.0.0" || options.host == "::" }

    private func admit(_ request: HTTPRequest) -> HTTPResponse? {
        let host = request.headers[HTTPHeader("Host")] ?? ""
        guard anyHost || hosts.contains(host.lowercased()) else {
            return Self.refusal(403, "the Host header \(host.isEmpty ? "is missing" : "'\(host)' does not name this server")")
        }
        if let origin = request.headers[HTTPHeader("Origin")], origin != "http://" + host {
            return Self.refusal(403, "requests from the page at \(origin) are refused")
        }
        let given = request.query["token"] ?? request.headers[HTTPHeader("X-Devtools-Token")] ?? ""
        guard Self.same(given, token) else {
            return Self.refusal(401, given.isEmpty ? "a token is needed: open the address luastore printed" : "the token is wrong: open the address luastore printed")
        }
        return nil
    }

    /// Compares without stopping at the first difference.
    private static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<min(x.count, y.count) { difference |= x[index] ^ y[index] }
        return difference == 0
    }

    // MARK: Routes

    func handleRequest(_ request: HTTPRequest) async throws -> HTTPResponse {
        if let refusal = admit(request) { return refusal }
        let route = "\(request.method.rawValue) \(request.path)"
        do {
            switch route {
            case "GET /": return page()
            case "GET /api/live": return try await live.accept(request)
            case "GET /api/session": return await session()
            case "GET /api/entries": return try entries(request)
            case "GET /api/entry": return try await entry(request)
            case "GET /api/state": return try await state(request)
            case "GET /api/search": return try await search(request)
            case "GET /api/export": return try await export()
            case "GET /api/export-spec": return try await exportSpec()
            case "GET /api/first": return try await firstEntry(request)
            case "POST /api/replay": return try await replay()
            case "POST /api/import":
                let body = try await Self.body(of: request, limit: options.importLimit)
                let imported = try await DevtoolsImport.load(body, name: request.query["name"] ?? "recording", folder: running.withLock { $0.store.folder })
                browse(imported)
                return await session()
            case "POST /api/back":
                browse(nil)
                return await session()
            case "POST /api/unlock", "POST /api/lock":
                unlocked.withLock { $0 = route.hasSuffix("unlock") }
                await live.broadcastStatus(of: self)
                return await session()
            case "POST /api/dispatch", "POST /api/jump", "POST /api/resume", "POST /api/rewind":
                guard unlocked.withLock({ $0 }) else {
                    return Self.refusal(423, "dispatch and time travel are locked: unlock them on the page first")
                }
                return try await change(route, request)
            default:
                return Self.refusal(404, "no such route: \(route)")
            }
        } catch let failure as Refusal {
            return Self.refusal(failure.status, failure.message)
        } catch let failure as ScriptFailure {
            return Self.refusal(409, "\(failure.error)")
        } catch {
            return Self.refusal(500, "\(route) failed: \(error)")
        }
    }

    /// Shows `imported` (nil: the running app again); the store of a recording browsed before is shut down.
    private func browse(_ imported: Source?) {
        let previous = browsing.withLock { browsing in
            defer { browsing = imported }
            return browsing
        }
        previous?.store.shutdown()
        filters.withLock { $0 = nil }
    }

    /// `body`'s result, or a 503 refusal once `DevtoolsOptions.storeWait` has passed (what `body` asked of the store
    /// still happens, later, and is dropped). For reads only: a change must not be said to have failed and then
    /// take place.
    func promptly<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let storeWait = options.storeWait
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let answered = Protected(false)
            @Sendable func answer(_ result: Result<T, any Error>) {
                guard answered.withLock({ done in defer { done = true }; return !done }) else { return }
                continuation.resume(with: result)
            }
            Task {
                do { answer(.success(try await body())) } catch { answer(.failure(error)) }
            }
            Task {
                try? await Task.sleep(for: storeWait)
                answer(.failure(Refusal(503, "the store is busy reducing actions; ask again in a moment")))
            }
        }
    }

    struct Refusal: Error {
        let status: Int
        let message: String
        init(_ status: Int, _ message: String) {
            self.status = status
            self.message = message
        }
    }

    static func refusal(_ status: Int, _ message: String) -> HTTPResponse {
        var body = #"{"error":"#
        RecordingJSON.quote(message, into: &body)
        body += "}"
        return json(body, status: status)
    }

    /// `value` in a recording's lossless JSON (`null` for what it cannot hold: a number that is not finite).
    static func encoded(_ value: LuaValue) -> String { (try? RecordingJSON.encode(value)) ?? "null" }

    /// Appends `items` separated by commas, each written by `write` (the brackets are the caller's).
    static func appendList<S: Sequence>(_ items: S, to body: inout String, _ write: (S.Element, inout String) -> Void) {
        var first = true
        for item in items {
            if !first { body += "," }
            first = false
            write(item, &body)
        }
    }

    static func json(_ body: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(statusCode: HTTPStatusCode(status, phrase: phrase(status)),
                     headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store",
                               HTTPHeader("X-Content-Type-Options"): "nosniff"],
                     body: Data(body.utf8))
    }

    private static func phrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 423: "Locked"
        case 503: "Service Unavailable"
        case 500: "Internal Server Error"
        default: "Error"
        }
    }

    private func page() -> HTTPResponse {
        HTTPResponse(statusCode: .ok,
                     headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                               HTTPHeader("Referrer-Policy"): "no-referrer",
                               HTTPHeader("X-Content-Type-Options"): "nosniff",
                               HTTPHeader("X-Frame-Options"): "DENY",
                               HTTPHeader("Content-Security-Policy"):
                                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'"],
                     body: Data(DevtoolsPage.html.utf8))
    }

    // MARK: Reading

    /// What the store's thread says of its history and of time travel, as last heard: the session is answered
    /// with it when the store is too busy to say now.
    private let lastStatus = Protected<(history: (kept: [UInt64], at: UInt64?), travel: (traveling: Bool, held: Int))>((([], nil), (false, 0)))

    private func session() async -> HTTPResponse {
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
            if let divergence = imported.divergence {
                body += #","divergence":{"seq":\#(divergence.sequence),"path":"#
                RecordingJSON.quote(divergence.path, into: &body)
                body += "}"
            }
            body += "}"
        } else {
            body += #","imported":null"#
        }
        body += #","types":["#
        Self.appendList(journal.types, to: &body) { type, body in
            RecordingJSON.quote(type, into: &body)
        }
        body += "]}"
        return Self.json(body)
    }

    private func entries(_ request: HTTPRequest) throws -> HTTPResponse {
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
    private func matching(_ filter: EntryFilter) -> [UInt64] {
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

    private func sequence(_ request: HTTPRequest, _ name: String = "seq") throws -> UInt64 {
        guard let text = request.query[name], let value = UInt64(text) else {
            throw Refusal(400, "'\(name)' must be an entry's sequence number")
        }
        return value
    }

    private func entry(_ request: HTTPRequest) async throws -> HTTPResponse {
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
    private func point(_ request: HTTPRequest) throws -> (sequence: UInt64?, before: Bool) {
        let sequence: UInt64? = request.query["seq"] == nil ? nil : try self.sequence(request)
        return (sequence, request.query["before"] == "1")
    }

    private func state(_ request: HTTPRequest) async throws -> HTTPResponse {
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

    private func search(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (sequence, _) = try point(request)
        guard let text = request.query["q"], !text.isEmpty else { throw Refusal(400, "'q' must be the text to look for") }
        let store = self.store
        let matches = try await promptly { try await store.search(text, at: sequence, limit: 200) }
        var body = #"{"matches":["#
        Self.appendList(matches, to: &body) { match, body in
            body += #"{"path":"#
            body += Self.encoded(.table(LuaTable(array: match.path.map(\.value))))
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
    private func firstEntry(_ request: HTTPRequest) async throws -> HTTPResponse {
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

    private func replay() async throws -> HTTPResponse {
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
    private func export() async throws -> HTTPResponse {
        let bounds = journal.bounds
        let position = await store.journalPosition()
        let header: (state: LuaValue, scripts: String, schemaVersion: Int64, sequence: UInt64)
        if bounds.count > 0, let first = journal.entry(bounds.first) {
            header = (try await DevtoolsReplay.stateBefore(bounds.first, of: store), first.entry.scripts, position.schemaVersion, bounds.first - 1)
        } else {
            header = try await store.journalStart()
        }
        var text = try RecordingLine.header(app: options.app, start: header) + "\n"
        var offset = 0
        while true {
            let batch = journal.entries(offset: offset, limit: 4096)
            if batch.isEmpty { break }
            for item in batch {
                text += try RecordingLine.entry(item.entry)
                text += "\n"
            }
            offset += batch.count
        }
        return HTTPResponse(statusCode: .ok,
                            headers: [.contentType: "application/x-ndjson", .cacheControl: "no-store",
                                      .contentDisposition: "attachment; filename=\"\(options.app).luastore-recording.jsonl\""],
                            body: Data(text.utf8))
    }

    /// The kept session as a busted spec (`luastore test` runs it; docs/cli.md, "A session as a spec"): from the state
    /// before the oldest kept entry, one test per kept action, with the props after each where they changed (as
    /// the history gives them; without props when it no longer holds those entries).
    private func exportSpec() async throws -> HTTPResponse {
        let bounds = journal.bounds
        var entries: [JournalEntry] = []
        var offset = 0
        while true {
            let batch = journal.entries(offset: offset, limit: 4096)
            if batch.isEmpty { break }
            entries += batch.map(\.entry)
            offset += batch.count
        }
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

    // MARK: Changing (unlocked only)

    private func change(_ route: String, _ request: HTTPRequest) async throws -> HTTPResponse {
        switch route {
        case "POST /api/dispatch":
            let body = try await Self.body(of: request, limit: options.bodyLimit)
            let action: LuaValue
            do {
                action = try LuaJSON.parse(String(decoding: body, as: UTF8.self))
            } catch {
                throw Refusal(400, "the action is \(error)")
            }
            guard action["type"].string != nil else { throw Refusal(400, "an action must be a JSON object with a string \"type\"") }
            store.dispatch(action)
            await store.barrier()
        case "POST /api/jump":
            try await store.jump(to: try sequence(request))
        case "POST /api/rewind":
            try await store.rewind(to: try sequence(request))
        default:
            await store.resume()
        }
        await live.broadcastStatus(of: self)
        if await store.travelStatus().traveling { watchHeld() }
        return await session()
    }

    private let watchingHeld = Protected(false)

    /// While the store shows a past point, actions that arrive are held, which the journal does not hear of:
    /// pages are told of the count as it grows (looked at every 100 ms, only while traveling).
    private func watchHeld() {
        guard watchingHeld.withLock({ watching in defer { watching = true }; return !watching }) else { return }
        Task { [weak self] in
            var told = 0
            while let self {
                let status = await self.store.travelStatus()
                guard status.traveling else { break }
                if status.held != told {
                    told = status.held
                    await self.live.broadcastStatus(of: self)
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
            self?.watchingHeld.withLock { $0 = false }
        }
    }

    /// The request's body, refused past `limit` bytes (by its declared length, or as it arrives).
    static func body(of request: HTTPRequest, limit: Int) async throws -> [UInt8] {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw Refusal(413, "the body is \(length) bytes; at most \(limit) are accepted")
        }
        var bytes: [UInt8] = []
        for try await chunk in request.bodySequence {
            bytes.append(contentsOf: chunk)
            if bytes.count > limit { throw Refusal(413, "the body is over \(limit) bytes, the most accepted") }
        }
        return bytes
    }

    /// What a status message says (live).
    func statusJSON() async -> String {
        let travel = await store.travelStatus()
        let history = await store.history()
        return #"{"type":"status","traveling":\#(travel.traveling),"held":\#(travel.held),"at":\#(history.at ?? 0),"unlocked":\#(unlocked.withLock { $0 })}"#
    }
}

/// Which entries the timeline shows: by action type, by text (in the type, the action or the failure), by a
/// path some change touched (at it, above it or below it), failures only.
struct EntryFilter: Equatable {
    var type: String?
    var text: String?
    var path: [LuaKey]?
    var failed = false

    init(_ query: [HTTPRequest.QueryItem]) throws {
        type = query["type"].flatMap { $0.isEmpty ? nil : $0 }
        text = query["text"].flatMap { $0.isEmpty ? nil : $0.lowercased() }
        if let path = query["path"], !path.isEmpty { self.path = try DevtoolsAPI.path(path) }
        failed = query["failed"] == "1"
    }

    var isEmpty: Bool { type == nil && text == nil && path == nil && !failed }

    func admits(_ entry: JournalEntry) -> Bool {
        if failed, entry.failure == nil { return false }
        if let type, entry.action?["type"].string != type { return false }
        if let path {
            guard entry.changes.contains(where: { change in
                let shared = min(change.path.count, path.count)
                return change.path.prefix(shared) == path.prefix(shared)
            }) else { return false }
        }
        if let text {
            let action = entry.action.flatMap { try? RecordingJSON.encode($0) } ?? ""
            let failure = entry.failure.map { "\($0.error)" } ?? ""
            guard action.lowercased().contains(text) || failure.lowercased().contains(text) else { return false }
        }
        return true
    }
}

struct FilterCache {
    var filter: EntryFilter
    var scanned: UInt64
    var matches: [UInt64]
}

/// A timeline row: sequence, kind, type, origin, time, cost, changes, commands, failure, scripts.
enum Summary {
    static func write(_ item: DevtoolsJournal.Kept, into body: inout String) {
        let entry = item.entry
        body += #"{"seq":\#(entry.sequence),"kind":"#
        switch entry.event {
        case .action(let action):
            body += #""action","type":"#
            RecordingJSON.quote(action["type"].string ?? "?", into: &body)
        case .reload(let from, let to):
            body += #""reload","from":\#(from),"to":\#(to)"#
        case .failedReload:
            body += #""failedReload""#
        }
        body += #","origin":"#
        switch entry.origin {
        case .outside: body += #""outside""#
        case .child: body += #""child""#
        case .reload: body += #""reload""#
        case .effect(let kind, let subscription):
            body += #"{"effect":"#
            RecordingJSON.quote(kind, into: &body)
            if let subscription {
                body += #","subscription":"#
                RecordingJSON.quote(subscription, into: &body)
            }
            body += "}"
        }
        let nanoseconds = entry.duration.components.seconds * 1_000_000_000 + entry.duration.components.attoseconds / 1_000_000_000
        body += #","time":\#(Int64(item.time)),"ns":\#(nanoseconds),"changes":\#(entry.changeCount),"commands":\#(entry.commands.count)"#
        if let failure = entry.failure {
            body += #","failure":{"stage":"\#(failure.stage.rawValue)","message":"#
            RecordingJSON.quote(failure.error.message, into: &body)
            if let location = failure.error.location {
                body += #","location":"#
                RecordingJSON.quote(location, into: &body)
            }
            body += "}"
        }
        body += #","scripts":"\#(entry.scripts)"}"#
    }
}
