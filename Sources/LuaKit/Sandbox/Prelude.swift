/// The trusted Lua chunk that builds the sandbox from the real libraries, once per VM, before any script runs:
/// `prelude.lua` beside this file (its header says what it receives and returns), embedded at build time.
enum Prelude {
    /// A host chunk (`host:`): the message handler skips its frames when it looks for the script's line.
    static let chunkName = "host:" + EmbeddedLua.prelude.path
    static let source = EmbeddedLua.prelude.source
}
