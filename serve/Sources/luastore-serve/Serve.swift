import ArgumentParser
import Foundation
import LuaKit
import LuaStoreCluster
import LuaStoreCommandLine
import LuaStorePersistence
import LuaStoreScripting
import LuaStoreServer

/// `luastore serve APP --listen HOST:PORT`: one store per key behind HTTP and WebSockets (docs/serve.md).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve an app's stores over HTTP and WebSockets: one durable store per key, created on first use.",
        discussion: """
            Each key (/stores/KEY/…) has its own store, kept in DATA/KEY.db; an idle store is saved and its VM \
            closed, and the next request resumes it. Clients send actions with POST /stores/KEY/actions or over \
            the WebSocket /stores/KEY/live, which also streams every props change (docs/serve.md). SIGTERM or \
            SIGINT: stop taking connections, finish what is in flight, close every store, exit 0. With --cluster, a \
            newer version of the app published to the cluster (luastore publish) is installed into every live store, \
            if a key of --trust signed it (or --allow-unsigned).
            """)

    @Argument(help: "The app: a folder (with app.lua), or a bundle (luastore pack).", completion: .file())
    var app: String

    @OptionGroup var trust: TrustOptions

    @Option(name: .long, help: ArgumentHelp("Where to listen (port 0 picks a free one; the address is printed).", valueName: "host:port"))
    var listen: String = "127.0.0.1:8080"

    @Option(name: .long, help: ArgumentHelp("The folder of the keys' stores (KEY.db each); made if missing.", valueName: "folder"), completion: .directory)
    var data: String

    @Option(name: .customLong("token-secret"), help: ArgumentHelp("Take bearer tokens signed with the secret in this file (`luastore token secret FILE` makes one).", valueName: "file"))
    var tokenSecret: String?

    @Flag(name: .customLong("no-auth"), help: "Serve without tokens: every client may read and dispatch on every key (loopback addresses only).")
    var noAuth = false

    @Option(name: .long, help: ArgumentHelp("Serve this folder's files at / (index.html for /), without a token: a page for the app's clients. Default: the app's own web folder, when it has one.", valueName: "folder"), completion: .directory)
    var web: String?

    @Flag(name: .long, help: "Keep each store's journal for its devtools, opened by GET /stores/KEY/devtools with a token granting devtools on the key.")
    var devtools = false

    @Option(name: .customLong("devtools-host"), help: "The address the devtools listen on (default 127.0.0.1, loopback only).")
    var devtoolsHost = "127.0.0.1"

    @Option(name: .customLong("devtools-keep"), help: "Journal entries each store's devtools keep (and the history time travel reaches).")
    var devtoolsKeep = DevtoolsSettings().keep

    @Option(name: .customLong("idle-seconds"), help: "Hibernate a store left idle this long (no request, no live client).")
    var idleSeconds: Double = 300

    @Option(name: .customLong("persist-sync"), help: "full: an action's outcome is answered once its entry is on disk; batch (default): commits grouped.")
    var persistSync: Durability = .batch

    @Option(name: .customLong("persist-snapshot-every"), help: ArgumentHelp("Write a snapshot of a store's whole state every this many actions (older entries then go; the ids of the latest actions stay in the snapshot).", valueName: "actions"))
    var persistSnapshotEvery = Int(StoreDatabase.defaultSnapshotInterval)

    @Option(name: .long, help: ArgumentHelp("Run as one node of a cluster on this PostgreSQL database: each key's journal lives there, held by one node at a time.", valueName: "postgres://user@host/db"))
    var cluster: String?

    @Option(name: .long, help: ArgumentHelp("This node's name in the cluster (unique; default: the host name and port).", valueName: "name"))
    var node: String?

    @Option(name: .long, help: ArgumentHelp("The address other nodes send this node's clients to (default: http://LISTEN).", valueName: "url"))
    var advertise: String?

    @Option(name: .customLong("lease-seconds"), help: "How long a node's hold on a key lasts without renewal (renewed every third of it).")
    var leaseSeconds: Double = 10

    @Option(name: .customLong("time-budget-ms"), help: ArgumentHelp("Milliseconds a script may run per call (200 by default, or $LUASTORE_TIME_BUDGET_MS).", valueName: "ms"))
    var timeBudget: Double = TimeBudgetDefault.milliseconds

    @Option(name: .customLong("max-message-bytes"), help: "The largest action message or request body taken.")
    var maxMessageBytes = ServerLimits().messageBytes

    @Option(name: .customLong("connection-rate"), help: "Actions a connection may send per second.")
    var connectionRate = ServerLimits().actionsPerConnectionPerSecond

    @Option(name: .customLong("key-rate"), help: "Actions all clients may send to one key per second.")
    var keyRate = ServerLimits().actionsPerKeyPerSecond

    @Option(name: .customLong("connections-per-token"), help: "Live WebSocket connections one token's subject may hold at once.")
    var connectionsPerToken = ServerLimits().connectionsPerSubject

    @Option(name: .customLong("request-head-seconds"), help: "Seconds a connection has to send each request head, whole (from its start, then from the answer before it).")
    var requestHeadSeconds = ServerLimits().headSeconds

    @Option(name: .customLong("max-live-stores"), help: ArgumentHelp("Stores live at once; past it the one used longest ago that nothing uses is hibernated, and a key is refused (503) while every one is in use. Default: what half this machine's memory holds at each store's memory cap (twice it each).", valueName: "count"))
    var maxLiveStores: Int?

    func validate() throws {
        try TimeBudgetDefault.validate()
        guard idleSeconds > 0, idleSeconds.isFinite else { throw ValidationError("--idle-seconds must be a number of seconds > 0") }
        guard timeBudget > 0, timeBudget.isFinite else { throw ValidationError("--time-budget-ms must be a number of milliseconds > 0") }
        guard persistSnapshotEvery >= 1 else { throw ValidationError("--persist-snapshot-every must be at least 1") }
        guard maxMessageBytes >= 64 else { throw ValidationError("--max-message-bytes must be at least 64") }
        if let maxLiveStores, maxLiveStores < 1 { throw ValidationError("--max-live-stores must be at least 1") }
        guard connectionRate >= 1, keyRate >= 1, connectionsPerToken >= 1, requestHeadSeconds >= 1 else {
            throw ValidationError("--connection-rate, --key-rate, --connections-per-token and --request-head-seconds must be at least 1")
        }
        let (host, _) = try address()
        if tokenSecret == nil && !noAuth {
            throw ValidationError("say how clients are let in: --token-secret FILE (bearer tokens), or --no-auth (loopback only)")
        }
        if cluster == nil, node != nil || advertise != nil || leaseSeconds != 10 {
            throw ValidationError("--node, --advertise and --lease-seconds go with --cluster URL")
        }
        guard leaseSeconds >= 1, leaseSeconds.isFinite else { throw ValidationError("--lease-seconds must be at least 1") }
        guard devtoolsKeep >= 1 else { throw ValidationError("--devtools-keep must be at least 1") }
        if !devtools, devtoolsHost != "127.0.0.1" || devtoolsKeep != DevtoolsSettings().keep {
            throw ValidationError("--devtools-host and --devtools-keep go with --devtools")
        }
        if tokenSecret != nil && noAuth { throw ValidationError("--token-secret and --no-auth exclude each other") }
        if noAuth && !Self.isLoopback(host) {
            throw ValidationError("--no-auth serves only on a loopback address (127.0.0.1, ::1, localhost), not \(host): use --token-secret")
        }
    }

    func address() throws -> (host: String, port: Int) {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65_535).contains(port) else {
            throw ValidationError("--listen takes HOST:PORT (a port from 0 to 65535), not \(listen.debugDescription)")
        }
        var host = String(listen[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("--listen takes HOST:PORT: the host is missing") }
        return (host, port)
    }

    /// The folder `--web` names (which must be one), else the app's `web` folder when it has one.
    func webFolder(app: URL) throws -> URL? {
        var isFolder: ObjCBool = false
        guard let web else {
            let own = app.appendingPathComponent("web")
            return FileManager.default.fileExists(atPath: own.path, isDirectory: &isFolder) && isFolder.boolValue ? own : nil
        }
        guard FileManager.default.fileExists(atPath: web, isDirectory: &isFolder), isFolder.boolValue else {
            Console.error("--web: \(web) is not a folder")
            throw ExitCode.unusable
        }
        return URL(fileURLWithPath: web)
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    func run() async throws {
        let (host, port) = try address()
        let source = try AppSource.open(app, trust: trust)
        defer { source.remove() }
        let dataFolder = URL(fileURLWithPath: data)
        do {
            // (With the folder each key's saves go in, `.data/KEY`: made by a key's first save.)
            try FileManager.default.createDirectory(at: dataFolder.appendingPathComponent(".data"), withIntermediateDirectories: true)
        } catch {
            Console.error("cannot make the data folder \(data): \(error.localizedDescription)")
            throw ExitCode.unusable
        }
        var storeOptions = ScriptedStoreOptions(log: { line in Console.error("log: " + line) }, failures: { _ in })
        storeOptions.limits.timeBudget = .microseconds(Int64(timeBudget * 1000))
        storeOptions.storageFolder = dataFolder.appendingPathComponent(".data")
        source.configure(&storeOptions)
        var options = ServerOptions(app: source.folder, dataFolder: dataFolder, store: storeOptions)
        options.durability = persistSync
        options.snapshotInterval = UInt64(persistSnapshotEvery)
        options.idle = .milliseconds(Int64(idleSeconds * 1000))
        options.threads = LuaThreadPool(name: "luastore.serve")
        options.web = try webFolder(app: source.folder)
        do {
            options.trust = try trust.keys()
        } catch {
            Console.error("\(error)")
            throw ExitCode.unusable
        }
        options.allowUnsigned = trust.allowUnsigned
        if devtools {
            var settings = DevtoolsSettings()
            settings.host = devtoolsHost
            settings.keep = devtoolsKeep
            options.devtools = settings
        }
        options.limits.messageBytes = maxMessageBytes
        options.limits.actionsPerConnectionPerSecond = connectionRate
        options.limits.headSeconds = requestHeadSeconds
        options.limits.actionsPerKeyPerSecond = keyRate
        options.limits.connectionsPerSubject = connectionsPerToken
        options.limits.liveStores = maxLiveStores ?? ServerLimits.liveStores(physicalBytes: ProcessInfo.processInfo.physicalMemory,
                                                                              storeBytes: storeOptions.limits.memoryBytes)
        if let tokenSecret {
            do {
                options.tokens = try TokenAuthority(secretFile: tokenSecret)
            } catch {
                Console.error("--token-secret: \(error)")
                throw ExitCode.unusable
            }
        }
        // (A folder's app is checked before the first client comes: it must load.)
        do {
            var probeOptions = storeOptions
            probeOptions.performsEffects = false
            let probe = try await ScriptedStore(app: source.folder, options: probeOptions)
            probe.shutdown()
        } catch {
            Console.error("cannot load \(app): \(error.error) (\(error.stage.rawValue))")
            throw ExitCode.unusable
        }
        if let cluster {
            let name = node ?? "\(ProcessInfo.processInfo.hostName):\(port)"
            let app = source.folder.lastPathComponent, address = advertise ?? "http://\(host):\(port)", leaseSeconds = self.leaseSeconds
            do throws(ClusterFailure) {
                options.cluster = try await Blocking.run { () -> Result<ClusterDatabase, ClusterFailure> in
                    Result { () throws(ClusterFailure) in
                        try ClusterDatabase(url: cluster, app: app, node: name, address: address, leaseSeconds: leaseSeconds)
                    }
                }.get()
            } catch {
                Console.error("--cluster: \(error)")
                throw ExitCode.unusable
            }
        }
        let clusterDatabase = options.cluster
        defer { clusterDatabase?.close() }
        let server = StoreServer(options: options, log: { line in Console.error(line) })
        do {
            try await server.run(host: host, port: port) { [advertise] address in
                if advertise == nil { clusterDatabase?.advertise(address) }
                if let clusterDatabase { DispatchQueue.global().async { try? clusterDatabase.heartbeat() } } // (it blocks)
                Console.out("luastore serve: listening on \(address)")
            }
        } catch {
            Console.error("cannot serve on \(listen): \(error)")
            throw ExitCode.unusable
        }
        Console.error("luastore serve: stopped; every store was closed")
    }
}

/// `luastore token`: make a server's secret, and bearer tokens signed with it.
struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make the secret `luastore serve --token-secret` takes, and bearer tokens signed with it.",
        subcommands: [Secret.self, Issue.self])

    struct Secret: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Write a new random secret (32 bytes, base64) to FILE, readable by its owner only.")

        @Argument(help: "The file to write; an existing file is not overwritten.")
        var file: String

        func run() throws {
            guard !FileManager.default.fileExists(atPath: file) else {
                Console.error("\(file) exists: a secret is never overwritten (tokens signed with it would stop working)")
                throw ExitCode.unusable
            }
            guard FileManager.default.createFile(atPath: file, contents: Data((TokenAuthority.newSecretText() + "\n").utf8),
                                                 attributes: [.posixPermissions: 0o600]) else {
                Console.error("cannot write \(file)")
                throw ExitCode.unusable
            }
        }
    }

    struct Issue: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a bearer token granting rights on keys.")

        @Option(name: .long, help: ArgumentHelp("The server's secret file.", valueName: "file"))
        var secret: String

        @Option(name: .long, help: "Who the token is for (connections are counted per subject).")
        var subject: String

        @Option(name: .long, help: ArgumentHelp("A key, or a prefix ending in * (repeatable).", valueName: "pattern"))
        var key: [String]

        @Option(name: .long, help: ArgumentHelp("read, dispatch, devtools, separated by commas.", valueName: "rights"))
        var rights: String = "read,dispatch"

        @Option(name: .customLong("expires-in"), help: "Seconds until the token expires (default: never).")
        var expiresIn: Int64?

        func run() throws {
            var granted = Set<AccessGrant.Right>()
            for name in rights.split(separator: ",") {
                guard let right = AccessGrant.Right(rawValue: String(name)) else {
                    throw ValidationError("--rights takes read, dispatch and devtools, not \(String(name).debugDescription)")
                }
                granted.insert(right)
            }
            guard !key.isEmpty else { throw ValidationError("name at least one --key") }
            // (A pattern that could never grant a key is a mistake, said now: not a token that lets nobody in.)
            for pattern in key where pattern != "*" {
                let prefix = pattern.hasSuffix("*") ? String(pattern.dropLast()) : pattern
                if let problem = StoreKey.check(prefix) {
                    throw ValidationError("--key \(pattern.debugDescription) is a key, a key's prefix ending in *, or * alone: \(problem)")
                }
            }
            guard !granted.isEmpty else { throw ValidationError("--rights grants nothing: name read, dispatch or devtools") }
            guard !subject.isEmpty else { throw ValidationError("--subject names who the token is for: it is not empty") }
            if let expiresIn, expiresIn < 1 { throw ValidationError("--expires-in is a number of seconds, at least 1") }
            let authority: TokenAuthority
            do {
                authority = try TokenAuthority(secretFile: secret)
            } catch {
                Console.error("--secret: \(error)")
                throw ExitCode.unusable
            }
            let expires = expiresIn.map { Int64(Date().timeIntervalSince1970) + $0 }
            Console.out(authority.issue(AccessGrant(subject: subject, keys: key, rights: granted, expires: expires)))
        }
    }
}

