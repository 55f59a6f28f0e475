import LuaKit
import LuaStoreCore

/// An effect a script asked for, as data: its kind (`http`, `delay`, `timer`, `log`) and the table that
/// describes it. Validated when it leaves the script, so a malformed description fails at the reducer with a
/// message naming the field.
public struct ScriptEffect: StoreEffect, CustomStringConvertible {
    /// The effect's kind.
    public let kind: EffectKind
    /// The description the script returned.
    public let payload: LuaValue
    /// The order in which the reducer returned this command among all commands of the store (0 for
    /// subscriptions). Not part of equality: it lets effects that must apply in order, such as saves, drop
    /// a late write of older data.
    public internal(set) var sequence: UInt64 = 0

    public static func == (lhs: ScriptEffect, rhs: ScriptEffect) -> Bool {
        lhs.kind == rhs.kind && lhs.payload == rhs.payload
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(payload)
    }

    /// The kinds scripts can ask for.
    public static let kinds: [String] = ["http", "delay", "timer", "log", "save", "load"]

    /// Validates `value` (named `name` in errors, such as `command #2` or `subscription "clock"`).
    public init(validating value: LuaValue, name: String) throws(LuaError) {
        guard let table = value.table else {
            throw LuaError(.runtime, "\(name) must be a table made by luastore.http, delay, timer or log (got a \(value.typeName))")
        }
        guard let kind = table["kind"].string else {
            throw LuaError(.runtime, "\(name): field 'kind' must be a string (one of \(Self.kinds.joined(separator: ", ")))")
        }
        func require(_ field: String, _ type: String, optional: Bool = false) throws(LuaError) {
            let item = table[field]
            if item == .nil, optional { return }
            guard item.typeName == type else {
                throw LuaError(.runtime, "\(name) (\(kind)): field '\(field)' must be a \(type) (got \(item.typeName))")
            }
        }
        func requireAction(_ field: String) throws(LuaError) {
            try require(field, "table")
            guard table[field]["type"].string != nil else {
                throw LuaError(.runtime, "\(name) (\(kind)): field '\(field).type' must be a string")
            }
        }
        switch kind {
        case "http":
            try require("url", "string")
            try require("method", "string", optional: true)
            try require("headers", "table", optional: true)
            try require("body", "string", optional: true)
            try require("timeout", "number", optional: true)
            try require("success", "string")
            try require("failure", "string")
        case "delay":
            try require("seconds", "number")
            try requireAction("action")
        case "timer":
            try require("every", "number")
            guard (table["every"].number ?? 0) > 0 else {
                throw LuaError(.runtime, "\(name) (timer): field 'every' must be positive")
            }
            try requireAction("action")
        case "log":
            try require("message", "string")
        case "save", "load":
            // (Checked here, not only by `luastore.save`: a script may return the command's table itself, and the
            // key names a file in the storage folder.)
            try require("key", "string")
            guard let key = table["key"].string, !key.isEmpty,
                  key.utf8.allSatisfy({ $0 == 95 || $0 == 45 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }) else {
                throw LuaError(.runtime, "\(name) (\(kind)): field 'key' may hold only letters, digits, '_' and '-'")
            }
            if kind == "load" { try require("success", "string") }
        default:
            throw LuaError(.runtime, "\(name): unknown effect kind '\(kind)' (known: \(Self.kinds.joined(separator: ", ")))")
        }
        self.kind = EffectKind(kind)
        self.payload = value
    }

    public var description: String { payload.description }
}

extension ScriptEffect {
    /// The action an `http` command's request (`self`) reports with when it ends with `result`, as the store
    /// makes it for a real request: `{type = <success>, id, status, headers, body, json}` or `{type = <failure>,
    /// id, reason, message, …}` (for effect stand-ins in tests: `ScriptedStoreOptions.effectDoubles`).
    public func httpResult(_ result: Result<URLResponseValue, URLFailure>) -> LuaValue {
        ScriptEffectHandlers.resultAction(for: payload, result)
    }

    /// The request an `http` command asks for, as the store would perform it.
    public var httpRequest: URLRequestEffect { ScriptEffectHandlers.urlRequest(payload) }
}
