import Foundation
import LuaStoreScripting

/// The lines of a file or of standard input, read in blocks as they are asked for: memory holds a block and the
/// line being read, whatever the length of the input. (`run --actions` and `replay` read through it.)
final class LineReader: @unchecked Sendable { // (read by one thread at a time: opened, then handed over)
    /// Why the input cannot be read, in words.
    struct Unreadable: Error {
        let reason: String
    }

    private static let blockSize = 64 << 10

    private let descriptor: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var block = [UInt8](repeating: 0, count: LineReader.blockSize)
    private var ended = false
    /// The number of the line `next` returned last (1 for the first).
    private(set) var number = 0

    /// Reads `path`; `-` is standard input.
    init(path: String) throws(Unreadable) {
        guard path != "-" else {
            descriptor = STDIN_FILENO
            return
        }
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Unreadable(reason: OutputFailure.words(errno)) }
        var status = stat()
        if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            close(descriptor)
            throw Unreadable(reason: "it is a folder")
        }
    }

    deinit {
        if descriptor != STDIN_FILENO { close(descriptor) }
    }

    /// Reads no further: the next `next` returns nil.
    func finish() {
        ended = true
        buffer = []
        start = 0
    }

    /// The next line without its line break, and whether it had one (false only for a last line cut short); nil
    /// at the end. `beforeWaiting` runs before each read of the input (which may wait for a pipe).
    func next(beforeWaiting: () -> Void = {}) throws(Unreadable) -> (line: ArraySlice<UInt8>, complete: Bool)? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 10) {
                defer { start = newline + 1 }
                number += 1
                return (buffer[start..<newline], true)
            }
            if ended {
                guard start < buffer.count else { return nil }
                defer { start = buffer.count }
                number += 1
                return (buffer[start...], false)
            }
            buffer.removeSubrange(0..<start) // keep only the unread part
            start = 0
            beforeWaiting()
            var count: Int
            repeat {
                count = block.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            } while count < 0 && errno == EINTR
            if count < 0 { throw Unreadable(reason: OutputFailure.words(errno)) }
            if count == 0 { ended = true }
            buffer.append(contentsOf: block[0..<count])
        }
    }
}
