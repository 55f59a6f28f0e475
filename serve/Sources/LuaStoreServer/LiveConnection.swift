import Foundation
import Hummingbird
import LuaKit
import LuaStoreConcurrency
import NIOCore
import NIOWebSocket

/// A live client's WebSocket once it is let in (`StoreServer.live`): its actions and what is written back go
/// through the channel's own event loop, with no task between a frame and its store.
///
/// A frame is read by `LiveChannelHandler` (on the event loop), its action put in line by `HostedStore.begin`
/// there; the store's thread answers it into the connection's outbox (`answer`) and hands it the props changes
/// (`hear`); the event loop writes what the outbox holds once per turn — a burst of answers is one write and
/// one flush. Hummingbird's WebSocket layer keeps what it does well: the upgrade, pings, the closing handshake
/// (`closes`: the handler asks, the connection's task closes).
final class LiveConnection: LiveClient, Sendable {
    /// What the connection closes with, in words.
    struct Close: Sendable {
        let code: WebSocketErrorCode
        let reason: String
    }

    /// A reply to come, in the order its message came.
    private struct Slot {
        let id: String?
        /// When its action was given to the store (nil: refused before).
        let started: ContinuousClock.Instant?
        var outcome: ActionOutcome?
    }

    private struct Outbox {
        /// Messages to write, in order.
        var messages: [String] = []
        /// How many of them are props changes (a client more than `keptChanges` behind is ended).
        var props = 0
        /// Replies to come, in order; `firstSlot` numbers the first.
        var slots = CircularBuffer<Slot>(initialCapacity: 16)
        var firstSlot: UInt64 = 0
        /// Replies moved to `messages` since the handler last took them: places free in the window.
        var answered = 0
        /// Whether the event loop was asked to write.
        var scheduled = false
        /// Whether a close was asked for: nothing more is taken.
        var ended = false
        /// Whether a write waited for the socket to drain: once a close was asked for too, what waits is dropped
        /// (the close may be written first; nothing goes after it).
        var stalled = false
    }

    let eventLoop: any EventLoop
    private let outbox = Protected(Outbox())
    private let handler: NIOLoopBound<LiveChannelHandler>
    private let closing: AsyncStream<Close>.Continuation
    /// The close asked for, at most one.
    let closes: AsyncStream<Close>
    private let metrics: ServerMetrics
    private let keptChanges: Int

    /// Made on `handler`'s event loop (which it is bound to).
    init(handler: LiveChannelHandler, eventLoop: any EventLoop, metrics: ServerMetrics, keptChanges: Int) {
        self.eventLoop = eventLoop
        self.handler = NIOLoopBound(handler, eventLoop: eventLoop)
        self.metrics = metrics
        self.keptChanges = keptChanges
        (closes, closing) = AsyncStream.makeStream(of: Close.self, bufferingPolicy: .bufferingOldest(1))
    }

    // MARK: From the store (any thread)

    func hear(_ message: String) -> Bool {
        let (kept, schedule) = outbox.withLock { outbox -> (Bool, Bool) in
            guard !outbox.ended else { return (true, false) }
            guard outbox.props < keptChanges else { return (false, false) }
            outbox.messages.append(message)
            outbox.props += 1
            return (true, Self.schedule(&outbox))
        }
        if schedule { scheduleWrite() }
        return kept
    }

    func end(_ reason: LiveEnd) {
        switch reason {
        case .goingAway: close(.goingAway, "the server is shutting down; reconnect with ?since=SEQ")
        case .storeClosed: close(.goingAway, "the key's store closed on this node (idle, or the key moved to another node); reconnect with ?since=SEQ")
        case .fellBehind: close(.policyViolation, "the client fell behind; reconnect with ?since=SEQ")
        }
    }

    /// Asks the connection's task to close it, once; what the outbox holds is written first.
    func close(_ code: WebSocketErrorCode, _ reason: String) {
        let first = outbox.withLock { outbox in
            defer { outbox.ended = true }
            return !outbox.ended
        }
        guard first else { return }
        closing.yield(Close(code: code, reason: reason))
        closing.finish()
    }

    /// The outcome of the reply numbered `number`: it and every reply after it already known are moved to the
    /// messages, in order.
    func answer(_ number: UInt64, _ outcome: ActionOutcome) {
        var timed: [(ActionOutcome, ContinuousClock.Instant)] = []
        let schedule = outbox.withLock { outbox -> Bool in
            guard number >= outbox.firstSlot, number - outbox.firstSlot < UInt64(outbox.slots.count) else { return false }
            outbox.slots[offset: Int(number - outbox.firstSlot)].outcome = outcome
            var moved = false
            while let slot = outbox.slots.first, let done = slot.outcome {
                outbox.slots.removeFirst()
                if let started = slot.started { timed.append((done, started)) }
                if !outbox.ended { outbox.messages.append(done.json(id: slot.id)) }
                outbox.firstSlot += 1
                outbox.answered += 1
                moved = true
            }
            return moved && Self.schedule(&outbox)
        }
        for (outcome, started) in timed { metrics.action(outcome, since: started) }
        if schedule { scheduleWrite() }
    }

    private static func schedule(_ outbox: inout Outbox) -> Bool {
        guard !outbox.scheduled else { return false }
        outbox.scheduled = true
        return true
    }

    private func scheduleWrite() {
        eventLoop.execute { [handler] in handler.value.write() }
    }

    // MARK: From the handler (its event loop)

    /// A place for the reply to a message just read; its number, for `answer`.
    func open(id: String?, started: ContinuousClock.Instant?) -> UInt64 {
        outbox.withLock { outbox in
            outbox.slots.append(Slot(id: id, started: started))
            return outbox.firstSlot + UInt64(outbox.slots.count - 1)
        }
    }

    /// What there is to write, and how many replies it answers; nothing is scheduled after it.
    func take() -> (messages: [String], answered: Int) {
        outbox.withLock { outbox in
            defer {
                outbox.messages.removeAll(keepingCapacity: true)
                outbox.props = 0
                outbox.answered = 0
                outbox.scheduled = false
                outbox.stalled = false
            }
            return (outbox.ended && outbox.stalled ? [] : outbox.messages, outbox.answered)
        }
    }

    /// Nothing is written now (the socket is full); a write is scheduled again when it drains.
    func postpone() {
        outbox.withLock { outbox in
            outbox.scheduled = false
            outbox.stalled = true
        }
    }

    // MARK: From the connection's task

    /// A data frame Hummingbird read before the handler was in place (its data unmasked): read before the frames
    /// the handler holds.
    func readEarly(_ opcode: WebSocketOpcode, fin: Bool, _ data: ByteBuffer) {
        eventLoop.execute { [handler] in handler.value.readEarly(opcode, fin: fin, data) }
    }

    /// Every message read before the handler was in place was handed over (`readEarly`): the handler's own go next.
    func caughtUp() {
        eventLoop.execute { [handler] in handler.value.catchUp() }
    }

    /// The connection ended: nothing more is taken or written.
    func finish() {
        outbox.withLock { $0.ended = true }
        closing.finish()
        eventLoop.execute { [handler] in handler.value.detach() }
    }
}

/// The live protocol on a WebSocket's event loop, between NIO's frame decoder and Hummingbird's WebSocket
/// layer: it takes the data frames (text; fragments joined; binary closes the connection), puts each action in
/// line, writes the connection's outbox, and lets control frames (ping, pong, close) go on to Hummingbird, which
/// answers them.
///
/// Frames Hummingbird read before the handler was added are its own to hand over (`readEarly`), frame by frame —
/// a message's first fragment may be one of them and the rest the handler's; to know when it has, the handler
/// sends a marker after them (`marker`, a text only this connection knows): the frames that arrive meanwhile are
/// held as they came, and read once the marker came back (`catchUp`). It reads no more while it holds messages it
/// cannot put in line — at most `window` actions of a connection are in flight.
final class LiveChannelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias InboundOut = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    struct Settings {
        let key: String
        let window: Int
        let messageBytes: Int
        let actionsPerSecond: Int
        let mayDispatch: Bool
    }

    let marker = "\u{1}luastore-caught-up-" + UUID().uuidString
    private let store: HostedStore
    private let settings: Settings
    private var connection: LiveConnection?
    private var context: ChannelHandlerContext?
    private var bucket: TokenBucket
    /// Whether the marker came back: every frame Hummingbird read was handed over, so this handler's own are next.
    private var caughtUp = false
    /// This handler's frames that came before the marker, in order (read once it comes back).
    private var heldFrames: [(opcode: WebSocketOpcode, fin: Bool, data: ByteBuffer)] = []
    /// Messages read and not yet in line, in the order they came.
    private var held: [String] = []
    /// The messages its frames make.
    private var messages: LiveMessages
    private var inFlight = 0
    private var readPending = false
    private var closed = false

    init(store: HostedStore, settings: Settings) {
        self.store = store
        self.settings = settings
        bucket = TokenBucket(perSecond: settings.actionsPerSecond)
        messages = LiveMessages(messageBytes: settings.messageBytes)
    }

    func attach(_ connection: LiveConnection) { self.connection = connection }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // (After every frame Hummingbird has read: it hands this back when it has handed them over.)
        var text = context.channel.allocator.buffer(capacity: marker.utf8.count)
        text.writeString(marker)
        context.fireChannelRead(wrapInboundOut(WebSocketFrame(fin: true, opcode: .text, data: text)))
        context.fireChannelReadComplete()
    }

    func handlerRemoved(context: ChannelHandlerContext) { detach() }

    func channelInactive(context: ChannelHandlerContext) {
        connection?.finish()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary, .continuation:
            guard !closed else { return }
            guard frame.reservedBits.isEmpty else { return close(.protocolError, "reserved bits are not in use") }
            guard frame.maskKey != nil else { return close(.protocolError, "a client's frames are masked (RFC 6455, 5.1)") }
            if caughtUp {
                read(frame.opcode, fin: frame.fin, frame.unmaskedData)
            } else {
                heldFrames.append((frame.opcode, frame.fin, frame.unmaskedData))
            }
        default:
            context.fireChannelRead(data) // (ping, pong, close: Hummingbird's)
        }
    }

    /// A data frame, in the order the client sent it: a whole message is put in line (`LiveMessages`: one that
    /// breaks the protocol's rules closes the connection, saying why).
    private func read(_ opcode: WebSocketOpcode, fin: Bool, _ data: ByteBuffer) {
        guard !closed else { return }
        switch messages.add(opcode, fin: fin, data) {
        case .failure(let refusal): close(refusal.code, refusal.reason)
        case .success(let text?):
            held.append(text)
            release()
        case .success(nil): break
        }
    }

    /// Puts held messages in line while there is room.
    private func release() {
        var next = 0
        while next < held.count, inFlight < settings.window, !closed {
            receive(held[next])
            next += 1
        }
        if next > 0 { held.removeFirst(next) }
        if held.isEmpty, readPending, let context {
            readPending = false
            context.read()
        }
    }

    /// One message: its reply's place is taken now, so that replies go in the order the messages came.
    private func receive(_ text: String) {
        guard let connection else { return }
        inFlight += 1
        let parsed: (id: String?, action: LuaValue)
        do {
            parsed = try StoreServer.parseAction(text)
        } catch {
            let number = connection.open(id: StoreServer.readableId(text), started: nil)
            return connection.answer(number, .refused(error.body ?? "not an action"))
        }
        guard settings.mayDispatch else {
            let number = connection.open(id: parsed.id, started: nil)
            return connection.answer(number, .refused("the token does not grant dispatch on key \(settings.key)"))
        }
        guard bucket.take() else {
            let number = connection.open(id: parsed.id, started: nil)
            return connection.answer(number, .refused(
                "rate limit: a connection sends at most \(settings.actionsPerSecond) actions a second"))
        }
        let number = connection.open(id: parsed.id, started: .now)
        store.begin(parsed.action, id: parsed.id) { outcome in connection.answer(number, outcome) }
    }

    /// Writes what the outbox holds, in one flush, and puts held messages in line for the places answered.
    func write() {
        guard let context, let connection else { return }
        guard context.channel.isWritable else { return connection.postpone() }
        let (messages, answered) = connection.take()
        for message in messages {
            var text = context.channel.allocator.buffer(capacity: message.utf8.count)
            text.writeString(message)
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: text)), promise: nil)
        }
        if !messages.isEmpty { context.flush() }
        inFlight -= answered
        if !held.isEmpty { release() }
    }

    func readEarly(_ opcode: WebSocketOpcode, fin: Bool, _ data: ByteBuffer) {
        read(opcode, fin: fin, data)
    }

    func catchUp() {
        caughtUp = true
        let frames = heldFrames
        heldFrames.removeAll()
        for frame in frames { read(frame.opcode, fin: frame.fin, frame.data) }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { write() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        // (Held messages first: a client that sends faster than its actions are answered is slowed, never dropped.)
        guard held.isEmpty, heldFrames.isEmpty else {
            readPending = true
            return
        }
        context.read()
    }

    private func close(_ code: WebSocketErrorCode, _ reason: String) {
        closed = true
        held.removeAll()
        heldFrames.removeAll()
        messages = LiveMessages(messageBytes: settings.messageBytes)
        connection?.close(code, reason)
    }

    func detach() {
        connection = nil
        context = nil
        held.removeAll()
        heldFrames.removeAll()
    }
}

/// A live connection's messages, made of its data frames as they come, by the protocol's rules (docs/serve.md):
/// text, a message's fragments joined, at most `messageBytes` long, UTF-8 (RFC 6455 closes with 1007 otherwise:
/// nothing is read with other bytes than the client sent). The connection served here and the one relayed to the
/// key's holder read them so.
struct LiveMessages {
    /// Why a frame ends the connection: the close's code and its reason.
    struct Refusal: Error {
        let code: WebSocketErrorCode
        let reason: String
    }

    let messageBytes: Int
    /// A text message arriving in fragments.
    private var fragments: ByteBuffer?

    init(messageBytes: Int) {
        self.messageBytes = messageBytes
    }

    /// Takes one data frame: the message it completes, nil while a message's fragments are still coming, or why
    /// the connection ends.
    mutating func add(_ opcode: WebSocketOpcode, fin: Bool, _ data: ByteBuffer) -> Result<String?, Refusal> {
        switch opcode {
        case .binary:
            return .failure(Refusal(code: .unacceptableData, reason: "the live protocol speaks JSON text"))
        case .text where fragments != nil, .continuation where fragments == nil:
            return .failure(Refusal(code: .protocolError, reason: "a fragmented message was interrupted"))
        case .text:
            fragments = data
        default:
            var data = data
            fragments?.writeBuffer(&data)
        }
        guard (fragments?.readableBytes ?? 0) <= messageBytes else {
            return .failure(Refusal(code: .messageTooLarge, reason: MaskGuard.tooLarge(messageBytes)))
        }
        guard fin, let message = fragments else { return .success(nil) }
        fragments = nil
        guard let text = String(validating: message.readableBytesView, as: UTF8.self) else {
            return .failure(Refusal(code: .dataInconsistentWithMessage, reason: "a text message is UTF-8 text"))
        }
        return .success(text)
    }
}
