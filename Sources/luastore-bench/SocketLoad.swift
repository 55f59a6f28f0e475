import CSocketWait
import Foundation
import Glibc
import LuaStoreCore
import RawHTTPClient

/// Load on many WebSockets from a few threads, as wrk2 makes it: each thread owns a share of the sockets and waits
/// on all of them at once until an answer arrives or a send is due; frames are built in one buffer and read without
/// a copy or a string. (A thread per socket — two for the open loop: 200 threads on two cores — with a string and a
/// few arrays per message took more of the machine than the server did, and the server's threads waited behind
/// the generator's: closed-loop throughput read 33–45k actions/s where the server answers 64–99k.)
enum SocketLoad {
    /// The generator's threads (wrk's default).
    static let threads = 2

    /// One client: its socket, the frames read from it, what it sent and heard.
    struct Client {
        let number: Int
        let descriptor: Int32
        var frames: WebSocketFrames
        var sent = 0, heard = 0, late = 0
    }

    /// Clients sending `perSecond` actions each on a fixed schedule for `seconds`; each answer's latency in
    /// seconds, from when its action was due (a late send counts against the server, as a real client's would).
    static func openLoop(_ sockets: [RawWebSocket], perSecond: Double, seconds: Double) throws -> [Double] {
        let start = DispatchTime.now().uptimeNanoseconds + 20_000_000
        let count = Int(perSecond * seconds), interval = 1e9 / perSecond
        let run = String(UInt32.random(in: 0...UInt32.max), radix: 36) // (ids of their own: a later run's are never "repeated")
        let prefix = Array(#"{"id":"\#(run)-"#.utf8)
        // (Clients start spread over one interval, not all at once.)
        @Sendable func due(_ client: Int, _ index: Int) -> UInt64 {
            start + UInt64(interval * Double(client) / Double(sockets.count) + interval * Double(index))
        }
        let shares = try onThreads(sockets) { clients in
            var latencies: [Double] = []
            latencies.reserveCapacity(clients.count * count)
            var sender = FrameSender()
            // Within a thread the sends are due in turn — its clients' offsets ascend and are all below one
            // interval — so the next is the one after the last: client `next % clients.count`, its send
            // `next / clients.count`.
            var next = 0
            let total = clients.count * count
            try pump(&clients, done: { next == total && $0.heard == count }) { clients, now in
                while next < total {
                    let slot = next % clients.count, index = next / clients.count
                    let time = due(clients[slot].number, index)
                    guard time <= now else { return time }
                    try sender.send(clients[slot].descriptor, prefix, index)
                    clients[slot].sent += 1
                    next += 1
                }
                return .max
            } heard: { client, payload, now in
                guard let index = number(in: payload, after: prefix) else { return }
                client.heard += 1
                latencies.append(Double(now - min(due(client.number, index), now)) / 1e9)
            }
            return latencies
        }
        return shares.flatMap { $0 }
    }

    /// Clients keeping `inFlight` actions unanswered until `seconds` passed; the number of answers heard in that
    /// time.
    static func closedLoop(_ sockets: [RawWebSocket], inFlight: Int, seconds: Double) throws -> Int {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        let answer = Array(#"{"id":""#.utf8)
        let shares = try onThreads(sockets) { clients in
            var sender = FrameSender()
            let prefixes = clients.map { Array(#"{"id":"c\#($0.number)-"#.utf8) }
            for slot in clients.indices {
                for _ in 0..<inFlight {
                    try sender.send(clients[slot].descriptor, prefixes[slot], clients[slot].sent)
                    clients[slot].sent += 1
                }
            }
            try pump(&clients, done: { $0.heard + $0.late == $0.sent }) { _, now in
                now < deadline ? deadline : .max
            } heard: { client, payload, now in
                guard payload.starts(with: answer) else { return } // (a props change)
                if now < deadline {
                    client.heard += 1
                    try sender.send(client.descriptor, prefixes[client.number / threads], client.sent)
                    client.sent += 1
                } else {
                    client.late += 1
                }
            }
            return clients.reduce(0) { $0 + $1.heard }
        }
        return shares.reduce(0, +)
    }

    /// Runs `body` on each of `threads` threads with its share of `sockets` (socket `n` on thread `n % threads`, in
    /// order); what each returned, or the first failure. The sockets are closed after.
    private static func onThreads<Share: Sendable>(_ sockets: [RawWebSocket],
                                                   _ body: @escaping @Sendable (inout [Client]) throws -> Share) throws -> [Share] {
        let results = Protected<[Result<Share, any Error>]>([])
        let group = DispatchGroup()
        for thread in 0..<min(threads, sockets.count) {
            let shares = sockets.indices.filter { $0 % threads == thread }.map { number in
                let (descriptor, frames) = sockets[number].detach()
                return (number, descriptor, frames)
            }
            group.enter()
            Thread {
                var clients = shares.map { Client(number: $0.0, descriptor: $0.1, frames: $0.2) }
                let result = Result { try body(&clients) }
                results.withLock { $0.append(result) }
                group.leave()
            }.start()
        }
        group.wait()
        sockets.forEach { $0.close() }
        return try results.withLock { $0 }.map { try $0.get() }
    }

    /// Waits on every client's socket until `done` holds for each: `due` is called first and after every wake-up
    /// (it sends what is due and says when the next send is, `.max` for none); `heard` for each text message's
    /// payload, with the time it was read. At most a minute without a message.
    private static func pump(_ clients: inout [Client], done: (Client) -> Bool, due: (inout [Client], UInt64) throws -> UInt64,
                             heard: (inout Client, ArraySlice<UInt8>, UInt64) throws -> Void) throws {
        let instance = socket_wait_create()
        guard instance >= 0 else { throw RawSocket.Failure("epoll_create1: \(errno)") }
        defer { close(instance) }
        for slot in clients.indices where socket_wait_add(instance, clients[slot].descriptor, UInt64(slot)) != 0 {
            throw RawSocket.Failure("epoll_ctl: \(errno)")
        }
        var ready = [UInt64](repeating: 0, count: 64)
        var buffer = [UInt8](repeating: 0, count: 65536)
        var lastHeard = DispatchTime.now().uptimeNanoseconds
        while true {
            var now = DispatchTime.now().uptimeNanoseconds
            let next = try due(&clients, now)
            if next == .max, clients.allSatisfy(done) { return }
            guard now - min(lastHeard, now) < 60_000_000_000 else { throw RawSocket.Failure("no answer in a minute") }
            let wait = next == .max ? 1_000_000_000 : next - min(next, now)
            let count = socket_wait(instance, &ready, Int32(ready.count), Int64(wait))
            guard count > 0 else {
                if count < 0, errno != EINTR { throw RawSocket.Failure("epoll_pwait2: \(errno)") }
                continue
            }
            now = DispatchTime.now().uptimeNanoseconds
            lastHeard = now
            for tag in ready[..<Int(count)] {
                let slot = Int(tag)
                let read = buffer.withUnsafeMutableBytes { recv(clients[slot].descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if read < 0, errno == EAGAIN || errno == EINTR { continue }
                guard read > 0 else { throw RawSocket.Failure(read == 0 ? "the connection ended" : "recv: \(errno)") }
                clients[slot].frames.append(buffer[..<read])
                while let (opcode, payload) = try clients[slot].frames.nextFrame() {
                    if opcode == 1 { try heard(&clients[slot], payload, now) }
                }
            }
        }
    }

    /// The decimal number in `payload` right after `prefix`, if `payload` starts with it.
    private static func number(in payload: ArraySlice<UInt8>, after prefix: [UInt8]) -> Int? {
        guard payload.starts(with: prefix) else { return nil }
        var value = 0, digits = 0
        for byte in payload.dropFirst(prefix.count) {
            guard byte >= 0x30, byte <= 0x39 else { break }
            value = value * 10 + Int(byte - 0x30)
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// Writes an action's frame, `{"id":"<prefix><number>","action":{"type":"increment"}}` masked as a client
    /// masks it, from one buffer.
    struct FrameSender {
        private var frame: [UInt8] = []
        /// The masks' source (xorshift: a mask must differ from frame to frame, not be hard to guess).
        private var seed = UInt64.random(in: 1...UInt64.max)
        private static let rest = Array(#"","action":{"type":"increment"}}"#.utf8)

        mutating func send(_ descriptor: Int32, _ prefix: [UInt8], _ number: Int) throws {
            frame.removeAll(keepingCapacity: true)
            frame += [0x81, 0x80, 0, 0, 0, 0] // (the length and mask filled in below)
            frame += prefix
            frame += String(number).utf8
            frame += Self.rest
            let length = frame.count - 6
            precondition(length < 126, "an action's frame is short")
            frame[1] = 0x80 | UInt8(length)
            seed ^= seed << 13
            seed ^= seed >> 7
            seed ^= seed << 17
            for offset in 0..<4 { frame[2 + offset] = UInt8(truncatingIfNeeded: seed >> (offset * 8)) }
            for offset in 0..<length { frame[6 + offset] ^= frame[2 + (offset & 3)] }
            var written = 0
            while written < frame.count {
                let count = frame.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + written, $0.count - written) }
                guard count > 0 else { throw RawSocket.Failure("write: \(errno)") }
                written += count
            }
        }
    }
}
