import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import HummingbirdWSClient
import LuaKit
import LuaStoreCluster
import LuaStoreConcurrency
import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import ServiceLifecycle

/// `luastore serve`: one scripted store per key behind HTTP and a WebSocket per client (docs/serve.md).
///
/// ```swift
/// let server = StoreServer(options: ServerOptions(app: appFolder, dataFolder: dataFolder))
/// try await server.run(host: "127.0.0.1", port: 8080) { address in print("listening on \(address)") }
/// ```
public final class StoreServer: Sendable {
    /// How long a WebSocket's peer has to answer a close before its connection is closed anyway.
    static let closeTimeout: Duration = .seconds(2)
    /// How long a graceful shutdown waits for the requests and connections in flight before it cuts them.
    static let shutdownGrace: Duration = .seconds(3)

    let options: ServerOptions
    let host: StoreHost
    let versions: AppVersions
    private let log: @Sendable (String) -> Void
    private let connections = Protected<[String: Int]>([:])
    let metrics = ServerMetrics()

    public init(options: ServerOptions, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.options = options
        self.log = log
        let metrics = self.metrics
        versions = AppVersions(options: options, log: log)
        host = StoreHost(options: options, versions: versions, log: log, metrics: metrics)
    }

    /// Serves until SIGTERM or SIGINT (or the task is cancelled): then it stops taking connections, lets the
    /// requests in flight finish, closes every store (writing what is queued) and returns. `started` hears the
    /// address it listens on (port 0 picks a free one).
    public func run(host address: String, port: Int, started: @escaping @Sendable (String) -> Void = { _ in }) async throws {
        var logger = Logger(label: "luastore.serve")
        logger.logLevel = .error
        let router = Router(context: ServeRequestContext.self)
        router.middlewares.add(MethodGuard())
        router.middlewares.add(PathGuard())
        if options.tokens == nil { router.middlewares.add(LocalPageGuard(listening: address.lowercased())) }
        if let web = options.web {
            // (Only what no route answers: a file of `web`, never one out of it — `WebFolder`.)
            router.middlewares.add(FileMiddleware(fileProvider: WebFolder(web, logger: logger), searchForIndexHtml: true))
        }
        routes(router)
        // (A node runs the cluster's latest published version from its start.)
        if let cluster = options.cluster { _ = await versions.adoptLatest(from: cluster) }
        defer { versions.removeUnpacked() }
        let sweeper = Sweeper(host: host, versions: versions, every: Self.sweepInterval(options.idle), cluster: options.cluster, log: log)
        let app = Application(
            router: router,
            server: Self.server(webSocketRouter: router, options.limits, upgradeRefusal: Self.upgradeRefusal(local: options.tokens == nil, listening: address)),
            configuration: .init(address: .hostname(address, port: port), serverName: "luastore"),
            services: [sweeper],
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? port
                let shown = address.contains(":") ? "[\(address)]" : address
                started("http://\(shown):\(port)")
            },
            logger: logger)
        // (A graceful shutdown waits for the requests in flight — at most `shutdownGrace`: a client that ignores the
        // close, or sends a body a byte at a time, does not hold the server open; then they are cut, and every store
        // is closed, its journal written, as on any stop.)
        var group = ServiceGroupConfiguration(services: [app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        group.maximumGracefulShutdownDuration = Self.shutdownGrace
        group.maximumCancellationDuration = Self.shutdownGrace
        do {
            try await ServiceGroup(configuration: group).run()
        } catch {
            await host.stop()
            throw error
        }
        await host.stop()
    }

    /// HTTP/1 with the WebSocket upgrade: each request head of a connection must come whole within
    /// `limits.headSeconds` (`HeadGuard`: one too large is answered 431), and a keep-alive connection idle between
    /// requests for `limits.idleConnectionSeconds` is closed (a WebSocket's pings keep it open instead).
    static func server(webSocketRouter router: Router<ServeRequestContext>, _ limits: ServerLimits,
                       upgradeRefusal: @escaping @Sendable (HTTPRequestHead) -> HeadGuard.Refusal?) -> HTTPServerBuilder {
        let responder = router.buildResponder()
        return HTTPServerBuilder { respond in
            GuardedUpgradeChannel(
                channel: HTTP1WebSocketUpgradeChannel(
                    responder: respond, webSocketResponder: responder,
                    configuration: .init(http1: .init(idleTimeout: .seconds(Int64(limits.idleConnectionSeconds))),
                                         ws: .init(maxFrameSize: limits.messageBytes, closeTimeout: Self.closeTimeout))),
                headTimeout: .seconds(Int64(limits.headSeconds)), messageBytes: limits.messageBytes, upgradeRefusal: upgradeRefusal)
        }
    }

    /// The rules every request is held to before a route (`PathGuard`, and without tokens `LocalPageGuard`), for a
    /// head asking for the WebSocket upgrade: a refusal there is answered by `HeadGuard` in words, as for any request
    /// (the upgrade answers what its route refuses with an empty 400); and only a live route is a WebSocket (404).
    static func upgradeRefusal(local: Bool, listening: String) -> @Sendable (HTTPRequestHead) -> HeadGuard.Refusal? {
        { head in
            let path = String(head.uri.prefix { $0 != "?" })
            if let problem = PathGuard<ServeRequestContext>.refusal(path: path) { return HeadGuard.Refusal(.badRequest, problem) }
            if local, let problem = LocalPageGuard<ServeRequestContext>.refusal(
                host: head.headers["Host"].first ?? "", origin: head.headers["Origin"].first, listening: listening) {
                return HeadGuard.Refusal(.forbidden, problem)
            }
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 4, parts[1] == "stores", parts[3] == "live" else {
                return HeadGuard.Refusal(.notFound, "\(path) is not a WebSocket: a store's live connection is /stores/KEY/live")
            }
            return nil
        }
    }

    static func sweepInterval(_ idle: Duration) -> Duration {
        min(.seconds(5), max(.milliseconds(50), idle / 4))
    }

    // MARK: Routes

    private func routes(_ router: Router<ServeRequestContext>) {
        router.get("/health") { _, _ in Self.json(.ok, "{\"ok\":true}") }
        // (Counts of the whole server: with tokens, only a token granting read on every key sees them.)
        router.get("/metrics") { [self] request, _ in
            try self.authorize(request.headers[.authorization], .read, "*")
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: ResponseBody(byteBuffer: ByteBuffer(string: self.metrics.text())))
        }
        router.post("/stores/{key}/actions") { [self] request, context in
            let key = try self.key(context)
            try self.authorize(request.headers[.authorization], .dispatch, key)
            let body: ByteBuffer
            // (A body said to be larger is refused at once, before any of it is waited for.)
            if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > self.options.limits.messageBytes {
                throw HTTPError(.contentTooLarge, message: "an action has at most \(self.options.limits.messageBytes) bytes (this one says \(length))")
            }
            do {
                body = try await request.body.collect(upTo: self.options.limits.messageBytes)
            } catch {
                throw HTTPError(.contentTooLarge, message: "an action has at most \(self.options.limits.messageBytes) bytes")
            }
            guard let text = String(validating: body.readableBytesView, as: UTF8.self) else {
                throw HTTPError(.badRequest, message: "the body is not UTF-8 text (an action is JSON)")
            }
            let (id, action) = try Self.parseAction(text)
            let store = try await self.store(key, "actions")
            let started = ContinuousClock.now
            let outcome = await store.send(action, id: id)
            self.metrics.action(outcome, since: started)
            return Self.json(Self.status(of: outcome), outcome.json(id: id))
        }
        router.get("/stores/{key}/props") { [self] request, context in
            let key = try self.key(context)
            let grant = try self.authorize(request.headers[.authorization], .read, key)
            let store = try await self.store(key, "props", creating: grant.allows(.dispatch, on: key))
            do throws(ServeFailure) {
                return Self.json(.ok, try store.propsText() ?? "null")
            } catch {
                throw HTTPError(.internalServerError, message: error.description)
            }
        }
        router.get("/stores/{key}/state") { [self] request, context in
            let key = try self.key(context)
            let grant = try self.authorize(request.headers[.authorization], .read, key)
            let store = try await self.store(key, "state", creating: grant.allows(.dispatch, on: key))
            do throws(ServeFailure) {
                return Self.json(.ok, try await store.stateText())
            } catch {
                throw HTTPError(.internalServerError, message: error.description)
            }
        }
        // The key's devtools (`--devtools`): a redirect to their page, on an address of their own with a token of their
        // own — given only to a token granting `devtools` on the key (in a cluster, on the node holding it).
        router.get("/stores/{key}/devtools") { [self] request, context in
            let key = try self.key(context)
            let grant = try self.authorize(request.headers[.authorization], .devtools, key)
            guard let settings = self.options.devtools else {
                throw HTTPError(.notFound, message: "the devtools are off on this server: serve with --devtools")
            }
            let store = try await self.store(key, "devtools", creating: grant.allows(.dispatch, on: key))
            do throws(ServeFailure) {
                let address = try await store.devtools(settings)
                return Response(status: .seeOther, headers: [.location: address, .contentType: "application/json; charset=utf-8"],
                                body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"devtools":"\#(address)"}"#)))
            } catch {
                throw HTTPError(.serviceUnavailable, message: error.description)
            }
        }
        router.ws("/stores/{key}/live") { [self] request, context in
            // (A GET that does not ask for the upgrade is told what the address is, once it may read the key.)
            guard request.headers[.upgrade]?.lowercased().contains("websocket") == true else {
                let key = try self.key(context)
                _ = try self.authorize(request.headers[.authorization] ?? request.uri.queryParameters["access_token"].map { "Bearer \($0)" }, .read, key)
                throw HTTPError(.upgradeRequired, headers: [.upgrade: "websocket", .connection: "Upgrade"],
                                message: "/stores/\(key)/live is a WebSocket: a live client asks for the upgrade (docs/serve.md)")
            }
            return .upgrade([:])
        } onUpgrade: { [self] inbound, outbound, context in
            try await self.live(inbound, outbound, context)
        }
    }

    private func key(_ context: ServeRequestContext) throws -> String {
        let key = context.parameters.get("key") ?? ""
        if let problem = StoreKey.check(key) { throw HTTPError(.badRequest, message: "\(problem): \(key.debugDescription)") }
        return key
    }

    /// `key`'s store (`creating` it when it has none: the client may dispatch to it).
    private func store(_ key: String, _ tail: String, creating: Bool = true) async throws -> HostedStore {
        do {
            return try await host.store(key, creating: creating)
        } catch let failure as ServeFailure {
            if failure.missing { throw HTTPError(.notFound, message: failure.description) }
            // Held by another node of the cluster: the client is sent there (307 keeps the method and the body).
            if let address = failure.holder?.address {
                throw HTTPError(.temporaryRedirect, headers: [.location: address + "/stores/\(key)/" + tail],
                                message: failure.description)
            }
            throw HTTPError(.serviceUnavailable, headers: failure.retryLater ? [.retryAfter: "1"] : [:], message: failure.description)
        }
    }

    /// The grant of the bearer token in `header` (every right on every key when the server has no tokens).
    private func grant(_ header: String?) throws(HTTPError) -> AccessGrant {
        guard let tokens = options.tokens else {
            return AccessGrant(subject: "", keys: ["*"], rights: Set(AccessGrant.Right.allCases))
        }
        // (The scheme's name is told apart without case, as RFC 9110 has it: `bearer` is `Bearer`.)
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else {
            throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: "a bearer token is needed (Authorization: Bearer TOKEN)")
        }
        do {
            return try tokens.verify(String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces))
        } catch {
            throw HTTPError(.unauthorized, headers: [.wwwAuthenticate: "Bearer error=\"invalid_token\""], message: error.description)
        }
    }

    @discardableResult
    private func authorize(_ header: String?, _ right: AccessGrant.Right, _ key: String) throws(HTTPError) -> AccessGrant {
        let grant = try grant(header)
        guard grant.allows(right, on: key) else {
            throw HTTPError(.forbidden, message: "the token does not grant \(right.rawValue) on key \(key)")
        }
        return grant
    }

    // MARK: The live protocol

    /// One client's WebSocket: props changes out (after what it missed since `?since=`), actions in, each
    /// answered with its outcome. A refused token closes it with 4401 (none or not valid) or 4403 (not for this
    /// key), the reason in words.
    private func live(_ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter,
                      _ context: WebSocketRouterContext<ServeRequestContext>) async throws {
        let request = context.request
        let key = context.requestContext.parameters.get("key") ?? ""
        if let problem = StoreKey.check(key) {
            try await outbound.close(.unknown(4400), reason: problem)
            return
        }
        let header = request.headers[.authorization] ?? request.uri.queryParameters["access_token"].map { "Bearer \($0)" }
        let grant: AccessGrant
        do {
            grant = try authorize(header, .read, key)
        } catch {
            try await outbound.close(.unknown(error.status == .forbidden ? 4403 : 4401), reason: error.body ?? "unauthorized")
            return
        }
        let limit = options.limits.connectionsPerSubject
        let admitted = connections.withLock { counts in
            guard counts[grant.subject, default: 0] < limit else { return false }
            counts[grant.subject, default: 0] += 1
            return true
        }
        guard admitted else {
            try await outbound.close(.policyViolation, reason: "at most \(limit) live connections per token")
            return
        }
        metrics.connected()
        defer {
            connections.withLock { $0[grant.subject, default: 1] -= 1 }
            metrics.disconnected()
        }
        let sinceText = request.uri.queryParameters["since"]
        let since = sinceText.flatMap { UInt64($0) }
        if let sinceText, since == nil {
            try await outbound.close(.unknown(4400), reason: "since is a sequence number (an integer ≥ 0), not \(String(sinceText).debugDescription)")
            return
        }
        let store: HostedStore
        do {
            store = try await host.store(key, creating: grant.allows(.dispatch, on: key))
        } catch let failure as ServeFailure where failure.missing {
            try await outbound.close(.unknown(4404), reason: failure.description)
            return
        } catch let failure as ServeFailure where failure.holder != nil {
            guard let address = failure.holder?.address else {
                try await outbound.close(.unknown(4409), reason: failure.description)
                return
            }
            try await forward(inbound, outbound, to: address, key: key, since: since, authorization: header)
            return
        } catch let failure as ServeFailure where failure.retryLater {
            try await outbound.close(.unknown(1013), reason: failure.description) // (RFC 6455's "try again later")
            return
        } catch {
            try await outbound.close(.unexpectedServerError, reason: "\(error)")
            return
        }
        // The handler that serves the live protocol on the channel's event loop (LiveConnection.swift), next to the
        // frame decoder.
        let channel = context.requestContext.channel
        let settings = LiveChannelHandler.Settings(
            key: key, window: options.limits.actionsInFlightPerConnection, messageBytes: options.limits.messageBytes,
            actionsPerSecond: options.limits.actionsPerConnectionPerSecond, mayDispatch: grant.allows(.dispatch, on: key))
        let metrics = self.metrics, keptChanges = options.limits.keptChanges
        let connection: LiveConnection, marker: String
        do {
            (connection, marker) = try await channel.eventLoop.submit {
                let handler = LiveChannelHandler(store: store, settings: settings)
                let connection = LiveConnection(handler: handler, eventLoop: channel.eventLoop, metrics: metrics, keptChanges: keptChanges)
                handler.attach(connection)
                // (After the mask guard, which is right after the frame decoder: the handler's marker is no client's.)
                let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self)
                let masks = try? channel.pipeline.syncOperations.handler(type: MaskGuard.self)
                try channel.pipeline.syncOperations.addHandler(handler, position: .after(masks ?? decoder))
                return (connection, handler.marker)
            }.get()
        } catch {
            try await outbound.close(.unexpectedServerError, reason: "the live connection cannot start: \(error)")
            return
        }
        let client = store.join(since: since, connection)
        defer {
            store.leave(client)
            connection.finish()
        }
        // (The server's shutdown sends the client a close — the WebSocket layer's — and this handler reads on until the
        // client answers it: a client that never does is let go after the close timeout, so it cannot hold the
        // shutdown open.)
        try await withGracefulShutdownHandler {
            try await serveLive(inbound, outbound, connection: connection, marker: marker, channel: channel)
        } onGracefulShutdown: {
            let timeout = TimeAmount.nanoseconds(Int64(Self.closeTimeout.components.seconds) * 1_000_000_000)
            channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        }
    }

    /// A live connection's frames (those Hummingbird read before the handler was in place, then the marker, then
    /// control frames) and the close its `LiveConnection` asks for.
    private func serveLive(_ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter, connection: LiveConnection,
                           marker: String, channel: any Channel) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await close in connection.closes {
                    try await outbound.close(close.code, reason: close.reason)
                    // A client that never answers the close (nor reads) is let go after the close timeout: its
                    // connection must not hold the server's shutdown, nor a closed store's place.
                    do {
                        try await Task.sleep(for: Self.closeTimeout)
                        channel.close(promise: nil)
                    } catch {} // (answered: the inbound frames ended and the group was cancelled)
                }
            }
            // (The frames Hummingbird read before the handler was in place, then the marker; then only control
            // frames. Frames, not messages: a message's first fragment may be Hummingbird's and the rest the
            // handler's, which joins them.)
            for try await frame in inbound {
                if frame.opcode == .text, frame.fin, frame.data.readableBytesView.elementsEqual(marker.utf8) {
                    connection.caughtUp()
                    continue
                }
                let opcode: WebSocketOpcode = switch frame.opcode {
                case .text: .text
                case .binary: .binary
                case .continuation: .continuation
                }
                connection.readEarly(opcode, fin: frame.fin, frame.data)
            }
            group.cancelAll()
        }
    }

    /// Relays a live connection to the node that holds its key (a browser does not follow a redirect on a
    /// WebSocket's upgrade): every message both ways, as they come; when either side ends, so does the other —
    /// the holder going away closes the client's connection with 1001, so that it reconnects (with `?since=`) and
    /// lands on whichever node holds the key then.
    private func forward(_ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter, to address: String, key: String,
                         since: UInt64?, authorization: String?) async throws {
        var target = address.replacingOccurrences(of: "http://", with: "ws://") + "/stores/\(key)/live"
        if let since { target += "?since=\(since)" }
        var headers = HTTPFields()
        if let authorization { headers[.authorization] = authorization }
        let limit = options.limits.messageBytes
        var logger = Logger(label: "luastore.serve.forward")
        logger.logLevel = .error
        do {
            try await WebSocketClient.connect(
                url: target,
                configuration: .init(maxFrameSize: max(limit, 1 << 14), additionalHeaders: headers, closeTimeout: Self.closeTimeout),
                logger: logger
            ) { upstreamInbound, upstreamOutbound, _ in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await message in upstreamInbound.messages(maxSize: limit) {
                            if case .text(let text) = message { try await outbound.writeTextMessage(text) }
                        }
                        try await outbound.close(.goingAway, reason: "the node serving key \(key) closed the connection; reconnect with ?since=SEQ")
                    }
                    group.addTask {
                        // (Read here by the rules of a connection served here, and closed in the same words.)
                        var messages = LiveMessages(messageBytes: limit)
                        for try await frame in inbound {
                            let opcode: WebSocketOpcode = switch frame.opcode {
                            case .text: .text
                            case .binary: .binary
                            case .continuation: .continuation
                            }
                            switch messages.add(opcode, fin: frame.fin, frame.data) {
                            case .success(let text?): try await upstreamOutbound.writeTextMessage(text)
                            case .success(nil): break
                            case .failure(let refusal): throw refusal
                            }
                        }
                    }
                    _ = try await group.next()
                    group.cancelAll()
                }
            }
        } catch let refusal as LiveMessages.Refusal {
            try? await outbound.close(refusal.code, reason: refusal.reason)
        } catch {
            try? await outbound.close(.goingAway, reason: "the node serving key \(key) at \(address) cannot be reached; reconnect")
        }
    }

    // MARK: Messages

    /// An action message: `{"id": "…", "action": {…}}`, or the action itself (`{"type": …}`).
    /// The id of a message that is not an action, when it has a readable one (its refusal then names it).
    static func readableId(_ text: String) -> String? {
        guard let value = try? LuaJSON.parse(text), case .table = value, let id = value["id"].string,
              !id.isEmpty, id.utf8.count <= 200 else { return nil }
        return id
    }

    static func parseAction(_ text: String) throws(HTTPError) -> (id: String?, action: LuaValue) {
        let value: LuaValue
        do {
            value = try LuaJSON.parse(text)
        } catch {
            throw HTTPError(.badRequest, message: "the message is not JSON: \(error)")
        }
        guard case .table = value else {
            throw HTTPError(.badRequest, message: "an action message is a JSON object: {\"id\": \"…\", \"action\": {\"type\": …}}")
        }
        if value["type"] != .nil { return (nil, value) }
        if value["action"] == .nil {
            throw HTTPError(.badRequest, message: "an action message is a JSON object: {\"id\": \"…\", \"action\": {\"type\": …}}, or the action itself")
        }
        var id: String?
        switch value["id"] {
        case .nil: id = nil
        case .string(let text) where !text.isEmpty && text.utf8.count <= 200: id = text
        default: throw HTTPError(.badRequest, message: "an action's id is a string of 1 to 200 bytes")
        }
        let action = value["action"]
        guard case .table = action, action["type"].string != nil else {
            throw HTTPError(.badRequest, message: "an action message holds an action: {\"id\": \"…\", \"action\": {\"type\": \"…\", …}}")
        }
        return (id, action)
    }

    static func status(of outcome: ActionOutcome) -> HTTPResponse.Status {
        switch outcome.kind {
        case .applied: .ok
        case .failed: .unprocessableContent
        case .refused:
            if outcome.error?.hasPrefix("rate limit") == true { .tooManyRequests }
            else if outcome.error?.hasPrefix("an action") == true { .badRequest }
            else { .serviceUnavailable }
        }
    }

    static func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json; charset=utf-8"],
                 body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Hibernates idle stores now and then, until the server shuts down; in a cluster, also says the node is alive
/// and renews its leases (a third of a lease's time apart), closing the stores whose leases it lost, and installs a
/// newer published version of the app.
struct Sweeper: Service {
    let host: StoreHost
    let versions: AppVersions
    let every: Duration
    let cluster: ClusterDatabase?
    let log: @Sendable (String) -> Void

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    while !Task.isCancelled {
                        do { try await Task.sleep(for: every) } catch { return }
                        await host.sweep()
                    }
                }
                if let cluster {
                    group.addTask {
                        let interval = Duration.milliseconds(Int64(cluster.leaseSeconds * 1000 / 3))
                        while !Task.isCancelled {
                            let since = ContinuousClock.now
                            let held = await Blocking.run { () -> Result<[String: Int64], ClusterFailure> in
                                do throws(ClusterFailure) {
                                    try cluster.heartbeat()
                                    return .success(try cluster.renew())
                                } catch {
                                    return .failure(error)
                                }
                            }
                            switch held {
                            case .success(let leases): await host.keep(only: Set(leases.keys), openedBefore: since)
                            case .failure(let failure): log("the cluster's database: \(failure)")
                            }
                            if let folder = await versions.adoptLatest(from: cluster) { await host.install(folder) }
                            do { try await Task.sleep(for: interval) } catch { return }
                        }
                    }
                }
            }
        }
        // Shutting down: live clients are told to go (the server waits for their connections to end).
        await host.endLiveClients()
    }
}

/// A request's context, with the channel it came on (a live connection's handler is added to it).
struct ServeRequestContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }
}
