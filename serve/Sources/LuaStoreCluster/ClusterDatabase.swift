import Foundation
import Logging
import LuaStoreConcurrency
import LuaStoreScripting
import PostgresNIO

/// A cluster's PostgreSQL database (`luastore serve --cluster postgres://…`): the nodes, who holds each key (a
/// lease with a fencing epoch), and each key's journal and snapshot — the same entry lines as a durable store's
/// SQLite file (docs/serve.md, "Many machines").
///
/// Its calls block their thread (they are made from the journals' writer threads and from the server's own
/// queue): each runs on one of a few connections ("lanes"), one transaction at a time per lane.
public final class ClusterDatabase: Sendable {
    /// The database's format (the `luastore_meta` row `version`).
    public static let formatVersion = 1

    public let url: String
    /// This node's name (unique in the cluster) and the address other nodes forward its keys' clients to.
    public let node: String
    /// Where other nodes send this node's keys' clients (`advertise(_:)` sets it once the port is known).
    public var address: String { advertised.withLock { $0 } }
    private let advertised: Protected<String>
    /// How long a lease lasts without renewal.
    public let leaseSeconds: Double
    let lanes: [Lane]
    let display: String

    /// Connects (`lanes` connections), makes the tables if they are missing, and checks that the database is a
    /// cluster of `app` (another app's, or a newer format, is refused in words). A nil `app` only reads: the
    /// database must be a cluster already, of any app (`luastore export`); nothing is made.
    public init(url: String, app: String?, node: String, address: String, leaseSeconds: Double = 10, lanes count: Int = 4)
        throws(ClusterFailure) {
        let configuration = try Self.configuration(url)
        self.url = url
        self.node = node
        advertised = Protected(address)
        self.leaseSeconds = leaseSeconds
        display = Self.redacted(url)
        var lanes: [Lane] = []
        for index in 0..<max(1, count) {
            do {
                lanes.append(try Lane(configuration: configuration, id: index, display: display))
            } catch {
                for lane in lanes { lane.close() } // (a connection is closed before it goes)
                throw error
            }
        }
        self.lanes = lanes
        do {
            try prepare(app: app)
        } catch {
            close()
            throw error
        }
    }

    /// Closes the connections.
    public func close() {
        for lane in lanes { lane.close() }
    }

    // MARK: Schema

    private func prepare(app: String?) throws(ClusterFailure) {
        guard let app else {
            let meta = try lanes[0].perform { connection, logger in
                let tables = try connection.query("SELECT to_regclass('luastore_meta') IS NOT NULL", logger: logger).wait()
                guard let row = tables.first, try row.decode(Bool.self) else { return [String: String]() }
                return try Self.meta(connection, logger)
            }
            try check(meta)
            return
        }
        try lanes[0].perform { connection, logger in
            // (Nodes starting together: one makes the tables, the others wait for it.)
            _ = try connection.query("SELECT pg_advisory_lock(7761320113)", logger: logger).wait()
            defer { _ = try? connection.query("SELECT pg_advisory_unlock(7761320113)", logger: logger).wait() }
            for statement in [
                "CREATE TABLE IF NOT EXISTS luastore_meta (name text PRIMARY KEY, value text NOT NULL)",
                "CREATE TABLE IF NOT EXISTS luastore_nodes (name text PRIMARY KEY, address text NOT NULL, heartbeat timestamptz NOT NULL)",
                "CREATE TABLE IF NOT EXISTS luastore_leases (key text PRIMARY KEY, node text NOT NULL, epoch bigint NOT NULL, expires timestamptz NOT NULL)",
                "CREATE TABLE IF NOT EXISTS luastore_snapshots (key text PRIMARY KEY, seq bigint NOT NULL, header bytea NOT NULL)",
                "CREATE TABLE IF NOT EXISTS luastore_entries (key text NOT NULL, seq bigint NOT NULL, first bigint NOT NULL, lines bytea NOT NULL, PRIMARY KEY (key, seq))",
                PostgresQuery(unsafeSQL: Self.appendFunction),
                PostgresQuery(unsafeSQL: Self.bundlesTable),
            ] as [PostgresQuery] {
                _ = try connection.query(statement, logger: logger).wait()
            }
            let version = String(Self.formatVersion)
            _ = try connection.query("""
                INSERT INTO luastore_meta (name, value) VALUES ('format', 'luastore-cluster'), ('version', \(version)), ('app', \(app))
                ON CONFLICT (name) DO NOTHING
                """, logger: logger).wait()
            let meta = try Self.meta(connection, logger)
            try check(meta)
            guard meta["app"] == app else {
                throw ClusterFailure("\(display) is the cluster of app \(meta["app"] ?? "?"), not \(app): use another database")
            }
        }
    }

    private static func meta(_ connection: PostgresConnection, _ logger: Logger) throws -> [String: String] {
        var meta: [String: String] = [:]
        for row in try connection.query("SELECT name, value FROM luastore_meta", logger: logger).wait() {
            let (name, value) = try row.decode((String, String).self)
            meta[name] = value
        }
        return meta
    }

    private func check(_ meta: [String: String]) throws(ClusterFailure) {
        guard !meta.isEmpty else {
            throw ClusterFailure("\(display) is not a LuaStore cluster (it has no luastore_meta table): no node has served from it")
        }
        guard meta["format"] == "luastore-cluster" else {
            throw ClusterFailure("\(display) holds a luastore_meta table that is not a LuaStore cluster's: it was left as it is")
        }
        guard let held = meta["version"].flatMap(Int.init), held <= Self.formatVersion else {
            throw ClusterFailure("\(display) was written by a newer LuaStore (cluster format \(meta["version"] ?? "?"), this one writes \(Self.formatVersion)): run that LuaStore")
        }
    }

    // MARK: Published bundles

    /// Every bundle `luastore publish` stored, numbered in the order they came (a table of its own name: nodes of
    /// format 1 without it never read it).
    static let bundlesTable = """
        CREATE TABLE IF NOT EXISTS luastore_bundles (number bigserial PRIMARY KEY, name text NOT NULL, version text NOT NULL,
          bundle bytea NOT NULL, published timestamptz NOT NULL DEFAULT now())
        """

    /// A bundle published to the cluster: its number (greater for a later one), the app and version its manifest
    /// names, and its bytes (verified by each node with its own trusted keys before anything of it runs).
    public struct Publication: Sendable {
        public let number: Int64
        public let name: String
        public let version: String
        public let bundle: Data
    }

    /// Stores a bundle for every node (`luastore publish`); its number. Refused when the latest publication is not
    /// older, by `newer` (which sees that one's version): versions only go up, as an install does.
    public func publish(_ bundle: Data, name: String, version: String,
                        newer: (_ latestName: String, _ latestVersion: String) -> String?) throws(ClusterFailure) -> Int64 {
        try lanes[0].perform { connection, logger in
            _ = try connection.query(PostgresQuery(unsafeSQL: Self.bundlesTable), logger: logger).wait()
            _ = try connection.query("BEGIN", logger: logger).wait()
            do {
                _ = try connection.query("LOCK TABLE luastore_bundles IN EXCLUSIVE MODE", logger: logger).wait()
                let latest = try connection.query("SELECT name, version FROM luastore_bundles ORDER BY number DESC LIMIT 1", logger: logger).wait()
                if let row = latest.first {
                    let (latestName, latestVersion) = try row.decode((String, String).self)
                    if let refusal = newer(latestName, latestVersion) { throw ClusterFailure(refusal) }
                }
                let rows = try connection.query("""
                    INSERT INTO luastore_bundles (name, version, bundle) VALUES (\(name), \(version), \(ByteBuffer(bytes: bundle)))
                    RETURNING number
                    """, logger: logger).wait()
                _ = try connection.query("COMMIT", logger: logger).wait()
                guard let row = rows.first else { throw ClusterFailure("the database did not number the bundle") }
                return try row.decode(Int64.self)
            } catch {
                _ = try? connection.query("ROLLBACK", logger: logger).wait()
                throw error
            }
        }
    }

    /// The publications later than `number`, the latest first (or, `ascending`, the earliest; at most `limit`).
    public func publications(after number: Int64, ascending: Bool = false, limit: Int = 16) throws(ClusterFailure) -> [Publication] {
        try lanes[0].perform { connection, logger in
            let query: PostgresQuery = ascending
                ? "SELECT number, name, version, bundle FROM luastore_bundles WHERE number > \(number) ORDER BY number ASC LIMIT \(limit)"
                : "SELECT number, name, version, bundle FROM luastore_bundles WHERE number > \(number) ORDER BY number DESC LIMIT \(limit)"
            let rows = try connection.query(query, logger: logger).wait()
            return try rows.map { row in
                let (number, name, version, bytes) = try row.decode((Int64, String, String, ByteBuffer).self)
                return Publication(number: number, name: name, version: version, bundle: Data(bytes.readableBytesView))
            }
        }
    }

    // MARK: Journals as recordings

    /// `key`'s journal as a recording `luastore replay` reads (docs/recordings.md): its latest snapshot's line — a
    /// recording's header, at the snapshot's entry — then the lines of every entry after it, read in one statement
    /// (so as one moment of the database, while nodes write). Nil when the database holds nothing of `key`.
    public func recording(of key: String) throws(ClusterFailure) -> Data? {
        try lanes[lane(of: key)].perform { connection, logger in
            let rows = try connection.query("""
                SELECT 0, seq, header FROM luastore_snapshots WHERE key = \(key)
                UNION ALL
                SELECT 1, e.seq, e.lines FROM luastore_entries e JOIN luastore_snapshots s ON s.key = e.key
                WHERE e.key = \(key) AND e.seq > s.seq
                ORDER BY 1, 2
                """, logger: logger).wait()
            var recording = Data()
            for row in rows {
                let (_, _, bytes) = try row.decode((Int32, Int64, ByteBuffer).self)
                recording.append(contentsOf: bytes.readableBytesView)
                recording.append(10)
            }
            return recording.isEmpty ? nil : recording
        }
    }

    /// The SQLSTATE of a journal write refused because another node holds the key now (`luastore_append`).
    static let fencedState = "LS409"

    /// A journal's commit in one statement, so in one round trip (`PostgresJournal`): it locks the key's lease row,
    /// refuses to write unless this node holds it at its epoch (**fencing**), then writes the rows in their order —
    /// an entry replaces the one of its `seq`; a snapshot replaces the key's and
    /// drops the entries it holds. (A function of its own name: nodes of format 1 without it never call it.)
    static let appendFunction = """
        CREATE OR REPLACE FUNCTION luastore_append(p_key text, p_node text, p_epoch bigint, p_seq bigint[], p_first bigint[], p_snapshot boolean[], p_bytes bytea[])
        RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
          holder text;
          held bigint;
        BEGIN
          SELECT node, epoch INTO holder, held FROM luastore_leases WHERE key = p_key FOR UPDATE;
          IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = '\(fencedState)', MESSAGE = 'its lease is gone';
          END IF;
          IF holder <> p_node OR held <> p_epoch THEN
            RAISE EXCEPTION USING ERRCODE = '\(fencedState)', MESSAGE = format(
              'node %s took the key over (epoch %s; this node opened it at %s): this node no longer writes it', holder, held, p_epoch);
          END IF;
          FOR i IN 1 .. coalesce(array_length(p_seq, 1), 0) LOOP
            IF p_snapshot[i] THEN
              INSERT INTO luastore_snapshots (key, seq, header) VALUES (p_key, p_seq[i], p_bytes[i])
                ON CONFLICT (key) DO UPDATE SET seq = EXCLUDED.seq, header = EXCLUDED.header;
              DELETE FROM luastore_entries WHERE key = p_key AND seq <= p_seq[i];
            ELSE
              INSERT INTO luastore_entries (key, seq, first, lines) VALUES (p_key, p_seq[i], p_first[i], p_bytes[i])
                ON CONFLICT (key, seq) DO UPDATE SET first = EXCLUDED.first, lines = EXCLUDED.lines;
            END IF;
          END LOOP;
        END
        $$
        """

    // MARK: Nodes and leases

    /// Sets the address other nodes send this node's keys' clients to.
    public func advertise(_ address: String) {
        advertised.withLock { $0 = address }
    }

    /// Says this node is alive, at its address.
    public func heartbeat() throws(ClusterFailure) {
        let address = self.address
        _ = try lanes[0].perform { connection, logger in
            _ = try connection.query("""
                INSERT INTO luastore_nodes (name, address, heartbeat) VALUES (\(node), \(address), now())
                ON CONFLICT (name) DO UPDATE SET address = EXCLUDED.address, heartbeat = now()
                """, logger: logger).wait()
        }
    }

    /// Who holds a key.
    public struct Holder: Sendable, Equatable {
        public var node: String
        public var address: String?
        public var epoch: Int64
    }

    /// What asking for a key's lease gave.
    public enum Acquired: Sendable, Equatable {
        /// This node holds it now, at this epoch.
        case taken(epoch: Int64)
        /// Another node holds it.
        case heldBy(Holder)
    }

    /// Takes `key`'s lease when it is free, expired, or this node's (its epoch then grows: whoever held it before
    /// can no longer write); the new epoch — or who holds it.
    public func acquire(_ key: String) throws(ClusterFailure) -> Acquired {
        try lanes[lane(of: key)].perform { connection, logger in
            let taken = try connection.query("""
                INSERT INTO luastore_leases AS l (key, node, epoch, expires) VALUES (\(key), \(node), 1, now() + make_interval(secs => \(leaseSeconds)))
                ON CONFLICT (key) DO UPDATE SET node = EXCLUDED.node, epoch = l.epoch + 1, expires = EXCLUDED.expires
                WHERE l.expires <= now() OR l.node = EXCLUDED.node
                RETURNING epoch
                """, logger: logger).wait()
            if let row = taken.first { return .taken(epoch: try row.decode(Int64.self)) }
            let rows = try connection.query("""
                SELECT l.node, n.address, l.epoch FROM luastore_leases l LEFT JOIN luastore_nodes n ON n.name = l.node WHERE l.key = \(key)
                """, logger: logger).wait()
            guard let row = rows.first else { throw ClusterFailure("the lease of key \(key) could be neither taken nor read") }
            let (holder, address, epoch) = try row.decode((String, String?, Int64).self)
            return .heldBy(Holder(node: holder, address: address, epoch: epoch))
        }
    }

    /// Renews every live lease this node holds; the keys (and epochs) still held.
    public func renew() throws(ClusterFailure) -> [String: Int64] {
        try lanes[0].perform { connection, logger in
            var held: [String: Int64] = [:]
            for row in try connection.query("""
                UPDATE luastore_leases SET expires = now() + make_interval(secs => \(leaseSeconds))
                WHERE node = \(node) AND expires > now() RETURNING key, epoch
                """, logger: logger).wait() {
                let (key, epoch) = try row.decode((String, Int64).self)
                held[key] = epoch
            }
            return held
        }
    }

    /// Lets `key` go (hibernation, shutdown): another node may take it at once.
    public func release(_ key: String, epoch: Int64) {
        _ = try? lanes[lane(of: key)].perform { connection, logger in
            _ = try connection.query("""
                UPDATE luastore_leases SET expires = now() WHERE key = \(key) AND node = \(node) AND epoch = \(epoch)
                """, logger: logger).wait()
        }
    }

    /// Whether `key` has a store here: a node ever opened it (its lease row) or its journal holds a snapshot.
    public func knows(_ key: String) throws(ClusterFailure) -> Bool {
        try lanes[lane(of: key)].perform { connection, logger in
            let rows = try connection.query("""
                SELECT EXISTS (SELECT 1 FROM luastore_leases WHERE key = \(key)) OR EXISTS (SELECT 1 FROM luastore_snapshots WHERE key = \(key))
                """, logger: logger).wait()
            return try rows.first?.decode(Bool.self) ?? false
        }
    }

    /// Who holds `key` now (nil: nobody, or a lease that expired).
    public func holder(of key: String) throws(ClusterFailure) -> Holder? {
        try lanes[lane(of: key)].perform { connection, logger in
            let rows = try connection.query("""
                SELECT l.node, n.address, l.epoch FROM luastore_leases l LEFT JOIN luastore_nodes n ON n.name = l.node
                WHERE l.key = \(key) AND l.expires > now()
                """, logger: logger).wait()
            guard let row = rows.first else { return nil }
            let (holder, address, epoch) = try row.decode((String, String?, Int64).self)
            return Holder(node: holder, address: address, epoch: epoch)
        }
    }

    func lane(of key: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return Int(hash % UInt64(lanes.count))
    }

    // MARK: Configuration

    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (or `postgresql://`); `?host=/path/to/socket/dir` reaches
    /// a server by its Unix socket.
    static func configuration(_ url: String) throws(ClusterFailure) -> PostgresConnection.Configuration {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
              let user = components.user, !user.isEmpty else {
            throw ClusterFailure("--cluster takes postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, not \(redacted(url))")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !database.isEmpty else { throw ClusterFailure("--cluster names no database: postgres://USER@HOST/DATABASE") }
        if let socketFolder = components.queryItems?.first(where: { $0.name == "host" })?.value {
            let port = components.port ?? 5432
            return PostgresConnection.Configuration(unixSocketPath: "\(socketFolder)/.s.PGSQL.\(port)", username: user,
                                                    password: components.password, database: database)
        }
        guard let host = components.host, !host.isEmpty else { throw ClusterFailure("--cluster names no host") }
        return PostgresConnection.Configuration(host: host, port: components.port ?? 5432, username: user,
                                                password: components.password, database: database, tls: .disable)
    }

    /// The URL without its password (for messages).
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? "the cluster's database"
    }
}

/// Why the cluster's database could not be used, in words.
public struct ClusterFailure: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }

    /// A PostgreSQL error in words: the server's message when it sent one (never the driver's redacted text).
    static func words(_ error: any Error) -> String {
        if let failure = error as? ClusterFailure { return failure.description }
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                let state = error.serverInfo?[.sqlState]
                return message + (state.map { $0 == ClusterDatabase.fencedState ? "" : " (SQLSTATE \($0))" } ?? "")
            }
            switch error.code {
            case .connectionError: return "cannot connect" + (error.underlying.map { ": \($0)" } ?? "")
            case .serverClosedConnection, .clientClosedConnection: return "the connection was closed"
            default: return "\(error.code)"
            }
        }
        return "\(error)"
    }
}

/// One connection to the cluster's database and the serial queue its calls run on. A connection that broke is
/// made anew at the next call.
final class Lane: @unchecked Sendable { // (the connection is used only on `queue`)
    private let configuration: PostgresConnection.Configuration
    private let id: Int
    private let display: String
    private let queue: DispatchQueue
    private var connection: PostgresConnection?
    private let logger = Logger(label: "luastore.cluster", factory: { _ in SwiftLogNoOpLogHandler() })

    init(configuration: PostgresConnection.Configuration, id: Int, display: String) throws(ClusterFailure) {
        self.configuration = configuration
        self.id = id
        self.display = display
        queue = DispatchQueue(label: "luastore.cluster.lane\(id)")
        try perform { _, _ in }
    }

    /// Runs `body` with the lane's connection, on its queue (waiting for the calls before it).
    func perform<T>(_ body: (PostgresConnection, Logger) throws -> T) throws(ClusterFailure) -> T {
        let result: Result<T, ClusterFailure> = queue.sync {
            do {
                let connection = try self.connected()
                return .success(try body(connection, logger))
            } catch {
                if let connection, connection.isClosed { self.connection = nil }
                return .failure(error as? ClusterFailure ?? ClusterFailure("\(display): \(ClusterFailure.words(error))"))
            }
        }
        return try result.get()
    }

    private func connected() throws -> PostgresConnection {
        if let connection, !connection.isClosed { return connection }
        if let connection { try? connection.close().wait() }
        do {
            let made = try PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.any(), configuration: configuration,
                                                      id: id, logger: logger).wait()
            // A node paused in a transaction (SIGSTOP) must not hold a key's lease row forever.
            _ = try made.query("SET idle_in_transaction_session_timeout = '5s'", logger: logger).wait()
            _ = try made.query("SET lock_timeout = '15s'", logger: logger).wait()
            connection = made
            return made
        } catch {
            throw ClusterFailure("cannot connect to \(display): \(ClusterFailure.words(error))")
        }
    }

    func close() {
        queue.sync {
            if let connection { try? connection.close().wait() }
            connection = nil
        }
    }
}
