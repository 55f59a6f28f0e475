import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOHTTP1

/// Hummingbird's HTTP/1 channel with the WebSocket upgrade, and a `HeadGuard` in front of it until a connection's
/// first request head is read: a head too large for the parser is answered 431, any other that does not parse 400,
/// and a connection that has not sent a whole head within `headTimeout` is closed. (Without it such a connection
/// was neither answered nor closed — the upgrade handler does not handle the parser's errors, and Hummingbird's
/// idle timeout starts only after the first head — so a client could hold sockets open for ever.)
struct GuardedUpgradeChannel: ServerChildChannel {
    typealias Value = HTTP1WebSocketUpgradeChannel.Value

    let channel: HTTP1WebSocketUpgradeChannel
    let headTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        self.channel.setup(channel: channel, logger: logger).flatMapThrowing { [headTimeout] value in
            let pipeline = channel.pipeline.syncOperations
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(HeadGuard(timeout: headTimeout), position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await channel.handle(value: value, logger: logger)
    }
}

/// Between NIO's request decoder and the upgrade handler, until the first request head is read (then it leaves
/// the pipeline: after an upgrade, WebSocket frames come this way).
final class HeadGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    private var done = false

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { deadline?.cancel() }

    private func arm(_ context: ChannelHandlerContext) {
        guard deadline == nil else { return }
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) { loopBound.value.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let isHead = if case .head = unwrapInboundIn(data) { true } else { false }
        context.fireChannelRead(data)
        if isHead, !done { // (the first head is whole: Hummingbird's own handlers take it from here)
            done = true
            deadline?.cancel()
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }

    /// A graceful shutdown asks every connection to finish: one that has not sent its first head whole has nothing
    /// in flight, and is closed now. (Hummingbird's own handler, which does this for the requests after the first,
    /// joins the pipeline only once the first head is read: without this such a connection held the shutdown past its
    /// grace, and the server died of it.)
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, !done else { return context.fireUserInboundEventTriggered(event) }
        done = true
        deadline?.cancel()
        context.close(promise: nil)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !done, let failure = error as? HTTPParserError else { return context.fireErrorCaught(error) }
        done = true
        deadline?.cancel()
        let status: HTTPResponseStatus = failure == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest
        let reason = failure == .headerOverflow ? "the request's head is too large" : "the request does not parse as HTTP/1.1"
        let body = context.channel.allocator.buffer(string: #"{"error":{"message":"\#(reason)"}}"#)
        let head = HTTPResponseHead(version: .http1_1, status: status, headers: [
            "connection": "close", "content-type": "application/json; charset=utf-8", "content-length": "\(body.readableBytes)",
        ])
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
