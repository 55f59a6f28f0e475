import Foundation
import LuaStoreConcurrency
import LuaStoreScripting

#if canImport(Glibc)
import Glibc
#endif

/// The devtools' front door. It listens on the public address and hands each connection's requests to the HTTP
/// server (FlyingFox, on a Unix socket in a private folder) only once their framing is unambiguous: FlyingFox keeps
/// the last of two `Content-Length` headers and reads that many bytes before any handler runs, so a request saying
/// 20 and then 40 would hang until the read timed out. Here such a request is answered 400 at once, as is one with
/// a `Transfer-Encoding` (the page always sends a length), a folded header line, or a header block over 64 KiB
/// (431). A request the server upgrades to a WebSocket (its answer is `101`) is passed through as it is from then
/// on; answers always are.
///
/// Each connection is two threads (client to server, parsing; server to client, copying), at most
/// `connectionLimit` connections at once (256 by default); reads of a request's head or body give up after `timeout`.
///
/// Admission: a connection is a stranger until one of its requests carries the token (its `token` query item or
/// `X-Devtools-Token` header, as the API checks it). A stranger must send each request's head within
/// `strangerTimeout`, or is closed; and when every place is taken, the stranger that came first is closed to make
/// room. So idle or slow connections that never show the token cannot keep the owner out: a request that carries
/// it gets in while any stranger holds a place.
final class FramingGuard: @unchecked Sendable { // (descriptors and threads; shared state behind `state`'s lock)
    static let headLimit = 64 << 10
    private let connectionLimit: Int

    let port: UInt16
    private let listener: Int32
    private let backend: String
    private let token: [UInt8]
    private let timeout: Int
    private let strangerTimeout: Int
    /// The open connections (client → server descriptors), and those not yet shown the token, by arrival.
    private struct Connections {
        var stopped = false
        /// Whether the accepting thread is still there (it closes the listener when it leaves).
        var accepting = true
        var open: [Int32: Int32] = [:]
        var strangers: [Int32: UInt64] = [:]
        var arrivals: UInt64 = 0
    }
    private let state = Protected(Connections())

    /// Listens on `address` (port 0: a free one), for requests that must carry `token`; fails in words.
    init(address: ListeningAddress, backend: String, token: String, connectionLimit: Int = 256, timeout: Int = 60,
         strangerTimeout: Int = 5) throws {
        self.backend = backend
        self.connectionLimit = max(1, connectionLimit)
        self.token = Array(token.utf8)
        self.timeout = timeout
        self.strangerTimeout = strangerTimeout
        let family = if case .ip6 = address.address { AF_INET6 } else { AF_INET }
        let listener = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw DevtoolsFailure("cannot make a socket: \(OutputFailure.words(errno))") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound: Int32 = switch address.address {
        case .ip4(var ip4): withUnsafePointer(to: &ip4) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        case .ip6(var ip6): withUnsafePointer(to: &ip6) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
        }
        }
        guard bound == 0, listen(listener, 128) == 0 else {
            let reason = OutputFailure.words(errno)
            close(listener)
            throw DevtoolsFailure(reason)
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = withUnsafePointer(to: &storage) { pointer in
            family == AF_INET6
                ? pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
                : pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        self.listener = listener
        Thread.detachNewThread { [self] in accepting() }
    }

    /// Stops accepting and ends every open connection; as often as wanted.
    ///
    /// (Under the lock: a number in `open` is its connection's until the connection leaves the table, which it does
    /// under the lock before closing; a number taken from the table and shut down after the lock was let go may
    /// already be another socket of the process — another test's connection, a pipe — and that one would end. The
    /// listener is shut down only while the accepting thread, which closes it, is still there.)
    /// Returns how many sockets it shut down (none when stopped already).
    @discardableResult func stop() -> Int {
        state.withLock { state in
            guard !state.stopped else { return 0 }
            state.stopped = true
            var count = 0
            if state.accepting { // (wakes the accepting thread, which closes it)
                shutdown(listener, Int32(SHUT_RDWR))
                count += 1
            }
            for (client, server) in state.open {
                shutdown(client, Int32(SHUT_RDWR))
                shutdown(server, Int32(SHUT_RDWR))
                count += 2
            }
            return count
        }
    }

    // MARK: Connections

    private func accepting() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE {
                    if errno == EMFILE || errno == ENFILE { usleep(10_000) }
                    if !state.withLock({ $0.stopped }) { continue }
                }
                state.withLock { state in // (with `stop`'s lock: it shuts the listener down only while it is open)
                    state.accepting = false
                    close(listener)
                }
                return
            }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            guard let server = connectBackend() else {
                // (Said, not dropped: a client whose connection ends without a word cannot tell why.)
                Self.send(Array(Self.refusal(503, "the devtools server is not answering").answer.utf8), to: client)
                Self.linger(client)
                close(client)
                continue
            }
            let admitted = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                if state.open.count >= connectionLimit {
                    // Room is made by closing the stranger that came first (its threads end and close it).
                    guard let (first, _) = state.strangers.min(by: { $0.value < $1.value }), let itsServer = state.open[first] else {
                        return false
                    }
                    state.strangers.removeValue(forKey: first)
                    state.open.removeValue(forKey: first)
                    shutdown(first, Int32(SHUT_RDWR))
                    shutdown(itsServer, Int32(SHUT_RDWR))
                }
                state.open[client] = server
                state.arrivals += 1
                state.strangers[client] = state.arrivals
                return true
            }
            guard admitted else {
                close(client)
                close(server)
                continue
            }
            Thread.detachNewThread { [self] in serve(client: client, server: server) }
        }
    }

    private func connectBackend() -> Int32? {
        let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard server >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(backend.utf8CString)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.prefix(raw.count - 1).enumerated() { raw[index] = UInt8(bitPattern: byte) }
        }
        // A signal (a child process ending, say) may interrupt `connect`: the connection then goes on being made,
        // and is waited for rather than given up.
        while true {
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if connected == 0 || errno == EISCONN { return server }
            if errno == EINTR { continue }
            if errno == EALREADY || errno == EINPROGRESS {
                var ready = pollfd(fd: server, events: Int16(POLLOUT), revents: 0)
                guard poll(&ready, 1, 5_000) == 1 else { break }
                continue // (the next `connect` says EISCONN, or why it failed)
            }
            break
        }
        close(server)
        return nil
    }

    /// What a connection's two threads tell each other: whether the server's answer to an upgrade request was
    /// `101` (the copying thread tells), and whether the connection is being refused (the parsing thread tells:
    /// then the copying thread leaves the client open for the refusal).
    private final class Upgrade: @unchecked Sendable { // (behind `condition`)
        let condition = NSCondition()
        var awaiting = false
        var answer: Bool?
        var refusing = false
    }

    private func serve(client: Int32, server: Int32) {
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        var strangers = timeval(tv_sec: strangerTimeout, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &strangers, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let upgrade = Upgrade()
        let copied = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            Self.copyAnswers(from: server, to: client, upgrade: upgrade)
            copied.signal()
        }
        let refusal = forwardRequests(from: client, to: server, upgrade: upgrade)
        if let refusal {
            upgrade.condition.lock()
            upgrade.refusing = true
            upgrade.condition.unlock()
            // The server answers what it was sent before, then sees the end; the refusal comes after its answers.
            shutdown(server, Int32(SHUT_WR))
            copied.wait()
            Self.send(Array(refusal.utf8), to: client)
            Self.linger(client)
        } else {
            shutdown(server, Int32(SHUT_WR))
            copied.wait()
            // (What the client still sends — the rest of a body the server answered without reading, say — is
            // read and dropped first: closing over unread bytes resets the connection, and the answer with it.)
            Self.linger(client)
        }
        state.withLock { state in
            if state.open[client] == server { state.open.removeValue(forKey: client) }
            state.strangers.removeValue(forKey: client)
        }
        close(client)
        close(server)
    }

    /// Whether the connection `client` has shown the token (sticky: a later request without it is the API's to
    /// refuse); once it has, its reads get the full `timeout` and it is never closed to make room.
    private func admit(_ client: Int32, head: [UInt8]) -> Bool {
        let known = state.withLock { $0.strangers[client] == nil }
        if known { return true }
        guard Self.carries(token, in: head) else { return false }
        state.withLock { _ = $0.strangers.removeValue(forKey: client) }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        return true
    }

    /// Whether a request's head carries `token`: as its target's `token` query item or an `X-Devtools-Token`
    /// header (compared in time that does not depend on where they differ).
    static func carries(_ token: [UInt8], in head: [UInt8]) -> Bool {
        func same(_ given: some Collection<UInt8>) -> Bool {
            guard given.count == token.count else { return false }
            return zip(given, token).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
        }
        let lines = head.split(separator: 10, omittingEmptySubsequences: false).map { $0.last == 13 ? $0.dropLast() : $0 }
        guard let requestLine = lines.first else { return false }
        let parts = requestLine.split(separator: 32)
        if parts.count >= 2, let question = parts[1].firstIndex(of: UInt8(ascii: "?")) {
            for item in parts[1][(question + 1)...].split(separator: UInt8(ascii: "&")) where item.starts(with: Array("token=".utf8)) {
                if same(item.dropFirst(6)) { return true }
            }
        }
        let header = Array("x-devtools-token:".utf8)
        for line in lines.dropFirst() where line.count > header.count {
            guard zip(line.prefix(header.count), header).allSatisfy({ ($0.0 | 0x20) == $0.1 || $0.0 == $0.1 }) else { continue }
            var value = line.dropFirst(header.count)
            while value.first == 32 || value.first == 9 { value = value.dropFirst() }
            while value.last == 32 || value.last == 9 { value = value.dropLast() }
            if same(value) { return true }
        }
        return false
    }

    /// Copies the server's answers to the client until either side ends; notes whether the first answer after
    /// an upgrade request is `101`.
    private static func copyAnswers(from server: Int32, to client: Int32, upgrade: Upgrade) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(server, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            upgrade.condition.lock()
            if upgrade.awaiting && upgrade.answer == nil {
                upgrade.answer = buffer[..<count].starts(with: Array("HTTP/1.1 101".utf8))
                upgrade.condition.broadcast()
            }
            upgrade.condition.unlock()
            guard send(Array(buffer[..<count]), to: client) else { break }
        }
        upgrade.condition.lock()
        if upgrade.awaiting && upgrade.answer == nil { upgrade.answer = false }
        upgrade.condition.broadcast()
        let refusing = upgrade.refusing
        upgrade.condition.unlock()
        // The server ended the connection (or the client is gone): so does the client's side once its answers are
        // out — unless the parsing thread is refusing a request, and writes its answer next. The parsing thread
        // reads on until the client closes too (or its time runs out): ending the client's reading here would
        // drop bytes still on their way, and closing over them resets the connection before the answer is read.
        if !refusing { shutdown(client, Int32(SHUT_WR)) }
    }

    /// Reads the client's requests, forwarding each whose framing is sound; returns the answer for one that is
    /// not (the connection then ends), or nil when the client is done.
    private func forwardRequests(from client: Int32, to server: Int32, upgrade: Upgrade) -> String? {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        func readMore() -> Bool {
            while true {
                let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return false }
                pending.append(contentsOf: buffer[..<count])
                return true
            }
        }
        while true {
            // The head: up to the blank line.
            var headEnd: Int?
            var searched = 0
            let started = ContinuousClock.now
            while headEnd == nil {
                headEnd = Self.endOfHead(pending, from: max(0, searched - 3))
                if headEnd != nil { break }
                searched = pending.count
                if pending.count > Self.headLimit {
                    return Self.refusal(431, "the request's header block is over \(Self.headLimit / 1024) KiB").answer
                }
                let allowed = state.withLock { $0.strangers[client] == nil } ? timeout : strangerTimeout
                if ContinuousClock.now - started > .seconds(allowed) {
                    return Self.refusal(408, "the request's header block did not arrive within \(allowed) s").answer
                }
                guard readMore() else { return pending.isEmpty ? nil : Self.refusal(400, "the connection ended inside a request's header block").answer }
            }
            guard let headEnd else { return nil }
            if headEnd > Self.headLimit {
                return Self.refusal(431, "the request's header block is over \(Self.headLimit / 1024) KiB").answer
            }
            let head = Array(pending[..<headEnd])
            _ = admit(client, head: head)
            let framing: Framing
            switch Self.framing(of: head) {
            case .success(let found): framing = found
            case .failure(let refusal): return refusal.answer
            }
            guard Self.send(head, to: server) else { return nil }
            pending.removeFirst(headEnd)
            // The body: exactly its length.
            var left = framing.length
            while left > 0 {
                if pending.isEmpty { guard readMore() else { return nil } }
                let part = min(left, pending.count)
                guard Self.send(Array(pending[..<part]), to: server) else { return nil }
                pending.removeFirst(part)
                left -= part
            }
            guard framing.upgrade else { continue }
            // An upgrade: if the server answers 101, what follows is the WebSocket's, passed through as it is.
            upgrade.condition.lock()
            upgrade.awaiting = true
            upgrade.answer = nil
            while upgrade.answer == nil {
                if !upgrade.condition.wait(until: Date().addingTimeInterval(TimeInterval(timeout))) { upgrade.answer = false }
            }
            let switched = upgrade.answer == true
            upgrade.awaiting = false
            upgrade.condition.unlock()
            guard switched else { continue }
            var unlimited = timeval(tv_sec: 0, tv_usec: 0) // (a page may stay quiet for hours)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &unlimited, socklen_t(MemoryLayout<timeval>.size))
            if !pending.isEmpty { guard Self.send(pending, to: server) else { return nil } }
            while true {
                let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0, Self.send(Array(buffer[..<count]), to: server) else { return nil }
            }
        }
    }

    // MARK: Framing

    struct Framing: Equatable {
        var length: Int
        var upgrade: Bool
    }

    struct Refusal: Error, Equatable {
        let answer: String
    }

    /// The index just past the blank line that ends a request's head (CRLF CRLF, or LF LF), searching from `start`.
    static func endOfHead(_ bytes: [UInt8], from start: Int) -> Int? {
        var index = start
        while index < bytes.count {
            if bytes[index] == 10 {
                if index + 1 < bytes.count, bytes[index + 1] == 10 { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == 13, bytes[index + 2] == 10 { return index + 3 }
            }
            index += 1
        }
        return nil
    }

    /// How long the body after `head` is, and whether the request asks for an upgrade — or why its framing is
    /// refused.
    static func framing(of head: [UInt8]) -> Result<Framing, Refusal> {
        // (Split as bytes: as a String, CR LF is one character.)
        var lines = head.split(separator: 10, omittingEmptySubsequences: false).map { line in
            String(decoding: line.last == 13 ? line.dropLast() : line, as: UTF8.self)
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        var lengths: [String] = []
        var upgrade = false
        for line in lines.dropFirst() {
            if line.first == " " || line.first == "\t" {
                return .failure(refusal(400, "a header line is folded onto the next (obsolete line folding is not accepted)"))
            }
            guard let colon = line.firstIndex(of: ":") else {
                return .failure(refusal(400, "a header line has no colon: \(line.prefix(80))"))
            }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            switch name {
            case "content-length":
                lengths += value.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            case "transfer-encoding":
                return .failure(refusal(400, "a request with a Transfer-Encoding is not accepted: send its body with a Content-Length"))
            case "upgrade":
                upgrade = upgrade || value.lowercased().contains("websocket")
            default:
                break
            }
        }
        let distinct = Set(lengths)
        guard distinct.count <= 1 else {
            return .failure(refusal(400, "the request has conflicting Content-Length headers (\(lengths.joined(separator: ", "))): a request says its length once"))
        }
        guard let text = distinct.first else { return .success(Framing(length: 0, upgrade: upgrade)) }
        guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }), let length = Int(text) else {
            return .failure(refusal(400, "the request's Content-Length is not a number: \(text.prefix(40))"))
        }
        return .success(Framing(length: length, upgrade: upgrade))
    }

    static func refusal(_ status: Int, _ message: String) -> Refusal {
        let body = DevtoolsAPI.errorJSON(message)
        let phrase = switch status {
        case 408: "Request Timeout"
        case 431: "Request Header Fields Too Large"
        case 503: "Service Unavailable"
        default: "Bad Request"
        }
        return Refusal(answer: "HTTP/1.1 \(status) \(phrase)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    }

    /// Ends the client's side after a refusal, reading (and dropping) what it still sends for up to a second or
    /// 1 MiB: closing with unread bytes would reset the connection, and the client could lose the answer.
    static func linger(_ client: Int32) {
        shutdown(client, Int32(SHUT_WR))
        var brief = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &brief, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        let deadline = ContinuousClock.now + .seconds(1)
        var dropped = 0
        while ContinuousClock.now < deadline, dropped < 1 << 20 {
            let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            dropped += count
        }
    }

    /// Writes all of `bytes`; false when the other side is gone.
    @discardableResult
    static func send(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }
}
