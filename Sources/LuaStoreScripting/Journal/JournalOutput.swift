/// Where a `SessionRecorder` writes: a file (`OutputFile`, a recording) or a durable store's database
/// (`LuaStorePersistence`). Writes happen on the output's own thread, in the order they were queued.
public protocol JournalOutput: AnyObject, Sendable {
    /// Queues lines: `write` appends them (as UTF-8, each with its newline) on the output's thread; if it throws,
    /// the line it was making is dropped (the ones before it stay) and the output records why.
    func append(lines write: @escaping @Sendable (inout [UInt8]) throws -> Void)
    /// Whether writing failed (what is queued after that is dropped).
    var failed: Bool { get }
}
