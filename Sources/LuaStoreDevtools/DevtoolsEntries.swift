import FlyingFox
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

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
        if let text = query["pathText"], !text.isEmpty { // (as a person writes it: the page's filter box)
            guard let keys = LuaPath.parse(text) else {
                throw DevtoolsAPI.Refusal(400, "'\(text)' is not a path (write it as Lua names it, like todos[3].done, or todos.3.done)")
            }
            path = keys
        }
        failed = try DevtoolsAPI.flag(query, "failed")
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
    static func write(_ item: DevtoolsJournal.Kept, into json: inout JSONWriter) {
        let entry = item.entry
        json.object { json in
            json.field("seq", entry.sequence)
            switch entry.event {
            case .action(let action):
                json.field("kind", "action")
                json.field("type", action["type"].string ?? "?")
            case .reload(let from, let to):
                json.field("kind", "reload")
                json.field("from", from)
                json.field("to", to)
            case .failedReload:
                json.field("kind", "failedReload")
            }
            switch entry.origin {
            case .outside: json.field("origin", "outside")
            case .client(let id): json.object("origin") { json in json.field("client", id) }
            case .child: json.field("origin", "child")
            case .reload: json.field("origin", "reload")
            case .effect(let kind, let subscription):
                json.object("origin") { json in
                    json.field("effect", kind)
                    if let subscription { json.field("subscription", subscription) }
                }
            }
            let nanoseconds = entry.duration.components.seconds * 1_000_000_000 + entry.duration.components.attoseconds / 1_000_000_000
            json.field("time", item.time)
            json.field("ns", nanoseconds)
            json.field("changes", entry.changeCount)
            json.field("commands", entry.commands.count)
            if let failure = entry.failure {
                json.object("failure") { json in
                    json.field("stage", failure.stage.rawValue)
                    json.field("message", failure.error.message)
                    if let location = failure.error.location { json.field("location", location) }
                }
            }
            json.field("scripts", entry.scripts)
        }
    }
}
