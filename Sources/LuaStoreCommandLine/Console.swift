import Foundation
import LuaStoreConcurrency
import LuaStoreScripting

/// Writes to standard output and standard error with `write(2)`: a failing write is never a crash. The first
/// failure to write standard output (a full disk, `> /dev/full`) is kept, further output is dropped, and the
/// command reports it in words when it ends (`outputFailure`). A closed pipe (`| head -1`) ends the process
/// quietly, as SIGPIPE does for any Unix tool. Standard output is written a line at a time, or — while
/// `buffered` (a run working through a file of actions) — in blocks of 64 KiB and whenever buffering stops;
/// anything written to standard error first writes out what standard output holds, so the two stay in order.
public enum Console {
    /// What standard output holds and how it is written.
    private struct Output {
        var failure: String?
        var pending: [UInt8] = []
        var buffering = false

        mutating func writePending() {
            guard !pending.isEmpty else { return }
            if failure == nil, let reason = Console.write(pending, to: STDOUT_FILENO) { failure = reason }
            pending.removeAll(keepingCapacity: pending.count <= Console.blockSize * 2)
        }
    }

    private static let output = Protected(Output())
    private static let blockSize = 64 << 10

    public static func out(_ text: String) { out(bytes: Array(text.utf8)) }

    /// `bytes` as they are (what a script printed: not always UTF-8 text), and a line break.
    public static func out(bytes: [UInt8]) {
        output.withLock { output in
            guard output.failure == nil else { return }
            output.pending.append(contentsOf: bytes)
            output.pending.append(10)
            if !output.buffering || output.pending.count >= blockSize { output.writePending() }
        }
    }

    /// A message on standard error: "luastore: " and `text` on a line of its own (or, not `prefixed`, `text` as it
    /// is: a prompt).
    public static func error(_ text: String, prefixed: Bool = true) {
        output.withLock { output in
            output.writePending()
            _ = write(Array((prefixed ? "luastore: " + text + "\n" : text).utf8), to: STDERR_FILENO) // (nowhere left to say it failed)
        }
    }

    /// Whether standard output is kept in blocks (see above); turning it off writes out what is kept.
    public static var buffered: Bool {
        get { output.withLock { $0.buffering } }
        set {
            output.withLock { output in
                output.buffering = newValue
                if !newValue { output.writePending() }
            }
        }
    }

    /// Writes out what standard output holds.
    public static func flush() {
        output.withLock { $0.writePending() }
    }

    /// Why standard output could not be written, in words, if it could not.
    public static var outputFailure: String? {
        output.withLock { $0.failure }
    }

    /// Writes all of `bytes`; returns the reason it could not, in words.
    private static func write(_ bytes: [UInt8], to descriptor: Int32) -> String? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return OutputFailure.words(errno)
            }
            offset += written
        }
        return nil
    }
}
