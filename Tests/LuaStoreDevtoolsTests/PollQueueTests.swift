import FlyingSocks
import Foundation
import Glibc
import LuaStoreConcurrency
import PollingSocketPool
import RawHTTPClient
import Testing

/// The socket pool of every FlyingFox server here (the devtools', the demo API's, the tests' own): real sockets,
/// real `poll(2)`, and the descriptor reuse that left FlyingFox's own queue waiting on a socket it never registered.
@Suite struct PollQueueTests {
    /// A connected pair of Unix sockets.
    static func pair() throws -> (Int32, Int32) {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0 else { throw SocketError.makeFailed("socketpair") }
        return (ends[0], ends[1])
    }

    /// The notifications of one `getNotifications` (on a thread of its own), or nil when none came within `seconds`.
    static func notifications(of queue: PollQueue, within seconds: Double) async throws -> [EventNotification]? {
        let result = Protected<Result<[EventNotification], any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let got = Result { try queue.getNotifications() }
            result.withLock { $0 = got }
            done.signal()
        }
        return try await offPool { () -> [EventNotification]? in
            guard done.wait(timeout: .now() + seconds) == .success else { return nil }
            return try result.withLock { $0 }!.get()
        }
    }

    /// A socket closed while it was waited for, and the next socket given its number: a wait on the new one is
    /// heard (FlyingFox's `ePoll` never registered it: its table still said the number was registered).
    @Test func aWaitOnAReusedDescriptorNumberIsHeard() async throws {
        var queue = PollQueue()
        try queue.open()
        defer { try? queue.stop(); try? queue.close() }
        let (first, firstPeer) = try Self.pair()
        try queue.addEvents([.read], for: Socket.FileDescriptor(rawValue: first))
        // The connection ends (its socket closed on another thread) before the pool removes its wait.
        close(first)
        close(firstPeer)
        try? queue.removeEvents([.read], for: Socket.FileDescriptor(rawValue: first))
        let (second, secondPeer) = try Self.pair()
        defer { close(second); close(secondPeer) }
        #expect(second == first || secondPeer == first, "the system gives the lowest free number again")
        let reused = second == first ? second : secondPeer
        let writer = second == first ? secondPeer : second
        try queue.addEvents([.read], for: Socket.FileDescriptor(rawValue: reused))
        #expect(write(writer, "x", 1) == 1)
        var heard: [EventNotification] = []
        for _ in 0..<3 where !heard.contains(where: { $0.file.rawValue == reused }) { // (a wake-up for the added wait comes first)
            heard = try #require(try await Self.notifications(of: queue, within: 60), "no notification within 60 s")
        }
        let notification = try #require(heard.first { $0.file.rawValue == reused })
        #expect(notification.events == [.read])
        #expect(notification.errors.isEmpty)
    }

    /// A wait added while a `poll` is under way ends it (with no news), so the next one includes it: no wait is left
    /// out until a polling interval passes. (Each wait is bounded at 60 s; a correct queue answers at once.)
    @Test func aWaitAddedDuringAPollIsHeard() async throws {
        var queue = PollQueue()
        try queue.open()
        defer { try? queue.stop(); try? queue.close() }
        let (socket, peer) = try Self.pair()
        defer { close(socket); close(peer) }
        let polled = queue
        let first = Task { try await Self.notifications(of: polled, within: 60) }
        try await Task.sleep(for: .milliseconds(50))
        try queue.addEvents([.read], for: Socket.FileDescriptor(rawValue: socket))
        #expect(try await first.value == [], "the poll under way ends with no news")
        #expect(write(peer, "x", 1) == 1)
        let heard = try #require(try await Self.notifications(of: queue, within: 60))
        #expect(heard.map(\.file.rawValue) == [socket])
    }

    /// The peer's end is news to a writer as an error; a removed wait is no longer polled; `stop` ends a poll.
    @Test func endsErrorsRemovalsAndStop() async throws {
        var queue = PollQueue()
        try queue.open()
        let (socket, peer) = try Self.pair()
        defer { close(socket) }
        try queue.addEvents([.read], for: Socket.FileDescriptor(rawValue: socket))
        _ = try await Self.notifications(of: queue, within: 60) // (the wake-up)
        close(peer)
        let ended = try #require(try await Self.notifications(of: queue, within: 60))
        #expect(ended.map(\.file.rawValue) == [socket])
        #expect(ended.first?.events == [.read], "a read finds the end itself")
        try queue.removeEvents([.read], for: Socket.FileDescriptor(rawValue: socket))
        try queue.addEvents([.write], for: Socket.FileDescriptor(rawValue: socket))
        _ = try await Self.notifications(of: queue, within: 60)
        let writer = try #require(try await Self.notifications(of: queue, within: 60))
        #expect(writer.first?.errors.isEmpty == false, "writing to a closed peer is an error: \(writer)")
        try queue.removeEvents([.write], for: Socket.FileDescriptor(rawValue: socket))

        let polled = queue
        let stopping = Task { try await Self.notifications(of: polled, within: 60) }
        try await Task.sleep(for: .milliseconds(50))
        try queue.stop()
        await #expect(throws: SocketError.disconnected) { try await stopping.value }
        try queue.close()
    }
}
