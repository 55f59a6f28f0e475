import Foundation
import LuaKit
import LuaStoreBundles
import LuaStoreCluster
import LuaStorePersistence
import LuaStoreScripting

/// How `luastore serve` (``StoreServer``) runs its stores.
public struct ServerOptions: Sendable {
    /// The app every key's store runs (a folder with `app.lua`).
    public var app: URL
    /// Where each key's durable store lives: `FOLDER/KEY.db` (a `StoreDatabase`).
    public var dataFolder: URL
    /// How each key's store commits (`full`: an action's outcome is answered only once its entry is on disk).
    public var durability: Durability = .batch
    public var snapshotInterval: UInt64 = StoreDatabase.defaultSnapshotInterval
    /// A store left without actions, readers and live clients this long is saved and its VM closed; the next
    /// request resumes it from its file.
    public var idle: Duration = .seconds(300)
    /// Bearer tokens: nil serves without authentication (only on a loopback address).
    public var tokens: TokenAuthority?
    public var limits = ServerLimits()
    /// The options each key's store starts from (its persistence and journal are set by the server).
    public var store: ScriptedStoreOptions
    /// The cluster this node is one of (`--cluster`): each key's journal lives there, under a lease only one node
    /// holds at a time; nil keeps each key's journal in `DATA/KEY.db`.
    public var cluster: ClusterDatabase?
    /// Where each store's VM runs: a pool shared by all keys (so 10,000 stores are not 10,000 threads).
    public var threads: LuaThreadPool?
    /// The keys whose signatures make a bundle published to the cluster (`luastore publish`) one this node
    /// installs, and whether an unsigned one is taken (never one whose files differ from its digests).
    public var trust: [BundleKeys.Trusted] = []
    public var allowUnsigned = false
    /// Each key's devtools, opened by `GET /stores/KEY/devtools` with a token granting `devtools` (nil: off).
    public var devtools: DevtoolsSettings?
    /// A folder whose files are served at `/` (`index.html` for a folder's path), without a token: the app's
    /// page for its clients. Nil serves no files.
    public var web: URL?

    public init(app: URL, dataFolder: URL, store: ScriptedStoreOptions = ScriptedStoreOptions()) {
        self.app = app
        self.dataFolder = dataFolder
        self.store = store
    }
}

/// The devtools of a served key's store (`serve --devtools`): started when first asked for, on `host` and a port of
/// their own with a token of their own (docs/devtools.md), stopped when the store hibernates.
public struct DevtoolsSettings: Sendable {
    /// The address they listen on (loopback unless said otherwise: the page's address, its token, is the guard).
    public var host = "127.0.0.1"
    /// Journal entries each store's devtools keep (and its history for time travel), and about how much memory.
    public var keep = 10_000
    public var keepBytes = 16 << 20

    public init() {}
}

/// What one client may ask of the server.
public struct ServerLimits: Sendable {
    /// The largest request body or WebSocket message taken, in bytes (a larger one: 413, or the socket closed
    /// with 1009).
    public var messageBytes = 64 * 1024
    /// Actions one connection may send per second (a token bucket of this size, refilled at this rate); more are
    /// answered `refused` with "rate limit".
    public var actionsPerConnectionPerSecond = 1_000
    /// Actions all clients together may send to one key per second.
    public var actionsPerKeyPerSecond = 5_000
    /// Actions one live connection may have in flight: sent, not yet answered. They are reduced in the order they
    /// came and answered in that order; the next message is read once one of them is answered.
    public var actionsInFlightPerConnection = 16
    /// Live connections one token's subject may hold at once (more are closed with 1008).
    public var connectionsPerSubject = 64
    /// Action ids remembered per key: a resent id is answered with its first outcome, never applied again.
    public var rememberedIds = 10_000
    /// Props changes kept per key for clients reconnecting with `?since=SEQ` (older: they get a snapshot).
    public var keptChanges = 1_024
    /// Seconds a connection has to send each request head, whole — from its start, then from the answer before it (it
    /// is closed after).
    public var headSeconds = 10
    /// Seconds a connection may stay open between two requests (a WebSocket is kept alive by its pings instead).
    public var idleConnectionSeconds = 60
    /// Stores live at once (opening or open). A key's store beyond it takes the place of the live store used longest
    /// ago that nothing uses now (hibernated: saved, its VM closed); when every live store is in use, the key is
    /// refused for now (503, WebSocket 1013: try again). Each VM is capped (`LuaLimits.memoryBytes`) and a live
    /// store holds up to about twice its cap: this bounds the server's memory, whatever its clients ask for.
    public var liveStores = 10_000

    /// Live stores a machine with `physicalBytes` of memory holds when each may reach `storeBytes` (twice that,
    /// with what beside the VM holds its state: its encodings, its database's pages): half the memory, at least 16.
    public static func liveStores(physicalBytes: UInt64, storeBytes: Int) -> Int {
        max(16, Int(min(physicalBytes / 2 / UInt64(max(1, 2 * storeBytes)), 1_000_000)))
    }

    public init() {}
}

/// A store's key: 1–128 of `A–Z a–z 0–9 . _ -`, not starting with `.` — so that `KEY.db` is always a file in
/// the data folder, never a path out of it.
public enum StoreKey {
    public static func check(_ key: String) -> String? {
        guard !key.isEmpty, key.utf8.count <= 128 else { return "a store key has 1 to 128 characters" }
        guard !key.hasPrefix(".") else { return "a store key does not start with '.'" }
        let allowed = key.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
        return allowed ? nil : "a store key holds only letters, digits, '.', '_' and '-'"
    }
}
