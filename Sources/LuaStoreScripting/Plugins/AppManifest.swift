import Foundation
import LuaKit
import LuaStoreContract
import LuaStoreCore

/// An app's manifest, `luastore.json` in its folder (optional for a plain folder): what the app is, which
/// scripting API of the host it needs, and what it may do. With a manifest, an effect it does not declare fails,
/// naming the capability; its budgets apply, capped by the host's. See docs/plugins.md.
///
/// ```json
/// { "name": "fetcher", "version": "1.2.0", "luastore": "^1.0",
///   "capabilities": { "http": ["127.0.0.1:8080", "api.example.com"], "storage": true, "timers": false },
///   "budgets": { "timeMilliseconds": 50, "memoryBytes": 33554432 } }
/// ```
public struct AppManifest: Sendable, Equatable {
    /// The manifest's file name in an app's folder.
    public static let fileName = "luastore.json"
    /// The version of the scripting API this host offers (what a manifest's `luastore` range is checked against):
    /// the app contract, the `luastore` module, the effects and the sandbox, as docs/ describe them.
    public static let scriptingAPI = SemanticVersion(1, 0, 0)

    /// What the app may do beyond computing.
    public struct Capabilities: Sendable, Equatable {
        /// The hosts `http` effects may reach: `host` (any port) or `host:port` (`[::1]:8080` for IPv6).
        public var http: [String] = []
        /// Whether `save` and `load` may be used.
        public var storage = false
        /// Whether `delay` and `timer` may be used.
        public var timers = false

        /// Capabilities of the hosts `http` may reach and whether storage and timers may be used; by default none.
        public init(http: [String] = [], storage: Bool = false, timers: Bool = false) {
            self.http = http
            self.storage = storage
            self.timers = timers
        }
    }

    /// Limits of the app's own, capped by the host's (`ScriptedStoreOptions.limits`).
    public struct Budgets: Sendable, Equatable {
        /// Time per call of the app (a reducer, props, …).
        public var time: Duration?
        /// The VM's memory.
        public var memoryBytes: Int?

        /// Budgets of `time` per call and `memoryBytes` for the VM; nil leaves the host's limit.
        public init(time: Duration? = nil, memoryBytes: Int? = nil) {
            self.time = time
            self.memoryBytes = memoryBytes
        }
    }

    /// A plugin the app mounts under a key of its state (docs/plugins.md, "Mounts").
    public struct Mount: Sendable, Equatable {
        /// The key of the state the plugin's slice lies under (a Lua identifier).
        public var key: String
        /// The plugin: a folder with its own manifest, or a bundle, relative to the app's folder.
        public var path: String
        /// Other mounts' keys whose slices the plugin reads (read-only), in the order its `reduce` gets them.
        public var reads: [String]

        /// The plugin at `path`, mounted under `key`, reading the slices of the mounts `reads` names.
        public init(key: String, path: String, reads: [String] = []) {
            self.key = key
            self.path = path
            self.reads = reads
        }
    }

    /// What the app is called; a parsed manifest's is a plain name (`isPlainName`).
    public var name: String
    /// The app's own version.
    public var version: SemanticVersion
    /// The host API versions it works with (npm-style: `^1.0`, `>=1.2 <2`).
    public var luastore: VersionRange
    /// The module the app is (`app.lua` by default): a `.lua` file in the folder.
    public var main: String
    /// What the app may do beyond computing: an effect it does not declare fails (`refusal(of:)`).
    public var capabilities: Capabilities
    /// The app's own limits, capped by the host's (`capped(_:)`).
    public var budgets: Budgets
    /// What the app is, in words for people; nil when the manifest says nothing.
    public var description: String?
    /// The plugins the app mounts, in the order each action reaches them (by key).
    public var mounts: [Mount] = []
    /// Whether the app's globals are strict, as under Lua's `strict.lua` (`"strictGlobals": true`): a function that
    /// reads a global nobody set, or assigns a new one, fails naming it. Off by default: globals are Lua's.
    public var strictGlobals = false

    /// A manifest of the given fields, with no mounts and globals not strict (set `mounts` and `strictGlobals` after).
    public init(name: String, version: SemanticVersion, luastore: VersionRange, main: String = "app.lua",
                capabilities: Capabilities = Capabilities(), budgets: Budgets = Budgets(), description: String? = nil) {
        self.name = name
        self.version = version
        self.luastore = luastore
        self.main = main
        self.capabilities = capabilities
        self.budgets = budgets
        self.description = description
    }

    /// Whether `name` is a plain app name: ASCII letters, digits, `-`, `_` and `.`, at most 64, starting with a letter
    /// or a digit, no `..` — so it is one plain component of a path wherever it is used as one (never `.`, `..`, a
    /// hidden file, an option, a separator).
    public static func isPlainName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.utf8.count <= 64, !name.contains("..") else { return false }
        guard first.isASCII, first.properties.isAlphabetic || ("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-_.".unicodeScalars.contains(scalar))
        }
    }

    /// The fields a manifest may have at its top (`lua/luastore.schema.json` says the same, for editors); parsing
    /// refuses any other, naming it.
    public static let fields = ["name", "version", "luastore", "main", "capabilities", "budgets", "description", "mounts", "strictGlobals"]
    /// The fields of a mount written as an object (`{"path": …, "reads": […]}`).
    public static let mountFields = ["path", "reads"]
    /// The fields of `capabilities`.
    public static let capabilityFields = ["http", "storage", "timers"]
    /// The fields of `budgets` (`timeMilliseconds` becomes `Budgets.time`).
    public static let budgetFields = ["timeMilliseconds", "memoryBytes"]

    /// The manifest in `folder`, or nil when it has none; a manifest that is not valid is an error naming the
    /// field and what is wrong.
    public static func load(folder: URL) throws(ManifestFailure) -> AppManifest? {
        guard FileManager.default.fileExists(atPath: folder.appendingPathComponent(fileName).path) else { return nil }
        guard let file = AppFiles.inside(fileName, of: folder) else {
            throw ManifestFailure("leads outside the app's folder (a symbolic link): the manifest is a file of the app's own")
        }
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw ManifestFailure("cannot be read")
        }
        return try parse(data)
    }

    /// Parses a manifest's JSON.
    public static func parse(_ data: Data) throws(ManifestFailure) -> AppManifest {
        let document: JSONValue
        do {
            document = try JSONValue(parsing: data)
        } catch {
            throw ManifestFailure("is not valid JSON")
        }
        guard case .object(let fields) = document else { throw ManifestFailure("must be a JSON object") }
        try unknown(in: fields, known: Self.fields, at: "")
        func text(_ name: String, required: Bool) throws(ManifestFailure) -> String? {
            guard let value = fields[name] else {
                if required { throw ManifestFailure("has no '\(name)' (it needs name, version and luastore)") }
                return nil
            }
            guard case .string(let string) = value, !string.isEmpty else { throw ManifestFailure("'\(name)' must be a non-empty string") }
            return string
        }
        let name = try text("name", required: true)!
        guard Self.isPlainName(name) else {
            throw ManifestFailure("'name' must start with a letter or a digit and hold only letters, digits, '-', '_' and single '.' (at most 64), not '\(name)'")
        }
        let versionText = try text("version", required: true)!
        guard let version = SemanticVersion(versionText) else {
            throw ManifestFailure("'version' must be a semantic version like 1.2.0, not '\(versionText)'")
        }
        let rangeText = try text("luastore", required: true)!
        guard let range = VersionRange(rangeText) else {
            throw ManifestFailure("'luastore' must be a range of versions like ^1.0 or >=1.2 <2, not '\(rangeText)'")
        }
        let main = try text("main", required: false) ?? "app.lua"
        guard main.hasSuffix(".lua"), main.count > 4, !main.hasPrefix("/"), !main.split(separator: "/").contains(".."),
              !main.dropLast(4).contains(".") else {
            throw ManifestFailure("'main' must be a .lua file in the app's folder (like app.lua or src/main.lua), not '\(main)'")
        }
        var manifest = AppManifest(name: name, version: version, luastore: range, main: main,
                                   description: try text("description", required: false))
        if let value = fields["strictGlobals"] {
            guard case .bool(let strict) = value else { throw ManifestFailure("'strictGlobals' must be true or false") }
            manifest.strictGlobals = strict
        }
        if let value = fields["capabilities"] {
            guard case .object(let capabilities) = value else { throw ManifestFailure("'capabilities' must be an object") }
            try unknown(in: capabilities, known: capabilityFields, at: "capabilities.")
            if let http = capabilities["http"] {
                var hosts: [String] = []
                if case .array(let items) = http {
                    for item in items {
                        guard case .string(let host) = item, HostRule(host) != nil else { hosts = []; break }
                        hosts.append(host)
                    }
                }
                guard case .array(let items) = http, hosts.count == items.count else {
                    throw ManifestFailure("'capabilities.http' must be a list of \"host\" or \"host:port\" strings")
                }
                manifest.capabilities.http = hosts
            }
            for flag in ["storage", "timers"] {
                guard let value = capabilities[flag] else { continue }
                guard case .bool(let allowed) = value else { throw ManifestFailure("'capabilities.\(flag)' must be true or false") }
                if flag == "storage" { manifest.capabilities.storage = allowed } else { manifest.capabilities.timers = allowed }
            }
        }
        if let value = fields["budgets"] {
            guard case .object(let budgets) = value else { throw ManifestFailure("'budgets' must be an object") }
            try unknown(in: budgets, known: budgetFields, at: "budgets.")
            if let time = budgets["timeMilliseconds"] {
                let milliseconds: Double? = switch time {
                case .integer(let number): Double(number)
                case .number(let number): number
                default: nil
                }
                guard let milliseconds, milliseconds > 0, milliseconds <= 3_600_000 else {
                    throw ManifestFailure("'budgets.timeMilliseconds' must be a number of milliseconds above 0 (at most an hour)")
                }
                manifest.budgets.time = .microseconds(Int64((milliseconds * 1000).rounded()))
            }
            if let memory = budgets["memoryBytes"] {
                guard case .integer(let bytes) = memory, bytes >= 1 << 20 else {
                    throw ManifestFailure("'budgets.memoryBytes' must be a whole number of bytes, at least 1048576 (1 MiB)")
                }
                manifest.budgets.memoryBytes = Int(bytes)
            }
        }
        if let value = fields["mounts"] {
            manifest.mounts = try mounts(value)
        }
        return manifest
    }

    /// `mounts`: `{"cart": "plugins/cart", "chat": {"path": "plugins/chat.lsb", "reads": ["cart"]}}`.
    private static func mounts(_ value: JSONValue) throws(ManifestFailure) -> [Mount] {
        guard case .object(let entries) = value else {
            throw ManifestFailure("'mounts' must be an object: a key of the state -> the plugin's path (or {\"path\": …, \"reads\": […]})")
        }
        var mounts: [Mount] = []
        for key in entries.keys.sorted() {
            guard LuaPath.isIdentifier(key) else {
                throw ManifestFailure("'mounts' key '\(key)' must be a name of the state's (letters, digits and '_', not a Lua keyword)")
            }
            var mount = Mount(key: key, path: "")
            switch entries[key]! {
            case .string(let path): mount.path = path
            case .object(let fields):
                try unknown(in: fields, known: mountFields, at: "mounts.\(key).")
                guard case .string(let path)? = fields["path"] else { throw ManifestFailure("'mounts.\(key).path' must be the plugin's path") }
                mount.path = path
                if let reads = fields["reads"] {
                    guard case .array(let items) = reads else { throw ManifestFailure("'mounts.\(key).reads' must be a list of mounted keys") }
                    for item in items {
                        guard case .string(let other) = item, entries[other] != nil, other != key else {
                            throw ManifestFailure("'mounts.\(key).reads' may name only other mounts (\(entries.keys.filter { $0 != key }.sorted().joined(separator: ", ")))")
                        }
                        mount.reads.append(other)
                    }
                }
            default:
                throw ManifestFailure("'mounts.\(key)' must be the plugin's path or {\"path\": …, \"reads\": […]}")
            }
            guard !mount.path.isEmpty, !mount.path.hasPrefix("/"), !mount.path.split(separator: "/").contains("..") else {
                throw ManifestFailure("'mounts.\(key)' must be a path inside the app's folder, not '\(mount.path)'")
            }
            guard mount.path.split(separator: "/").contains(where: { $0 != "." }) else {
                throw ManifestFailure("'mounts.\(key)' is the app's own folder ('\(mount.path)'): a plugin is a folder or a bundle inside it")
            }
            mounts.append(mount)
        }
        return mounts
    }

    private static func unknown(in fields: [String: JSONValue], known: [String], at prefix: String) throws(ManifestFailure) {
        if let field = fields.keys.sorted().first(where: { !known.contains($0) }) {
            throw ManifestFailure("has an unknown field '\(prefix)\(field)' (the fields are: \(known.map { prefix + $0 }.joined(separator: ", ")))")
        }
    }

    /// Refuses a host whose scripting API is outside the manifest's range, naming both.
    public func checkHost(_ host: SemanticVersion = AppManifest.scriptingAPI) throws(ManifestFailure) {
        guard luastore.contains(host) else {
            throw ManifestFailure("'\(name)' needs the scripting API \(luastore), and this host has \(host) (run a luastore whose API is in that range)")
        }
    }

    /// The limits the app runs with: the host's, lowered to the manifest's budgets.
    public func capped(_ limits: LuaLimits) -> LuaLimits {
        var capped = limits
        if let time = budgets.time, time < capped.timeBudget { capped.timeBudget = time }
        if let bytes = budgets.memoryBytes, bytes < capped.memoryBytes { capped.memoryBytes = bytes }
        return capped
    }

    // MARK: Capabilities

    /// Why the app may not perform `effect` (nil: it may): a capability its manifest does not declare, in words
    /// that say how to declare it.
    public func refusal(of effect: ScriptEffect) -> String? {
        switch effect.kind {
        case "http":
            return refusal(ofHTTPTo: URLComponents(string: effect.payload["url"].string ?? ""))
        case "save", "load":
            return capabilities.storage ? nil
                : "storage (\(effect.kind)) is not a declared capability of '\(name)' (add \"storage\": true to capabilities in luastore.json)"
        case "delay", "timer":
            return capabilities.timers ? nil
                : "timers (\(effect.kind)) are not a declared capability of '\(name)' (add \"timers\": true to capabilities in luastore.json)"
        default:
            return nil
        }
    }

    /// Why the app may not send a request to `url` — its first, or one a server redirects it to (nil: it may).
    public func refusal(ofHTTPTo url: URLComponents?) -> String? {
        let host = url?.host.map { $0.hasPrefix("[") ? String($0.dropFirst().dropLast()) : $0 }?.lowercased() ?? ""
        let port = url?.port ?? (url?.scheme?.lowercased() == "https" ? 443 : 80)
        if capabilities.http.contains(where: { HostRule($0)?.allows(host: host, port: port) == true }) { return nil }
        let shown = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return "http to \(shown) is not a declared capability of '\(name)' (add it to capabilities.http in luastore.json)"
    }
}

/// A `capabilities.http` entry: a host name or address, with a port or any.
struct HostRule: Sendable, Equatable {
    var host: String
    var port: Int?

    init?(_ text: String) {
        var rest = Substring(text.lowercased())
        var port: Int?
        if rest.hasPrefix("[") { // [::1] or [::1]:8080
            guard let close = rest.firstIndex(of: "]") else { return nil }
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()), (1...65535).contains(number) else { return nil }
                port = number
            }
            rest = rest[rest.index(after: rest.startIndex)..<close]
        } else if let colon = rest.lastIndex(of: ":") {
            guard rest.firstIndex(of: ":") == colon, let number = Int(rest[rest.index(after: colon)...]), (1...65535).contains(number) else {
                return nil
            }
            port = number
            rest = rest[..<colon]
        }
        guard !rest.isEmpty, rest.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-.:".contains($0)) }) else { return nil }
        host = String(rest)
        self.port = port
    }

    func allows(host: String, port: Int) -> Bool {
        self.host == host && (self.port == nil || self.port == port)
    }
}

/// Why an app's manifest was refused, in words: the file, then what is wrong.
public struct ManifestFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, worded to follow the file's name (`is not valid JSON`).
    public let reason: String
    public var description: String { "\(AppManifest.fileName) \(reason)" }

    /// A refusal of the manifest for `reason`, worded to follow the file's name.
    public init(_ reason: String) {
        self.reason = reason
    }
}
