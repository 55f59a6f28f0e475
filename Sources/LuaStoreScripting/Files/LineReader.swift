import Foundation

/// The lines of a file, of standard input, of bytes in memory or of blocks handed over one at a time (a
/// database's rows), read as they are asked for: memory holds a block and the line being read, whatever the
/// length of the input, and a line costs its length to find (each byte is looked at once, however many blocks the
/// line spans). A line longer than `maximumLength` is an error naming it, so an input without line breaks
/// (`/dev/zero`) ends. The one line reader: `run --actions`, and every reader of recordings (`RecordingLines`).
public final class LineReader: @unchecked Sendable { // (read by one thread at a time: opened, then handed over)
    /// Why the input cannot be read, in words.
    public struct Unreadable: Error, CustomStringConvertible {
        /// Why, in words (`it is a folder`, or the system's reason an open failed).
        public let reason: String

        /// The error saying `reason`.
        public init(reason: String) {
            self.reason = reason
        }

        public var description: String { reason }
    }

    private static let blockSize = 64 << 10
    /// The longest line read by default: 64 MiB (`--max-line-bytes`).
    public static let defaultMaximumLength = 64 << 20

    /// Where the bytes come from.
    private enum Source {
        case descriptor(Int32)
        case blocks(() throws(Unreadable) -> [UInt8]?)
        case none
    }

    private let source: Source
    private var buffer: [UInt8] = []
    private var start = 0
    private lazy var block = [UInt8](repeating: 0, count: LineReader.blockSize)
    private var ended = false
    /// Where the search for the next line break goes on: the bytes from `start` up to here hold none.
    private var scanned = 0
    /// The longest line, in bytes (without its line break).
    public let maximumLength: Int
    /// The number of the line `next` returned last (1 for the first).
    public private(set) var number = 0

    /// Reads `path`; `-` is standard input.
    public init(path: String, maximumLength: Int = LineReader.defaultMaximumLength) throws(Unreadable) {
        self.maximumLength = maximumLength
        guard path != "-" else {
            source = .descriptor(STDIN_FILENO)
            return
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Unreadable(reason: OutputFailure.words(errno)) }
        var status = stat()
        if fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            close(descriptor)
            throw Unreadable(reason: "it is a folder")
        }
        source = .descriptor(descriptor)
    }

    /// Reads the lines of `bytes`.
    public init(bytes: [UInt8], maximumLength: Int = LineReader.defaultMaximumLength) {
        self.maximumLength = maximumLength
        source = .none
        buffer = bytes
        ended = true
    }

    /// Reads the blocks `next` hands over, one after another, until it answers nil; a block need not end a line.
    public init(blocks next: @escaping () throws(Unreadable) -> [UInt8]?, maximumLength: Int = LineReader.defaultMaximumLength) {
        self.maximumLength = maximumLength
        source = .blocks(next)
    }

    deinit {
        if case .descriptor(let descriptor) = source, descriptor != STDIN_FILENO { close(descriptor) }
    }

    /// Reads no further: the next `next` returns nil.
    public func finish() {
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
    public static func describe(bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }

    /// The next line without its line break, and whether it had one (false only for a last line cut short); nil
    /// at the end. `beforeWaiting` runs before each read of the input (which may wait for a pipe).
    public func next(beforeWaiting: () -> Void = {}) throws(Unreadable) -> (line: ArraySlice<UInt8>, complete: Bool)? {
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
            switch source {
            case .descriptor(let descriptor):
                var count: Int
                repeat {
                    count = block.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                } while count < 0 && errno == EINTR
                if count < 0 { throw Unreadable(reason: OutputFailure.words(errno)) }
                if count == 0 { ended = true }
                buffer.append(contentsOf: block[0..<count])
            case .blocks(let next):
                if let more = try next() {
                    if buffer.isEmpty { buffer = more } else { buffer.append(contentsOf: more) } // (a whole block: taken, not copied)
                } else {
                    ended = true
                }
            case .none:
                ended = true
            }
        }
    }
}
