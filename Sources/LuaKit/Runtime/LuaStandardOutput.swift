/// A script's standard output as the stand-alone `lua` has it — for a host that is a process running one script,
/// as `luakit` is (`LuaVM(…standardOutput:)`): the bytes `print` and `io.write` write, as they write them (no line
/// is held back), `io.flush()` and `file:flush()`, and the mode `io.stdout:setvbuf` asks for. How it buffers is the
/// host's (`luakit`: as C's `stdout` — a line at a time to a terminal, blocks to a pipe or a file). The time a
/// write or a flush waits (a full pipe whose reader is slow) is left out of the script's time budget.
public protocol LuaStandardOutput: AnyObject, Sendable {
    /// Bytes the script wrote.
    func write(_ bytes: [UInt8])
    /// Writes out what is buffered (`io.flush()`, `io.stdout:flush()`).
    func flush()
    /// How to buffer from now on (`io.stdout:setvbuf(mode)`), as C's `setvbuf`: after a flush.
    func setBuffering(_ mode: LuaOutputBuffering)
}

/// The modes of `file:setvbuf`.
public enum LuaOutputBuffering: String, Sendable {
    /// Every write goes out at once.
    case no
    /// Written out when a line ends (or the buffer fills).
    case line
    /// Written out when the buffer fills.
    case full
}
