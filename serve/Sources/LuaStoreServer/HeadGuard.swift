import Foundation
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import LuaKit
import LuaStoreConcurrency
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// Hummingbird's HTTP/1 channel with the WebSocket upgrade, and a `HeadGuard` in front of it: every request head of a
/// connection must come whole within `headTimeout` of the connection's start or of the answer before it, a head too
/// large for the parser is answered 431 and any other that does not parse 400, in words. (Without it such a
/// connection was neither answered nor closed — the upgrade handler does not handle the parser's errors, and
/// Hummingbird's idle timeout starts only after the first head and counts a byte a second as life — so a client
/// could hold sockets open for ever; a later request that did not parse got an empty 400.) After an upgrade, every
/// frame the client sends is masked and at most `messageBytes` long, or the connection fails (`MaskGuard`).
struct GuardedUpgradeChannel: ServerChildChannel {
    /// Hummingbird's, and the mark `HeadGuard` leaves on a connection it ended itself.
    struct Value: ServerChildChannelValue {
        let upgrade: HTTP1WebSocketUpgradeChannel.Value
        let ended: EndedByGuard

        var channel: any Channel { upgrade.channel }
    }

    let channel: HTTP1WebSocketUpgradeChannel
    let headTimeout: TimeAmount
    /// The longest message a client may send (the frame decoder's limit too).
    let messageBytes: Int
    /// Why a head asking for the WebSocket upgrade is refused before it (the server's rules), or nil.
    let upgradeRefusal: @Sendable (HTTPRequestHead) -> HeadGuard.Refusal?

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        self.channel.setup(channel: channel, logger: logger).flatMapThrowing { [headTimeout, upgradeRefusal, messageBytes] value in
            let pipeline = channel.pipeline.syncOperations
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            let ended = EndedByGuard()
            try pipeline.addHandler(HeadGuard(timeout: headTimeout, upgradeRefusal: upgradeRefusal, ended: ended), position: .after(decoder))
            try pipeline.addHandler(UpgradeWatcher(messageBytes: messageBytes))
            return Value(upgrade: value, ended: ended)
        }
    }

    /// Hummingbird's handling, whose report of an upgrade that did not happen is left out for a connection
    /// `HeadGuard` ended itself — answered in words (a refused handshake, a head that does not parse) or closed for a
    /// shutdown: that is no error of the server's (it was logged as one for every such request).
    func handle(value: Value, logger: Logger) async {
        var quieted = logger
        quieted.handler = EndedByGuard.Quieting(wrapped: logger.handler, ended: value.ended)
        await channel.handle(value: value.upgrade, logger: quieted)
    }
}

/// Whether `HeadGuard` ended a connection itself (its answer written, or closed for a shutdown).
final class EndedByGuard: Sendable {
    private let ended = Protected(false)

    var isEnded: Bool { ended.withLock { $0 } }

    func mark() { ended.withLock { $0 = true } }

    /// A log handler that leaves out what is logged of a connection once `HeadGuard` ended it.
    struct Quieting: LogHandler {
        var wrapped: any LogHandler
        let ended: EndedByGuard

        func log(event: LogEvent) {
            guard !ended.isEnded else { return }
            wrapped.log(event: event)
        }

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { wrapped[metadataKey: key] }
            set { wrapped[metadataKey: key] = newValue }
        }

        var metadata: Logger.Metadata {
            get { wrapped.metadata }
            set { wrapped.metadata = newValue }
        }

        var logLevel: Logger.Level {
            get { wrapped.logLevel }
            set { wrapped.logLevel = newValue }
        }

        var metadataProvider: Logger.MetadataProvider? {
            get { wrapped.metadataProvider }
            set { wrapped.metadataProvider = newValue }
        }
    }
}

/// Between NIO's request decoder and the upgrade handler (Hummingbird's HTTP handlers after the first request): it
/// waits for each request's head within `timeout`, and answers one that does not parse. A head that asks for the
/// WebSocket upgrade is the last it sees (after an upgrade, WebSocket frames come this way): it leaves the pipeline —
/// or, when the handshake cannot go on (`handshakeRefusal`), answers it and ends the connection.
final class HeadGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// An answer in words that ends the connection: its status, its reason, and headers beside them.
    struct Refusal {
        let status: HTTPResponseStatus
        let reason: String
        var headers: [(String, String)] = []

        init(_ status: HTTPResponseStatus, _ reason: String, headers: [(String, String)] = []) {
            self.status = status
            self.reason = reason
            self.headers = headers
        }
    }

    private let timeout: TimeAmount
    private let upgradeRefusal: @Sendable (HTTPRequestHead) -> Refusal?
    private var deadline: Scheduled<Void>?
    /// Request heads read, and answers whose end was written: the connection waits for a head while they are even.
    private var heads = 0, answers = 0
    private var refused = false {
        didSet { if refused { ended.mark() } }
    }
    private var waiting: Bool { heads == answers && !refused }
    private let ended: EndedByGuard

    init(timeout: TimeAmount, upgradeRefusal: @escaping @Sendable (HTTPRequestHead) -> Refusal? = { _ in nil }, ended: EndedByGuard = EndedByGuard()) {
        self.timeout = timeout
        self.upgradeRefusal = upgradeRefusal
        self.ended = ended
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { disarm() }

    private func arm(_ context: ChannelHandlerContext) {
        guard deadline == nil else { return }
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) { loopBound.value.close(promise: nil) }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let head) = unwrapInboundIn(data) else {
            // (What follows a refused head — its body, its end, more requests — is dropped.)
            return refused ? () : context.fireChannelRead(data)
        }
        guard !refused else { return }
        heads += 1
        disarm()
        guard head.headers[canonicalForm: "upgrade"].contains(where: { $0.lowercased() == "websocket" }) else {
            return context.fireChannelRead(data)
        }
        if let refusal = Self.handshakeRefusal(head) ?? upgradeRefusal(head) {
            return refuse(context, refusal)
        }
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    /// Why the WebSocket handshake in `head` cannot go on, as RFC 6455 (4.2.1, 4.2.2) has the server answer it:
    /// a version other than 13 with 426 and the version it speaks, a `Sec-WebSocket-Key` that is not one value of
    /// 16 bytes in base64 with 400 — or nil for a handshake the upgrade may take. (NIO's upgrader closed the
    /// connection on the first two without a word, and took any key.)
    static func handshakeRefusal(_ head: HTTPRequestHead) -> Refusal? {
        let versions = head.headers["Sec-WebSocket-Version"]
        if versions.count != 1 || versions[0].trimmingCharacters(in: .whitespaces) != "13" {
            let asked = versions.isEmpty ? "names no version" : "asks for \(versions.joined(separator: ", ").debugDescription)"
            return Refusal(.upgradeRequired, "this server speaks WebSocket version 13 (Sec-WebSocket-Version: 13, RFC 6455); the request \(asked)",
                           headers: [("Sec-WebSocket-Version", "13")])
        }
        let keys = head.headers["Sec-WebSocket-Key"]
        let key = keys.count == 1 ? keys[0].trimmingCharacters(in: .whitespaces) : nil
        if key.flatMap({ Data(base64Encoded: $0) })?.count != 16 {
            let given = keys.isEmpty ? "none" : keys.count > 1 ? "\(keys.count) of them" : keys[0].debugDescription
            return Refusal(.badRequest, "Sec-WebSocket-Key must be one value, 16 bytes in base64 (RFC 6455, 4.1); the request gives \(given)")
        }
        return nil
    }

    /// An answer's end: once every request read is answered, the next head is waited for.
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            answers += 1
            if waiting { arm(context) }
        }
        context.write(data, promise: promise)
    }

    /// A graceful shutdown asks every connection to finish: one waiting for a head (none sent, or one not yet whole)
    /// has nothing in flight, and is closed now. (Hummingbird's own handler joins the pipeline only once the first
    /// head is read, and takes a connection with part of a head for an idle one only after its idle timeout: such a
    /// connection held the shutdown past its grace, and the server died of it.)
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, waiting else { return context.fireUserInboundEventTriggered(event) }
        refused = true
        disarm()
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // (A head that does not parse while an answer is still being written is Hummingbird's to end.)
        guard waiting, let failure = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        if failure == .headerOverflow {
            refuse(context, Refusal(.requestHeaderFieldsTooLarge, "the request's head is too large"))
        } else {
            refuse(context, Refusal(.badRequest, "the request does not parse as HTTP/1.1"))
        }
    }

    /// Answers the refusal's status with its reason in words (JSON, as every error of the server) and ends the
    /// connection: nothing more it sends is read.
    private func refuse(_ context: ChannelHandlerContext, _ refusal: Refusal) {
        refused = true
        disarm()
        let message = (try? LuaJSON.encode(.string(refusal.reason), root: "message")) ?? #""the request is refused""#
        let body = context.channel.allocator.buffer(string: #"{"error":{"message":\#(message)}}"#)
        let head = HTTPResponseHead(version: .http1_1, status: refusal.status, headers: HTTPHeaders([
            ("connection", "close"), ("content-type", "application/json; charset=utf-8"), ("content-length", "\(body.readableBytes)"),
        ] + refusal.headers))
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        // The answer, then the end of what the server sends; what the client still sends is read and dropped for
        // a moment before the socket closes (closed at once with bytes unread, it is reset: the client may never
        // read the answer).
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            loopBound.value.close(mode: .output, promise: nil)
            loopBound.value.eventLoop.scheduleTask(in: .seconds(2)) { loopBound.value.close(promise: nil) }
        }
    }
}

/// After the upgrade handler, until the connection's first request is through it: when that request is the
/// WebSocket upgrade, it puts a `MaskGuard` right after the frame decoder the upgrade added — as the upgrade
/// completes, before the frames that came with the request are read — and leaves; any other request (the upgrade
/// handler forwards it and leaves too: only a connection's first request may ask for the upgrade) sends it away.
final class UpgradeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    /// The longest message a client may send (`MaskGuard` says so when a frame is longer).
    private let messageBytes: Int

    init(messageBytes: Int) {
        self.messageBytes = messageBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(data)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case HTTPServerUpgradeEvents.upgradeComplete = event,
           let frames = try? context.pipeline.syncOperations.context(handlerType: ByteToMessageHandler<WebSocketFrameDecoder>.self) {
            try? context.pipeline.syncOperations.addHandler(MaskGuard(messageBytes: messageBytes), position: .after(frames.handler))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Right after the WebSocket frame decoder: a frame the client did not mask — data or control, the first that came
/// with the upgrade's request or any later one — fails the connection (RFC 6455, 5.1): a close with 1002 saying
/// why, and nothing of it or after it is read. (Hummingbird's WebSocket layer reads frames without asking; the live
/// handler asked of the frames that reached it, not of those read before it was in place.) So does a frame longer
/// than a message may be, which the decoder refuses: 1009 saying so (the WebSocket layer closed without a reason),
/// on a live connection served here or relayed to the node that holds its key.
final class MaskGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let messageBytes: Int
    private var failed = false

    init(messageBytes: Int) {
        self.messageBytes = messageBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        guard unwrapInboundIn(data).maskKey == nil else { return context.fireChannelRead(data) }
        fail(context: context, .protocolError, "a client's frames are masked (RFC 6455, 5.1)")
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard case NIOWebSocketError.invalidFrameLength = error else { return context.fireErrorCaught(error) }
        if !failed { fail(context: context, .messageTooLarge, Self.tooLarge(messageBytes)) }
    }

    /// Why a message longer than `messageBytes` ends a live connection.
    static func tooLarge(_ messageBytes: Int) -> String {
        "a message has at most \(messageBytes) bytes"
    }

    /// Fails the connection: a close with `code` and `reason`; nothing after it is read.
    private func fail(context: ChannelHandlerContext, _ code: WebSocketErrorCode, _ reason: String) {
        failed = true
        var payload = context.channel.allocator.buffer(capacity: 64)
        payload.write(webSocketErrorCode: code)
        payload.writeString(reason)
        // The close, then the end of what the server sends; the socket closes a moment later (closed at once with
        // bytes unread, it is reset: the client may never read why).
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: payload))).whenComplete { _ in
            loopBound.value.close(mode: .output, promise: nil)
            loopBound.value.eventLoop.scheduleTask(in: .seconds(2)) { loopBound.value.close(promise: nil) }
        }
    }
}
