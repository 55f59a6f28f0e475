/// A failure reported by the Lua runtime: what went wrong, and for script failures, where.
///
/// ```swift
/// do {
///     _ = try vm.run("return 1 + nil", chunkName: "app.lua")
/// } catch {
///     print(error.kind, error.location ?? "?")   // runtime app.lua:1
/// }
/// ```
public struct LuaError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// The chunk does not parse.
        case syntax
        /// The script raised an error (including errors raised by library functions).
        case runtime
        /// The VM's memory cap was reached.
        case memory
        /// The call used up its time budget.
        case timeout
        /// A value could not be converted between Lua and Swift.
        case conversion
        /// A precompiled (binary) chunk was offered; only source text is accepted.
        case binaryChunk
    }

    /// What kind of failure this is.
    public var kind: Kind
    /// The message, without the `file:line:` prefix.
    public var message: String
    /// The chunk the failure happened in (`app.lua`), when known.
    public var chunkName: String?
    /// The line in `chunkName`, when known.
    public var line: Int?
    /// Lua's traceback at the point of failure, when there was one.
    public var traceback: String?
    /// For conversion failures: the path of the offending value, such as `state.todos[3].title`.
    public var path: String?

    /// Creates an error.
    public init(
        _ kind: Kind, _ message: String, chunkName: String? = nil, line: Int? = nil,
        traceback: String? = nil, path: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.chunkName = chunkName
        self.line = line
        self.traceback = traceback
        self.path = path
    }

    /// An error from a Lua error message such as `app.lua:12: attempt to index a nil value`, with the
    /// location split off when the message starts with one.
    public init(_ kind: Kind, parsing text: String) {
        if let (chunk, line, message) = LuaVM.splitLocation(text) {
            self.init(kind, message, chunkName: chunk, line: line)
        } else {
            self.init(kind, text)
        }
    }

    /// Whether a limit stopped the call: its time budget ran out, or the VM's memory cap was reached. Which of the
    /// two stops a runaway call first, and after how many milliseconds, is the machine's: a replay takes either for
    /// either (`isLimitMessage(_:)`).
    public var stoppedByALimit: Bool { kind == .timeout || kind == .memory }

    /// Whether `message` (without its location) is what a call stopped by a limit says: `time budget of N ms
    /// exceeded` or `not enough memory` — as a recording keeps a failure, in words alone.
    public static func isLimitMessage(_ message: String) -> Bool {
        if message == "not enough memory" { return true }
        guard message.hasPrefix("time budget of "), message.hasSuffix(" ms exceeded") else { return false }
        let number = message.dropFirst("time budget of ".count).dropLast(" ms exceeded".count)
        return !number.isEmpty && number.allSatisfy(\.isASCII) && number.allSatisfy(\.isNumber)
    }

    /// `file:line`, when both are known; `file` alone otherwise.
    public var location: String? {
        guard let chunkName else { return nil }
        return line.map { "\(chunkName):\($0)" } ?? chunkName
    }

    /// The traceback's frames in scripts (`app.lua:3: in upvalue 'spin'`, one a line, indented by a tab), without the
    /// host's own (`host:` chunks, and the C functions the host called the script through, below its first frame);
    /// nil when there are none.
    public var scriptTraceback: String? {
        guard let traceback else { return nil }
        var frames = traceback.split(separator: "\n").dropFirst().filter { line in
            !line.drop { $0 == "\t" || $0 == " " }.hasPrefix("host:")
        }
        while let last = frames.last, last.drop(while: { $0 == "\t" || $0 == " " }).hasPrefix("[C]:")
                || last.contains("(...tail calls...)") {
            frames.removeLast()
        }
        return frames.isEmpty ? nil : "stack traceback:\n" + frames.joined(separator: "\n")
    }

    /// The traceback of an error raised in a script called as the stand-alone `lua` calls one (`LuaVM.callAsMain`):
    /// its frames as `lua` writes them — the C frame the script was called through last (`[C]: in ?`), tail calls
    /// included — without the host's own (`host:` chunks); nil when there is none.
    public var mainTraceback: String? {
        guard let traceback else { return nil }
        let frames = traceback.split(separator: "\n").dropFirst().filter { line in
            !line.drop { $0 == "\t" || $0 == " " }.hasPrefix("host:")
        }
        return frames.isEmpty ? nil : "stack traceback:\n" + frames.joined(separator: "\n")
    }

    /// The message as a person reads it: `app.lua:12: attempt to index a nil value`.
    public var description: String {
        let text = path.map { "\($0): \(message)" } ?? message
        return location.map { "\($0): \(text)" } ?? text
    }
}
