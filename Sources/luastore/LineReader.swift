import Foundation
import LuaStoreScripting

/// The lines of a file or of standard input, read in blocks as they are asked for: memory holds a block and the
/// line being read, whatever the length of the input, and a line costs its length to find (each byte is looked at
/// once, however many blocks the line spans). A line longer than `maximumLength` is an error naming it, so an
/// input without line breaks (`/dev/zero`) ends. (`run --actions` and `replay` read through it.)
final class LineReader: @unchecked Sendable { // (read by one thread at a time: opened, then handed over)
    /// Why the input cannot be read, in words.
    struct Unreadable: Error {
        let reason: String
    }

    private static let blockSize = 64 << 10
    /// The longest line read by default: 64 MiB (`--max-line-bytes`).
    static let defaultMaximumLength = 64 << 20

    private let descriptor: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var block = [UInt8](repeating: 0, count: LineReader.blockSize)
    private var ended = false
    /// Where the search for the next line break goes on: the bytes from `start` up to here hold none.
    private var scanned = 0
    /// The longest line, in bytes (without its line break).
    let maximumLength: Int
    /// The number of the line `next` returned last (1 for the first).
    private(set) var number = 0

    /// Reads `path`; `-` is standard input.
    init(path: String, maximumLength: Int = LineReader.defaultMaximumLength) throws(Unreadable) {
        self.maximumLength = maximumLength
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
        scanned = 0
    }

    /// The error for the line being read, longer than `maximumLength`; reading ends with it.
    private func tooLong() -> Unreadable {
        let line = number + 1
        finish()
        return Unreadable(reason: "line \(line) is longer than \(LineReader.describe(bytes: maximumLength)) (the limit of --max-line-bytes)")
    }

    /// A size in words: "64 MiB", "1000 bytes".
    static func describe(bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }

    /// The next line without its line break, and whether it had one (false only for a last line cut short); nil
    /// at the end. `beforeWaiting` runs before each read of the input (which may wait for a pipe).
    func next(beforeWaiting: () -> Void = {}) throws(Unreadable) -> (line: ArraySlice<UInt8>, complete: Bool)? {
        while true {
            if let newline = buffer.firstLineBreak(from: max(start, scanned)) {
                guard newline - start <= maximumLength else { throw tooLong() }
                defer {
                    start = newline + 1
                    scanned = start
                }
                number += 1
                return (buffer[start..<newline], true)
            }
            scanned = buffer.count
            guard buffer.count - start <= maximumLength else { throw tooLong() }
            if ended {
                guard start < buffer.count else { return nil }
                defer {
                    start = buffer.count
                    scanned = start
                }
                number += 1
                return (buffer[start...], false)
            }
            buffer.removeSubrange(0..<start) // keep only the unread part
            scanned -= start
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
