import Foundation
import Glibc
import RawHTTPClient
import Testing

/// The tests' socket client: closing it ends the connection and never touches a descriptor that is not its own.
@Suite struct RawSocketTests {
    /// A listener on 127.0.0.1 with a port of the kernel's choosing.
    private static func listener() throws -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 8) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else { throw RawSocket.Failure("listener: \(errno)") }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    /// A test that closed a socket twice (once by hand, once in a `defer`) closed, the second time, whatever the
    /// process had opened under that number in between: in the serve suite, a concurrent child's process descriptor,
    /// whose wait then never ended.
    @Test func closingTwiceLeavesOtherDescriptorsAlone() throws {
        let (listening, port) = try Self.listener()
        defer { Glibc.close(listening) }
        let socket = try RawSocket(port: port)
        let accepted = accept(listening, nil, nil)
        defer { Glibc.close(accepted) }
        socket.close()
        // The lowest free number: the socket's, had closing it given the number back.
        let file = open("/dev/null", O_RDONLY)
        defer { Glibc.close(file) }
        socket.close()
        #expect(fcntl(file, F_GETFD) != -1, "a second close of a socket closed descriptor \(file), which was not its own")
        // The server saw the connection end at the first close.
        var byte: UInt8 = 0
        #expect(read(accepted, &byte, 1) == 0)
        // Reading a closed socket fails; it never reads some other descriptor.
        #expect(throws: RawSocket.Failure.self) { try socket.readSome() }
    }
}
