import FlyingSocks
import Foundation
import Glibc

// FlyingFox's servers wait for their sockets through an event queue. Its own Linux queue (`ePoll`) keeps, beside the
// kernel's registrations, a table of what each descriptor number is registered for, and skips `epoll_ctl` when a
// wait asks for what the table says is there. A connection that closes its socket right after its wait ends — on
// another thread, before the pool's next `epoll_ctl` on that number has run — leaves the table stale (the kernel
// dropped the closed socket, the `epoll_ctl` fails and the table keeps the entry); the next socket given that number
// is then never registered (its request hangs) or fails to be (the server closes it unanswered). On a busy machine,
// with many servers in one process, that happened.
//
// `PollQueue` keeps no such second truth: what is waited for is one table, read afresh by every `poll(2)`, and a
// wait added while a `poll` runs wakes it (a pipe) so that the next one includes it.
//
// A `poll` reads a copy of that table, and its answer may come after the table changed: a socket closed while it
// was polled is answered "not open" (`POLLNVAL`) — and when the number is given to the next connection before the
// pool hears the answer, that connection's wait heard an error that was another's, and the connection ended. So
// each descriptor's waits are one registration, numbered when it begins (`generation`), and an answer is passed
// on only for the registration it was polled for, and only if what it says still holds (a "not open" for a
// number that is open again is news of a socket that is gone).
//
// Even so an answer reaches its waiter later, on the pool's actor, and by then the waiter may have been cancelled,
// its socket closed and the number given to the next connection, whose wait hears it. So an answer never carries an
// error: an end, an error or "not open" is said as readiness, and the socket's own read or write finds out what
// holds for it (the end, the error — or, for a socket that only got the number, "not yet": it waits again).

/// An `EventQueue` for FlyingFox's `SocketPool` on `poll(2)`, whose waits survive descriptor numbers being reused.
public struct PollQueue: EventQueue, Sendable {
    private let shared = Shared()

    /// What every copy of the queue sees (the pool polls a copy on a dispatch queue while it adds waits).
    private final class Shared: @unchecked Sendable { // (behind `lock`)
        let lock = NSLock()
        var waited: [Int32: Registration] = [:]
        /// The number the next registration gets.
        var nextGeneration: UInt64 = 1
        /// The pipe a new wait or `stop` writes a byte to, to end the `poll` under way.
        var wake: (read: Int32, write: Int32) = (-1, -1)
        var stopped = true
    }

    /// What is waited for on one descriptor, and which registration this is: one begins when a descriptor with no
    /// waits gets one, and ends when its last wait is removed.
    struct Registration {
        var events: Socket.Events
        var generation: UInt64
    }

    public init() {}

    public mutating func open() throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw SocketError.makeFailed("pipe") }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        shared.lock.withLock {
            shared.waited = [:]
            shared.wake = (ends[0], ends[1])
            shared.stopped = false
        }
    }

    public mutating func stop() throws {
        let wake = shared.lock.withLock { () -> Int32 in
            shared.stopped = true
            shared.waited = [:]
            return shared.wake.write
        }
        guard wake >= 0 else { throw SocketError.disconnected }
        Self.wakeUp(wake)
    }

    public mutating func close() throws {
        // (Under the lock: a `poll` that ended drains the pipe under it, never after its ends were closed.)
        shared.lock.withLock {
            shared.stopped = true
            if shared.wake.read >= 0 {
                Glibc.close(shared.wake.read)
                Glibc.close(shared.wake.write)
            }
            shared.wake = (-1, -1)
        }
    }

    public mutating func addEvents(_ events: Socket.Events, for socket: Socket.FileDescriptor) throws {
        let wake = try shared.lock.withLock { () -> Int32 in
            guard !shared.stopped else { throw SocketError.disconnected }
            if shared.waited[socket.rawValue] == nil {
                shared.waited[socket.rawValue] = Registration(events: events, generation: shared.nextGeneration)
                shared.nextGeneration += 1
            } else {
                shared.waited[socket.rawValue]?.events.formUnion(events)
            }
            return shared.wake.write
        }
        Self.wakeUp(wake)
    }

    public mutating func removeEvents(_ events: Socket.Events, for socket: Socket.FileDescriptor) throws {
        shared.lock.withLock {
            guard var left = shared.waited[socket.rawValue] else { return }
            left.events.subtract(events)
            shared.waited[socket.rawValue] = left.events.isEmpty ? nil : left
        }
    }

    /// Waits until a waited-for socket is ready, or a wait was added (then: no notifications, and the pool asks
    /// again), or the queue was stopped (`SocketError.disconnected`).
    /// An answer is passed on only for the registration it was polled for (see the top of the file).
    public func getNotifications() throws -> [EventNotification] {
        var generations: [UInt64] = []
        var descriptors = try shared.lock.withLock { () -> [pollfd] in
            guard !shared.stopped else { throw SocketError.disconnected }
            var descriptors = [pollfd(fd: shared.wake.read, events: Int16(POLLIN), revents: 0)]
            for (descriptor, registration) in shared.waited {
                descriptors.append(pollfd(fd: descriptor, events: Self.mask(of: registration.events), revents: 0))
                generations.append(registration.generation)
            }
            return descriptors
        }
        let status = poll(&descriptors, nfds_t(descriptors.count), -1)
        if status < 0 {
            guard errno == EINTR else { throw SocketError.makeFailed("poll") }
            return []
        }
        return try shared.lock.withLock {
            guard !shared.stopped else { throw SocketError.disconnected }
            if descriptors[0].revents != 0 { Self.drain(shared.wake.read) }
            return zip(descriptors.dropFirst(), generations).compactMap { descriptor, generation in
                guard shared.waited[descriptor.fd]?.generation == generation else { return nil }
                if Int32(descriptor.revents) & Int32(POLLNVAL) != 0, fcntl(descriptor.fd, F_GETFD) != -1 { return nil }
                return Self.notification(descriptor)
            }
        }
    }

    // MARK: poll(2)'s words

    static func mask(of events: Socket.Events) -> Int16 {
        var mask: Int32 = 0
        if events.contains(.read) { mask |= Int32(POLLIN) }
        if events.contains(.write) { mask |= Int32(POLLOUT) }
        return Int16(mask)
    }

    /// What `poll` said of one socket, as the pool hears it: readiness only (see the top of the file). An end, an
    /// error or "not open" wakes every wait on the socket, whose read or write then meets it.
    static func notification(_ descriptor: pollfd) -> EventNotification? {
        let ready = Int32(descriptor.revents)
        guard ready != 0 else { return nil }
        var events = Socket.Events()
        if ready & Int32(POLLIN) != 0 { events.insert(.read) }
        if ready & Int32(POLLOUT) != 0 { events.insert(.write) }
        if ready & Int32(POLLHUP | POLLERR | POLLNVAL) != 0 {
            if descriptor.events & Int16(POLLIN) != 0 { events.insert(.read) }
            if descriptor.events & Int16(POLLOUT) != 0 { events.insert(.write) }
        }
        return EventNotification(file: Socket.FileDescriptor(rawValue: descriptor.fd), events: events, errors: [])
    }

    private static func wakeUp(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(descriptor, &byte, 1) // (a full pipe is already a wake-up)
    }

    private static func drain(_ descriptor: Int32) {
        var bytes = [UInt8](repeating: 0, count: 256)
        while read(descriptor, &bytes, bytes.count) > 0 {}
    }
}

public extension AsyncSocketPool where Self == SocketPool<PollQueue> {
    /// A pool on `PollQueue`: for every FlyingFox server of this package (`HTTPServer(…, pool: .polling(), …)`).
    static func polling(logger: some Logging = .disabled) -> SocketPool<PollQueue> {
        SocketPool(queue: PollQueue(), logger: logger)
    }
}
