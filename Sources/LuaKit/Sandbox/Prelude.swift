/// The trusted Lua chunk that builds the sandbox from the real libraries, once per VM, before any script runs:
/// `prelude.lua` beside this file (its header says what it receives and returns), embedded at build time.
enum Prelude {
    /// A host chunk (`host:`): the message handler skips its frames when it looks for the script's line.
    static let chunkName = "host:" + EmbeddedLua.prelude.path
    static let source = EmbeddedLua.prelude.source
}

/// The prelude's parts, chunks of their own that it runs with what it shares: `base.lua` (the guarded base
/// functions) and `namespaces.lua` (environments and modules).
enum PreludeParts {
    static let base = (chunkName: "host:" + EmbeddedLua.base.path, source: EmbeddedLua.base.source)
    static let namespaces = (chunkName: "host:" + EmbeddedLua.namespaces.path, source: EmbeddedLua.namespaces.source)
}

/// `files.lua` beside the prelude: `io.open` and `io.lines` reading the project's files, for a VM given the system
/// (`LuaLimits.system`); the prelude runs it there only, so a store's VM holds none of it.
enum SandboxFiles {
    static let chunkName = "host:" + EmbeddedLua.files.path
    static let source = EmbeddedLua.files.source
}
