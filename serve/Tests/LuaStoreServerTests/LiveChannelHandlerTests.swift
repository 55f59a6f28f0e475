import Foundation
@testable import LuaStoreServer
import LuaStoreTestSupport
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

/// The live protocol's handler in a channel of NIO's testing kind, on a real store: the order of a connection's
/// actions across the moment the handler takes over from Hummingbird, and its window.
@Suite struct LiveChannelHandlerTests {
    static let notes = """
        local app = {}
        function app.init() return { seen = {} } end
        function app.reduce(state, action)
          if action.type == "note" then state.seen[#state.seen + 1] = action.n end
        end
        function app.props(state) return { count = #state.seen, last = state.seen[#state.seen] } end
        return app
        """

    static func note(_ n: Int) -> String { #"{"id":"n\#(n)","action":{"type":"note","n":\#(n)}}"# }

    /// A frame as a client sends it: masked (`masked: false`, as no client may send it).
    static func frame(_ text: String, fin: Bool = true, opcode: WebSocketOpcode = .text, masked: Bool = true) -> WebSocketFrame {
        var data = ByteBuffer(string: text)
        guard masked else { return WebSocketFrame(fin: fin, opcode: opcode, data: data) }
        let key: WebSocketMaskingKey = [7, 1, 2, 9]
        data.webSocketMask(key)
        return WebSocketFrame(fin: fin, opcode: opcode, maskKey: key, data: data)
    }

    /// A hosted store of `notes` on a data folder of its own; the app's and the data's folders.
    static func store() async throws -> (HostedStore, [URL]) {
        let app = try CLI.makeApp(notes)
        let data = try ServedApp.temporaryFolder()
        return (try await HostedStore.open(key: "k", options: ServerOptions(app: app, dataFolder: data), log: { _ in }), [app, data])
    }

    /// A live handler (a window of 4) added to `channel`, on its event loop; its connection and its marker.
    static func connect(_ store: HostedStore, _ channel: NIOAsyncTestingChannel, messageBytes: Int,
                        keptChanges: Int = 1024) async throws -> (LiveConnection, String) {
        let settings = LiveChannelHandler.Settings(key: "k", window: 4, messageBytes: messageBytes, actionsPerSecond: 1_000_000, mayDispatch: true)
        return try await channel.eventLoop.submit {
            let handler = LiveChannelHandler(store: store, settings: settings)
            let connection = LiveConnection(handler: handler, eventLoop: channel.eventLoop, metrics: ServerMetrics(), keptChanges: keptChanges)
            handler.attach(connection)
            try channel.pipeline.syncOperations.addHandler(handler)
            return (connection, handler.marker)
        }.get()
    }

    /// The ids of the next `count` answers the handler writes (props changes passed over), each expected `applied`.
    static func applied(_ channel: NIOAsyncTestingChannel, count: Int) async throws -> [String] {
        var answers: [String] = []
        while answers.count < count {
            let frame = try await channel.waitForOutboundWrite(as: WebSocketFrame.self)
            let message = try ServedApp.json(String(buffer: frame.unmaskedData))
            guard let id = message["id"] as? String else { continue }
            #expect(message["outcome"] as? String == "applied", "\(message)")
            answers.append(id)
        }
        return answers
    }

    /// Messages Hummingbird read before the handler was added go in line first; the frames the handler reads
    /// meanwhile wait for its marker to come back through Hummingbird, then follow — more of them than the window
    /// holds, so some wait for answers too; a message in fragments with a ping between them is one action, the
    /// ping passed on. Every answer comes in the order sent, and the store applied them in that order.
    @Test func messagesReadBeforeTheHandlerGoFirstAndItsOwnFollowInOrder() async throws {
        let (store, folders) = try await Self.store()
        defer { for folder in folders { try? FileManager.default.removeItem(at: folder) } }
        let channel = NIOAsyncTestingChannel()
        let (connection, marker) = try await Self.connect(store, channel, messageBytes: 4096)
        let client = store.join(since: nil, connection)
        // The marker went on to what follows the handler (Hummingbird), after what it had read.
        let passed = try #require(try await channel.readInbound(as: WebSocketFrame.self))
        #expect(String(buffer: passed.unmaskedData) == marker)

        for n in 3...9 { try await channel.writeInbound(Self.frame(Self.note(n))) }
        let tenth = Self.note(10)
        let cut = tenth.index(tenth.startIndex, offsetBy: 12)
        try await channel.writeInbound(Self.frame(String(tenth[..<cut]), fin: false))
        try await channel.writeInbound(Self.frame("ping", opcode: .ping))
        try await channel.writeInbound(Self.frame(String(tenth[cut...]), fin: true, opcode: .continuation))
        let ping = try #require(try await channel.readInbound(as: WebSocketFrame.self))
        #expect(ping.opcode == .ping)
        connection.readEarly(.text, fin: true, ByteBuffer(string: Self.note(1)))
        connection.readEarly(.text, fin: true, ByteBuffer(string: Self.note(2)))
        connection.caughtUp()

        #expect(try await Self.applied(channel, count: 10) == (1...10).map { "n\($0)" })
        let props = try ServedApp.json(try #require(try store.propsText()))
        #expect(props["count"] as? Int == 10 && props["last"] as? Int == 10, "\(props)")
        store.leave(client)
        connection.finish()
        _ = await store.close()
        _ = try? await channel.finish()
    }

    /// A message whose first fragment Hummingbird read before the handler was in place, and whose rest reached the
    /// handler before the marker came back (the rest arriving a moment later than the first, as a slow network
    /// sends it), is one action: the fragments are joined in the order they came, across the hand-over.
    @Test func aMessageSplitAcrossTheHandOverIsOneAction() async throws {
        let (store, folders) = try await Self.store()
        defer { for folder in folders { try? FileManager.default.removeItem(at: folder) } }
        let channel = NIOAsyncTestingChannel()
        let (connection, _) = try await Self.connect(store, channel, messageBytes: 4096)
        let client = store.join(since: nil, connection)
        _ = try await channel.readInbound(as: WebSocketFrame.self) // (the marker)
        let message = Self.note(1)
        let cut = message.index(message.startIndex, offsetBy: 9)
        try await channel.writeInbound(Self.frame(String(message[cut...]), fin: true, opcode: .continuation))
        connection.readEarly(.text, fin: false, ByteBuffer(string: String(message[..<cut])))
        connection.caughtUp()
        try await channel.writeInbound(Self.frame(Self.note(2)))
        #expect(try await Self.applied(channel, count: 2) == ["n1", "n2"])
        store.leave(client)
        connection.finish()
        _ = await store.close()
        _ = try? await channel.finish()
    }

    /// A binary frame, a message over the size cap, a continuation with nothing to continue, a frame the client
    /// did not mask, a text that is not UTF-8 — each asks the connection to close with the code and the words that
    /// say why; nothing of it reaches the store.
    @Test func aBinaryFrameOrAnOversizedMessageClosesTheConnection() async throws {
        let (store, folders) = try await Self.store()
        defer { for folder in folders { try? FileManager.default.removeItem(at: folder) } }
        var notText = ByteBuffer(string: #"{"id":"x","action":{"type":"note","n":""#)
        notText.writeBytes([0xC3, 0x28] + Array(#""}}"#.utf8))
        let key: WebSocketMaskingKey = [3, 5, 7, 9]
        notText.webSocketMask(key)
        for (frames, code, words) in [([Self.frame(Self.note(1), opcode: .binary)], WebSocketErrorCode.unacceptableData, "JSON text"),
                                      ([Self.frame(String(repeating: " ", count: 60), fin: false),
                                        Self.frame(String(repeating: " ", count: 60), fin: true, opcode: .continuation)], .messageTooLarge, "at most"),
                                      ([Self.frame("{", opcode: .continuation)], .protocolError, "interrupted"),
                                      ([Self.frame(Self.note(1), masked: false)], .protocolError, "masked"),
                                      ([WebSocketFrame(fin: true, opcode: .text, maskKey: key, data: notText)], .dataInconsistentWithMessage, "UTF-8")] {
            let channel = NIOAsyncTestingChannel()
            let (connection, _) = try await Self.connect(store, channel, messageBytes: 100)
            connection.caughtUp()
            for frame in frames { try await channel.writeInbound(frame) }
            var closes = connection.closes.makeAsyncIterator()
            let close = try #require(await closes.next())
            #expect(close.code == code && close.reason.contains(words), "\(close)")
            connection.finish()
            _ = try? await channel.finish()
        }
        #expect(try store.propsText().map { $0.contains("\"count\":0") } == true)
        _ = await store.close()
    }

    /// A client whose socket takes nothing more falls behind: once more props changes wait for it than a store
    /// keeps for it, the connection is asked to close (1008), and what waited when the socket drains is dropped:
    /// the close may be written first, and nothing goes after it.
    @Test func aClientThatStopsReadingIsClosedOnceItFallsBehind() async throws {
        let (store, folders) = try await Self.store()
        defer { for folder in folders { try? FileManager.default.removeItem(at: folder) } }
        let channel = NIOAsyncTestingChannel()
        let (connection, _) = try await Self.connect(store, channel, messageBytes: 4096, keptChanges: 3)
        connection.caughtUp()
        channel.isWritable = false
        let client = store.join(since: nil, connection)
        for n in 1...5 {
            #expect(await store.send(try StoreServer.parseAction(Self.note(n)).action, id: nil).kind == .applied)
        }
        var closes = connection.closes.makeAsyncIterator()
        let close = try #require(await closes.next())
        #expect(close.code == .policyViolation && close.reason.contains("fell behind"), "\(close)")
        try await channel.eventLoop.submit {}.get() // (the writes asked for so far found the socket full)
        channel.isWritable = true
        try await channel.eventLoop.submit { channel.pipeline.fireChannelWritabilityChanged() }.get()
        let written = try await channel.readOutbound(as: WebSocketFrame.self)
        #expect(written == nil, "\(written.map { String(buffer: $0.unmaskedData) } ?? "")")
        store.leave(client)
        connection.finish()
        _ = await store.close()
        _ = try? await channel.finish()
    }
}
