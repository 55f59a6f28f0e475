import FlyingFox
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreScripting

/// The open pages' live streams (WebSocket `/api/live`). Each page gets, at most every `DevtoolsJournal.interval`
/// while entries arrive, one message: how many entries are kept and the newest of them (at most `tail`) —
/// never the whole history; the page pages in the rest when it scrolls. Each page's queue holds `queue`
/// messages: a page that falls further behind (a stalled tab, a slow link) is dropped, and told why, so an open
/// page never slows the store or grows the server's memory.
final class LiveClients: Sendable {
    private struct Client {
        let continuation: AsyncStream<WSMessage>.Continuation
        /// The newest entry it was told of (nil: none yet, not even the count).
        var sent: UInt64?
    }

    static let tail = 100
    private let journal: DevtoolsJournal
    private let queue: Int
    private let clients = Protected<[Int: Client]>([:])
    private let nextID = Protected(0)
    private let listener = Protected<Int?>(nil)
    /// Held while messages are handed to the streams (`send`, `broadcastStatus`), never while taking `clients`'
    /// lock from a termination handler: the pages' messages leave in the order they were made.
    private let sending = Protected(())

    init(journal: DevtoolsJournal, queue: Int) {
        self.journal = journal
        self.queue = max(2, queue)
    }

    func accept(_ request: HTTPRequest) async throws -> HTTPResponse {
        let handler = WebSocketHTTPHandler(handler: MessageFrameWSHandler(handler: Session(clients: self)))
        return try await handler.handleRequest(request)
    }

    /// One page's socket: what it sends is read and ignored (the page talks over HTTP); the stream to it is
    /// bounded.
    private struct Session: WSMessageHandler {
        let clients: LiveClients

        func makeMessages(for client: AsyncStream<WSMessage>) async throws -> AsyncStream<WSMessage> {
            let (stream, id) = clients.open()
            Task {
                for await _ in client {}
                clients.remove(id)
            }
            return stream
        }
    }

    /// A new page's stream (bounded: `queue` messages), told at once what is kept.
    func open() -> (AsyncStream<WSMessage>, Int) {
        let (stream, continuation) = AsyncStream.makeStream(of: WSMessage.self, bufferingPolicy: .bufferingNewest(queue))
        let id = add(continuation)
        continuation.onTermination = { [weak self] _ in self?.remove(id) }
        return (stream, id)
    }

    private func add(_ continuation: AsyncStream<WSMessage>.Continuation) -> Int {
        let id = nextID.withLock { id in
            defer { id += 1 }
            return id
        }
        clients.withLock { $0[id] = Client(continuation: continuation, sent: nil) }
        listener.withLock { listening in
            if listening == nil { listening = journal.listen { [weak self] in self?.send() } }
        }
        send()
        return id
    }

    func remove(_ id: Int) {
        let empty = clients.withLock { clients in
            clients[id] = nil
            return clients.isEmpty
        }
        if empty {
            listener.withLock { listening in
                if let id = listening, clients.withLock({ $0.isEmpty }) {
                    journal.removeListener(id)
                    listening = nil
                }
            }
        }
    }

    /// Tells every page what arrived since it last heard.
    ///
    /// The messages are made under the clients' lock and handed to the streams outside it: handing one over may
    /// take the lock of the task that reads that stream, and a task being cancelled holds its own lock while its
    /// stream's termination handler takes the clients' lock (`remove`) — yielding under the clients' lock could wait
    /// on that task while it waits on us. `sending` keeps the messages of two calls at once in order.
    func send() {
        sending.withLock { _ in
            let bounds = journal.bounds
            let tail = journal.entries(offset: max(0, bounds.count - Self.tail), limit: Self.tail)
            let messages = clients.withLock { clients -> [(id: Int, continuation: AsyncStream<WSMessage>.Continuation, text: String)] in
                var messages: [(id: Int, continuation: AsyncStream<WSMessage>.Continuation, text: String)] = []
                for (id, var client) in clients where client.sent.map({ $0 < bounds.last }) ?? true {
                    var json = JSONWriter()
                    json.object { json in
                        json.field("type", "entries")
                        json.field("first", bounds.first)
                        json.field("last", bounds.last)
                        json.field("count", bounds.count)
                        json.array("tail", tail.filter { $0.entry.sequence > client.sent ?? 0 }) { json, item in Summary.write(item, into: &json) }
                    }
                    client.sent = bounds.last
                    clients[id] = client
                    messages.append((id, client.continuation, json.text))
                }
                return messages
            }
            var dropped: [Int] = []
            for message in messages {
                if case .dropped = message.continuation.yield(.text(message.text)) { dropped.append(message.id) }
            }
            guard !dropped.isEmpty else { return }
            let gone = clients.withLock { clients in dropped.compactMap { clients.removeValue(forKey: $0) } }
            // (Outside the clients' lock too: finishing a stream calls its termination handler, which takes it.)
            for client in gone {
                var json = JSONWriter()
                json.object { json in
                    json.field("type", "dropped")
                    json.field("reason", "this page fell more than \(queue) messages behind the store and was disconnected; reload it to catch up")
                }
                client.continuation.yield(.text(json.text))
                client.continuation.yield(.close(.policyViolation))
                client.continuation.finish()
            }
        }
    }

    /// Tells every page the store's time-travel and lock status (handed over outside the clients' lock, as `send`
    /// does).
    func broadcastStatus(of api: DevtoolsAPI) async {
        let status = await api.statusJSON()
        sending.withLock { _ in
            for continuation in clients.withLock({ $0.values.map(\.continuation) }) { continuation.yield(.text(status)) }
        }
    }
}
