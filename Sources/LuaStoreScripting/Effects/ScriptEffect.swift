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
        // A wait (`delay`'s `seconds`, `timer`'s `every`, `http`'s `timeout`): finite, at most `longestWait`, positive
        // (or, `zero`, not negative) — the store makes it a `Duration`, which holds no NaN and no 1e300 seconds.
        func requireWait(_ field: String, zero: Bool = false, optional: Bool = false) throws(LuaError) {
            try require(field, "number", optional: optional)
            guard let seconds = table[field].number else { return }
            guard seconds.isFinite, seconds <= Self.longestWait else {
                throw LuaError(.runtime, "\(name) (\(kind)): field '\(field)' must be a number of seconds up to \(Int(Self.longestWait)) (a year), not \(seconds.isNaN ? "NaN" : seconds.isInfinite ? "inf" : "\(LuaValue.number(seconds))")")
            }
            guard zero ? seconds >= 0 : seconds > 0 else {
                throw LuaError(.runtime, "\(name) (\(kind)): field '\(field)' must \(zero ? "not be negative" : "be positive")")
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
            try requireWait("timeout", optional: true)
            try require("success", "string")
            try require("failure", "string")
        case "delay":
            try requireWait("seconds", zero: true)
            try requireAction("action")
        case "timer":
            try requireWait("every")
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
            // (What a save writes is JSON: a number that is not finite has no JSON, and would fail only as it ran.)
            if kind == "save", let path = Self.nonFinitePath(in: table["value"], at: "value") {
                throw LuaError(.runtime, "\(name) (save): \(path) is not a finite number, which JSON cannot hold")
            }
        default:
            throw LuaError(.runtime, "\(name): unknown effect kind '\(kind)' (known: \(Self.kinds.joined(separator: ", ")))")
        }
        self.kind = EffectKind(kind)
        self.payload = value
    }

    public var description: String { payload.description }

    /// The longest wait a command may ask for, in seconds (a year): `delay`'s `seconds`, `timer`'s `every`,
    /// `http`'s `timeout` (the `luastore` module's constructors check the same, at the script's line).
    public static let longestWait: Double = 31_536_000

    /// Where in `value` (named `path`) a number is NaN or infinite — the first, the sequence in order, then the other
    /// keys as their paths sort, so that the same value is named the same every time —; nil when none is.
    static func nonFinitePath(in value: LuaValue, at path: String) -> String? {
        switch value {
        case .number(let number): return number.isFinite ? nil : path
        case .table(let table):
            for (offset, item) in table.array.enumerated() {
                if let found = nonFinitePath(in: item, at: path + LuaPath.render(.integer(Int64(offset + 1)))) { return found }
            }
            var fields: [(String, LuaValue)] = []
            table.forEachField { key, item in fields.append((LuaPath.render(key), item)) }
            for (step, item) in fields.sorted(by: { $0.0 < $1.0 }) {
                if let found = nonFinitePath(in: item, at: path + step) { return found }
            }
            return nil
        default: return nil
        }
    }
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
