import Foundation
import Glibc

// HTTP and WebSocket clients for tests and benchmarks of the devtools: requests written on a plain socket, so
// that Host, Origin and every byte are exactly what the caller says; every read bounded by a timeout.

/// Runs blocking socket work on a thread of its own, off Swift's cooperative pool (where the server runs: on
/// two cores a blocked pool thread would starve it).
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// HTTP/1.1 over a plain socket, every read bounded by a timeout.
public enum RawHTTP {
    public struct Response: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: String
    }

    public static func request(_ method: String, _ target: String, port: UInt16, headers: [String: String] = [:], body: String = "",
                        token: String) throws -> Response {
        try request(method, target, port: port, headers: headers, bytes: Array(body.utf8), token: token)
    }

    /// A request whose body is `bytes` as they are (text that is not UTF-8, say).
    public static func request(_ method: String, _ target: String, port: UInt16, headers: [String: String] = [:], bytes body: [UInt8],
                               token: String) throws -> Response {
        do {
            return try exchange(method, target, port: port, headers: headers, body: body, token: token)
        } catch let failure as RawSocket.Failure {
            throw RawSocket.Failure("\(method) \(target): \(failure)") // (which of a test's requests it was)
        }
    }

    private static func exchange(_ method: String, _ target: String, port: UInt16, headers: [String: String], body: [UInt8],
                                 token: String) throws -> Response {
        let socket = try RawSocket(port: port)
        defer { socket.close() }
        var fields = ["Host": "127.0.0.1:\(port)", "Connection": "close", "Content-Length": "\(body.count)"]
        if !token.isEmpty { fields["X-Devtools-Token"] = token }
        fields.merge(headers) { $1 }
        var text = "\(method) \(target) HTTP/1.1\r\n"
        for (name, value) in fields { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        try socket.write(Array(text.utf8) + body)
        // The head, then as many bytes as Content-Length says (the server may keep the connection open).
        var bytes: [UInt8] = []
        var headEnd: Range<Int>?
        while headEnd == nil {
            bytes += try socket.readSome()
            headEnd = bytes.firstRange(of: Array("\r\n\r\n".utf8))
        }
        let head = String(decoding: bytes[..<headEnd!.lowerBound], as: UTF8.self).split(separator: "\r\n")
        let status = Int(head.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var parsed: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            parsed[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(parsed["content-length"] ?? "0") ?? 0
        while bytes.count - headEnd!.upperBound < length { bytes += try socket.readSome() }
        let response = String(decoding: bytes[headEnd!.upperBound...], as: UTF8.self)
        return Response(status: status, headers: parsed, body: response)
    }
}

/// A WebSocket client for tests: the upgrade, then unmasked text frames from the server, read with a timeout.
public final class RawWebSocket: @unchecked Sendable { // (read by one thread at a time; `sendText` may run beside a read)
    private let socket: RawSocket
    private var frames = WebSocketFrames()
    /// What each read fills (one buffer for every read: a load generator reading many messages a second).
    private var buffer = [UInt8](repeating: 0, count: 65536)

    public init(port: UInt16, target: String, headers: [String: String] = [:]) throws {
        socket = try RawSocket(port: port)
        let fields = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
        try socket.write("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\(fields)\r\n")
        var head: [UInt8] = []
        while true {
            head += try socket.readSome()
            if let end = head.firstRange(of: Array("\r\n\r\n".utf8)) {
                let text = String(decoding: head[..<end.lowerBound], as: UTF8.self)
                guard text.hasPrefix("HTTP/1.1 101") else { throw RawSocket.Failure("not upgraded: \(text)") }
                frames.append(head[end.upperBound...])
                return
            }
        }
    }

    /// The next text message (control frames skipped; a close frame is an error naming its code).
    public func readText() throws -> String {
        while true {
            while let message = try frames.next() {
                switch message {
                case .text(let text): return text
                case .pong(let text): pongs.append(text)
                }
            }
            let count = try socket.read(into: &buffer)
            frames.append(buffer[..<count])
        }
    }

    /// The socket's descriptor and the bytes read from it but not yet taken as messages: for a caller that
    /// waits on many sockets at once (`readText` must not be called after).
    public func detach() -> (descriptor: Int32, frames: WebSocketFrames) { (socket.descriptor, frames) }

    /// Sends `text` as one masked text frame, as a client does.
    public func sendText(_ text: String) throws {
        try write(frame(opcode: 0x1, fin: true, Array(text.utf8)))
    }

    /// Sends `text` as a message of `pieces` frames (a text frame, then continuation frames), with `between`
    /// (a control frame: e.g. `RawWebSocket.ping`) after the first, as a protocol allows.
    public func sendText(_ text: String, inPieces pieces: Int, between: [UInt8]? = nil) throws {
        let bytes = Array(text.utf8)
        let size = max(1, (bytes.count + pieces - 1) / pieces)
        var frames: [UInt8] = []
        for (index, start) in stride(from: 0, to: bytes.count, by: size).enumerated() {
            let piece = Array(bytes[start..<min(bytes.count, start + size)])
            frames += frame(opcode: index == 0 ? 0x1 : 0x0, fin: start + size >= bytes.count, piece)
            if index == 0, let between { frames += between }
        }
        try write(frames)
    }

    /// A masked ping frame carrying `text`.
    public func ping(_ text: String) -> [UInt8] { frame(opcode: 0x9, fin: true, Array(text.utf8)) }

    /// Sends a masked frame of any opcode (binary: 0x2, ping: 0x9).
    public func send(opcode: UInt8, _ payload: [UInt8]) throws {
        try write(frame(opcode: opcode, fin: true, payload))
    }

    /// The payloads of the pongs read so far (`readText` skips them).
    public private(set) var pongs: [String] = []

    private func write(_ bytes: [UInt8]) throws { try socket.write(bytes) }

    private func frame(opcode: UInt8, fin: Bool, _ payload: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xffff {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xff) }
        }
        let mask: [UInt8] = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
        return frame
    }

    public func close() { socket.close() }
}

public final class RawSocket: Sendable { // (a descriptor; reads and writes are the kernel's)
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    public let descriptor: Int32

    /// Connects to 127.0.0.1:`port`. The descriptor is this socket's until it is deinitialized, `close` or not: a
    /// number closed early could be given to another descriptor of the test process (a child's process descriptor,
    /// a pipe) and a later read, write or second close would act on that one.
    public init(port: UInt16) throws {
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure("socket: \(errno)") }
        var timeout = timeval(tv_sec: 60, tv_usec: 0) // (a loaded machine's server can be slow; a hang still ends)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let failure = errno
            Glibc.close(descriptor)
            throw Failure("connect: \(failure)")
        }
        self.descriptor = descriptor
    }

    deinit { Glibc.close(descriptor) }

    public func write(_ text: String) throws { try write(Array(text.utf8)) }

    public func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            guard written > 0 else { throw Failure("write: \(errno)") }
            offset += written
        }
    }

    /// What arrives next (at least a byte); an error at the end of the stream or after 60 s of silence.
    public func readSome() throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 65536)
        return Array(buffer[..<(try read(into: &buffer))])
    }

    /// Reads what arrives next (at least a byte) into `buffer`; how many bytes. An error as `readSome`'s.
    public func read(into buffer: inout [UInt8]) throws -> Int {
        let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count > 0 else { throw Failure(count == 0 ? "the connection ended" : "read: \(errno) (a timeout?)") }
        return count
    }

    /// Ends the connection both ways (the server sees its end; a read under way returns); as often as wanted.
    /// The descriptor itself is closed when the socket is deinitialized (see `init`).
    public func close() { Glibc.shutdown(descriptor, Int32(SHUT_RDWR)) }
}

/// The server's frames read from a byte stream: bytes appended as they arrive, whole messages taken out.
public struct WebSocketFrames: Sendable {
    public enum Message: Sendable {
        case text(String)
        case pong(String)
    }

    private var pending: [UInt8] = []
    /// How much of `pending` was taken already.
    private var consumed = 0

    public init() {}

    public mutating func append(_ bytes: some Collection<UInt8>) {
        // (What was taken is dropped only now and then: dropping each message moved the rest every time.)
        if consumed > 0, consumed == pending.count || consumed > 32_768 {
            pending.removeSubrange(..<consumed)
            consumed = 0
        }
        pending += bytes
    }

    /// The next whole text or pong message, nil until more bytes arrive; other control frames are skipped and a
    /// close frame is an error naming its code.
    public mutating func next() throws -> Message? {
        while let (opcode, payload) = try nextFrame() {
            switch opcode {
            case 1: return .text(String(decoding: payload, as: UTF8.self))
            case 0xA: return .pong(String(decoding: payload, as: UTF8.self))
            default: continue
            }
        }
        return nil
    }

    /// The next whole frame, its payload as read (no copy: for a reader of many messages a second), nil until more
    /// bytes arrive; a close frame is an error naming its code.
    public mutating func nextFrame() throws -> (opcode: UInt8, payload: ArraySlice<UInt8>)? {
        let available = pending.count - consumed
        guard available >= 2 else { return nil }
        let base = consumed
        var length = Int(pending[base + 1] & 0x7f)
        var start = 2
        if length == 126 {
            guard available >= 4 else { return nil }
            length = Int(pending[base + 2]) << 8 | Int(pending[base + 3])
            start = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            length = (2..<10).reduce(0) { $0 << 8 | Int(pending[base + $1]) }
            start = 10
        }
        guard available >= start + length else { return nil }
        let opcode = pending[base] & 0x0f
        let payload = pending[(base + start)..<(base + start + length)]
        consumed += start + length
        if opcode == 8 {
            let code = payload.count >= 2 ? Int(payload[payload.startIndex]) << 8 | Int(payload[payload.startIndex + 1]) : 0
            throw RawSocket.Failure("closed \(code): \(String(decoding: payload.dropFirst(2), as: UTF8.self))")
        }
        return (opcode, payload)
    }
}
