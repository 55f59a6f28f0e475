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

    /// The notifications of one `getNotifications` (on a thread of its own, which calls `starting` first), or nil
    /// when none came within `seconds`.
    static func notifications(of queue: PollQueue, within seconds: Double,
                              starting: @escaping @Sendable () -> Void = {}) async throws -> [EventNotification]? {
        let result = Protected<Result<[EventNotification], any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            starting()
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
        // The connection ends (its socket closed on another thread) and the next socket is given its number, before
        // the pool removes its wait. (`dup2` puts the new socket at that number at once: tests running beside this
        // one open descriptors too, and would take the lowest free number first.)
        let (second, writer) = try Self.pair()
        #expect(dup2(second, first) == first)
        close(second)
        close(firstPeer)
        try? queue.removeEvents([.read], for: Socket.FileDescriptor(rawValue: first))
        let reused = first
        defer { close(reused); close(writer) }
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

    /// A socket closed while a `poll` waits on it, whose wait was removed: the poll's answer for that number ("not
    /// open") is not passed on — the number may be the next connection's by the time the pool hears it, and that
    /// connection would end on news that was never its own. (The poll is seen in `poll(2)` before the socket closes.)
    @Test func anAnswerForAnEndedRegistrationIsNotPassedOn() async throws {
        var queue = PollQueue()
        try queue.open()
        defer { try? queue.stop(); try? queue.close() }
        let (closing, closingPeer) = try Self.pair()
        let (other, otherPeer) = try Self.pair()
        defer { close(closingPeer); close(other); close(otherPeer) }
        try queue.addEvents([.read], for: Socket.FileDescriptor(rawValue: closing))
        _ = try await Self.notifications(of: queue, within: 60) // (the wake-up)
        let thread = Protected<pid_t>(0)
        let polled = queue
        let polling = Task {
            try await Self.notifications(of: polled, within: 60) { thread.withLock { $0 = Self.threadID() } }
        }
        try await Self.untilPolling(thread)
        try queue.removeEvents([.read], for: Socket.FileDescriptor(rawValue: closing))
        close(closing)
        try queue.addEvents([.read], for: Socket.FileDescriptor(rawValue: other)) // (wakes the poll: it looks again)
        let heard = try #require(try await polling.value, "no answer within 60 s")
        #expect(!heard.contains { $0.file.rawValue == closing }, "\(heard)")
    }

    /// The calling thread's id (`/proc/thread-self` links to `PID/task/TID`).
    static func threadID() -> pid_t {
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        return pid_t(link.split(separator: "/").last.map(String.init) ?? "") ?? -1
    }

    /// Waits (at most 30 s) until the thread whose id `thread` holds is in `poll(2)` (Linux names a thread's
    /// system call in `/proc/self/task/TID/syscall`: `poll` is 7, `ppoll` 271 on x86-64; 73 `ppoll` on arm64).
    static func untilPolling(_ thread: Protected<pid_t>) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let tid = thread.withLock { $0 }
            if tid > 0, let text = try? String(contentsOfFile: "/proc/self/task/\(tid)/syscall", encoding: .utf8),
               let call = text.split(separator: " ").first, ["7", "271", "73"].contains(String(call)) {
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the thread never reached poll(2) within 30 s")
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

    /// An end or an error is heard as readiness, never as an error: the pool may pass an answer on after the number
    /// was given to the next connection, whose wait must then only wake (its read finds nothing yet and it waits
    /// again) — an error would end a connection that never failed.
    @Test func anAnswerIsReadinessOnlyAndTheSocketsOwnReadSaysTheRest() async throws {
        var queue = PollQueue()
        try queue.open()
        defer { try? queue.stop(); try? queue.close() }
        let (socket, peer) = try Self.pair()
        close(peer)
        try queue.addEvents([.write], for: Socket.FileDescriptor(rawValue: socket)) // (a writer: `poll` says POLLERR)
        _ = try await Self.notifications(of: queue, within: 60) // (the wake-up)
        let ended = try #require(try await Self.notifications(of: queue, within: 60))
        #expect(ended.map(\.file.rawValue) == [socket])
        #expect(ended.first?.events == [.write] && ended.first?.errors.isEmpty == true, "\(ended)")
        // The number is given to the next connection before the pool passes the answer on: its read says "not yet".
        let (next, nextPeer) = try Self.pair()
        #expect(dup2(next, socket) == socket)
        close(next)
        defer { close(socket); close(nextPeer) }
        var byte: UInt8 = 0
        #expect(recv(socket, &byte, 1, Int32(MSG_DONTWAIT)) == -1 && errno == EAGAIN)
    }

    /// The peer's end wakes a writer, whose write meets the error; a removed wait is no longer polled; `stop` ends a
    /// poll.
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
        #expect(writer.first?.events == [.write] && writer.first?.errors.isEmpty == true, "\(writer)")
        var byte: UInt8 = 1
        #expect(send(socket, &byte, 1, Int32(MSG_NOSIGNAL)) == -1 && errno == EPIPE, "the write meets the closed peer")
        try queue.removeEvents([.write], for: Socket.FileDescriptor(rawValue: socket))

        let polled = queue
        let stopping = Task { try await Self.notifications(of: polled, within: 60) }
        try await Task.sleep(for: .milliseconds(50))
        try queue.stop()
        await #expect(throws: SocketError.disconnected) { try await stopping.value }
        try queue.close()
    }
}
