import CLua
import CLuaGuard
import Foundation

/// One sandboxed, bounded Lua 5.4 virtual machine.
///
/// A `LuaVM` owns its `lua_State` and closes it in `deinit`. It must be created and used on one thread whose
/// stack is at least 8 MiB — a `LuaThread` — and every call into Lua is a protected call with a time budget and
/// a memory cap (`LuaLimits`). Scripts see only the sandbox (see docs/lua.md, "The script environment").
///
/// Internally, every helper that touches the Lua stack states its effect as Lua's manual does, `[-o, +p, x]`
/// (pops `o`, pushes `p`; `x` whether it may raise a Lua error). In Swift `x` is always `-`: no Lua error may
/// unwind through a Swift frame, so Swift calls only API functions that cannot raise, and reaches everything
/// else through `protectedCall` or the C trampolines of `CLuaGuard`.
///
/// ```swift
/// let thread = LuaThread()
/// try thread.sync {
///     let vm = try LuaVM(moduleRoot: URL(fileURLWithPath: "samples/counter"))
///     let app = try vm.require("app")
///     let initial = try vm.call(try vm.field("init", of: app)!)
/// }
/// ```
public final class LuaVM {
    /// The limits this VM enforces (`setBudgets` changes the time budget and the memory cap).
    public private(set) var limits: LuaLimits
    /// `limits.conversionDepth` and `limits.conversionElements`, which never change: read where every value
    /// converted reads them, without the run-time access check that each read of a class's `var` is.
    let conversionDepth: Int
    let conversionElements: Int
    /// The folder `require` loads modules from, if any. A host may point it elsewhere (a new version of an app,
    /// installed in a folder of its own); modules already loaded stay as they are.
    public var moduleRoot: URL?
    /// The folders namespaces made with `makeNamespace(root:chunkPrefix:)` read their modules from (the prelude
    /// names one by its position, from 1).
    var moduleFolders: [ModuleFolder] = []
    /// Where `require` looks after `moduleRoot` (Lua path templates).
    public let modulePath: [String]
    /// What the chunk names of `moduleRoot`'s modules start with, before their path in it (default: nothing —
    /// `lib/util.lua:12:`). `luakit` and `luastore test` set `./`, the name stock Lua gives a module its
    /// `./?.lua` template found (`./lib/util.lua:12:`), as busted's messages show it.
    public var moduleChunkPrefix = ""

    /// The Lua thread the VM works on: its main thread — or, while a host function runs, the thread that called
    /// it (a coroutine's), whose stack holds its arguments and takes its results (`HostFunction.invoke(on:)`).
    var state: OpaquePointer
    let guardState: UnsafeMutablePointer<CLuaGuard>
    let ledger = ReferenceLedger()
    /// Receives each line a script prints, as its bytes (without the line break).
    let printLine: @Sendable ([UInt8]) -> Void
    /// Where `io.stderr` and `warn` write, when the host has a standard error of its own (`init(…errorBytes:)`).
    let writeError: (@Sendable ([UInt8]) -> Void)?
    /// What `io.stdin` reads, when the host gives its standard input (`init(…standardInput:)`).
    let readInput: (@Sendable () -> [UInt8])?
    /// What `io.write` wrote after the last line it ended: the next `print` or line ends it (and `deinit`).
    var partialLine: [UInt8] = []
    /// Where `print` and `io.write` write as they write, when the host has a standard output of its own
    /// (`init(…standardOutput:)`); `printLine` is then not called.
    let standardOutput: (any LuaStandardOutput)?
    private let owner: pthread_t
    /// The state of `math.random`'s generator as the VM started (the sandbox seeds it the same in every VM).
    public private(set) var startingRandomState: LuaRandomState?
    /// Whether `pushString` takes small strings from the VM's cache (`smallStringsHoldTheirBytes`, read once).
    let cachesSmallStrings = LuaVM.smallStringsHoldTheirBytes
    /// Room for the fields of the tables `pushSmallTables` converts in one call (and their counts), made at its
    /// first use and kept: a run of actions is converted without allocating.
    var smallTablesScratch: (fields: UnsafeMutablePointer<CLuaSmallField>, counts: UnsafeMutablePointer<Int32>)?
    var hostFunctions: [Unmanaged<HostFunction>] = []
    /// The compiled chunks of host modules defined by their source (`define(module:source:)`), run at their first
    /// `require`, and their chunk names.
    var deferredModules: [String: (dump: [UInt8], chunkName: String)] = [:]
    /// How many calls into Lua this VM has made (every call from Swift counts once), so that a host can tell
    /// whether anything ran since a moment it noted.
    public private(set) var calls: UInt64 = 0
    private(set) var sandbox: SandboxInterface!

    /// Refs into the prelude's interface table.
    struct SandboxInterface {
        let environment: Int32
        let define: Int32
        let defineModule: Int32
        let defineDeferred: Int32
        let require: Int32
        let namespace: Int32
        let referenceStrings: Int32
        let seal: Int32
        let lock: Int32
    }

    /// Creates a VM and builds its sandbox.
    ///
    /// - Parameters:
    ///   - limits: memory, time and conversion bounds.
    ///   - moduleRoot: the folder `require` resolves modules in; `nil` disables `require` of files.
    ///   - modulePath: where else `require` looks, after `moduleRoot`: Lua path templates
    ///     (`/usr/share/lua/5.4/?.lua`), source text only (`LuaModulePath`).
    ///   - print: receives each line a script prints (default: standard error); bytes that are not UTF-8 text
    ///     become U+FFFD (`init(limits:moduleRoot:modulePath:printingBytes:)` hands them over as they are).
    public convenience init(
        limits: LuaLimits = LuaLimits(),
        moduleRoot: URL? = nil,
        modulePath: [String] = [],
        print: @escaping @Sendable (String) -> Void = { line in
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    ) throws(LuaError) {
        try self.init(limits: limits, moduleRoot: moduleRoot, modulePath: modulePath,
                      printingBytes: { print(String(decoding: $0, as: UTF8.self)) })
    }

    /// Creates a VM whose scripts' printed lines reach `printingBytes` as the bytes they wrote, as stock Lua writes
    /// them (a string may hold bytes that are not UTF-8 text): for a host that writes them out, as `luakit` does.
    /// `errorBytes`, when given, receives what scripts write to `io.stderr` and `warn`'s lines, as they write them
    /// (a process's standard error, as `lua`'s); without it those go to `printingBytes` as lines. `standardInput`,
    /// when given with `LuaLimits.system`, is what `io.stdin` and the default input read: all of it, asked for at
    /// the first read (the wait is not counted in the time budget); without it they read nothing. `standardOutput`,
    /// when given, receives what `print` and `io.write` write as they write it, in place of `printingBytes`, and
    /// `io.flush`, `setvbuf` (`LuaStandardOutput`).
    public init(limits: LuaLimits, moduleRoot: URL?, modulePath: [String],
                printingBytes print: @escaping @Sendable ([UInt8]) -> Void,
                errorBytes: (@Sendable ([UInt8]) -> Void)? = nil,
                standardInput: (@Sendable () -> [UInt8])? = nil,
                standardOutput: (any LuaStandardOutput)? = nil) throws(LuaError) {
        precondition(LuaThread.currentStackSize >= LuaThread.defaultStackSize,
                     "LuaVM needs a thread with an 8 MiB stack: create and use it on a LuaThread")
        self.limits = limits
        self.conversionDepth = limits.conversionDepth
        self.conversionElements = limits.conversionElements
        self.moduleRoot = moduleRoot?.standardizedFileURL.resolvingSymlinksInPath()
        self.modulePath = modulePath
        self.printLine = print
        self.writeError = errorBytes
        self.readInput = standardInput
        self.standardOutput = standardOutput
        self.owner = pthread_self()
        guardState = .allocate(capacity: 1)
        guardState.initialize(to: CLuaGuard())
        guardState.pointee.bytesLimit = limits.memoryBytes
        guardState.pointee.budgetNanos = Self.nanoseconds(limits.timeBudget)
        switch limits.budgetEnforcement {
        case .watchdog:
            guardState.pointee.enforcement = CLUA_ENFORCE_WATCHDOG
            guardState.pointee.hookInterval = 1000
        case .countHook(let instructions):
            guardState.pointee.enforcement = CLUA_ENFORCE_COUNT_HOOK
            guardState.pointee.hookInterval = Int32(clamping: max(1, instructions))
        }
        guardState.pointee.callSwift = { thread, box in
            Unmanaged<HostFunction>.fromOpaque(box!).takeUnretainedValue().invoke(on: thread!)
        }
        // Outside script calls the host allocates freely; `protectedCall` applies the cap while a script runs.
        guardState.pointee.hostAllocations = 1
        guard let state = clua_newstate(guardState) else {
            guardState.deallocate()
            throw LuaError(.memory, "could not create a Lua state")
        }
        self.state = state
        try buildSandbox()
        startingRandomState = randomState
        collectGarbage()
        switch limits.garbageCollection {
        case .incremental(let pause, let stepMultiplier):
            _ = clua_gc_incremental(state, Int32(min(max(pause, 1), 1000)), Int32(min(max(stepMultiplier, 1), 1000)))
        case .generational(let minorMultiplier, let majorMultiplier):
            _ = clua_gc_generational(state, Int32(min(max(minorMultiplier, 1), 200)), Int32(min(max(majorMultiplier, 1), 1000)))
        }
    }

    deinit {
        if !partialLine.isEmpty { printLine(partialLine) }
        clua_closestate(guardState)
        for function in hostFunctions { function.release() }
        guardState.deallocate()
        if let smallTablesScratch {
            smallTablesScratch.fields.deallocate()
            smallTablesScratch.counts.deallocate()
        }
    }

    /// Memory the VM's heap uses now, at most, and may use.
    public struct MemoryUsage: Sendable, Equatable {
        /// Bytes in use now.
        public var bytesInUse: Int
        /// The most bytes ever in use.
        public var peakBytes: Int
        /// The cap (`LuaLimits.memoryBytes`).
        public var limitBytes: Int
    }

    /// The heap's current, peak and maximum size.
    public var memory: MemoryUsage {
        MemoryUsage(bytesInUse: guardState.pointee.bytesInUse, peakBytes: guardState.pointee.bytesPeak,
                    limitBytes: guardState.pointee.bytesLimit)
    }

    /// Changes the time budget of each call and the memory cap, between calls (a new version of an app with
    /// budgets of its own). A cap below what the heap holds now is refused: nothing changes.
    public func setBudgets(time: Duration, memoryBytes: Int) throws(LuaError) {
        checkThread()
        guard memoryBytes >= guardState.pointee.bytesInUse else {
            throw LuaError(.memory, "a memory cap of \(memoryBytes) bytes is below the \(guardState.pointee.bytesInUse) the VM holds now")
        }
        limits.timeBudget = time
        limits.memoryBytes = memoryBytes
        guardState.pointee.bytesLimit = memoryBytes
        guardState.pointee.budgetNanos = Self.nanoseconds(time)
    }

    /// `duration` in nanoseconds, for the guard: at most `Int64.max` (a budget of centuries never runs out) and at
    /// least 0.
    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        guard seconds < Int64.max / 1_000_000_000 - 1 else { return Int64.max }
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Runs `body` with each top-level call's time budget at least `budget` (the calls that build a whole state:
    /// `LuaLimits.stateBuildingTimeBudget`), then puts the budget back.
    @discardableResult
    public func withTimeBudget<Result>(atLeast budget: Duration, _ body: () throws(LuaError) -> Result) throws(LuaError) -> Result {
        checkThread()
        let saved = guardState.pointee.budgetNanos
        let wanted = Self.nanoseconds(budget)
        guard saved > 0, wanted > saved else { return try body() }
        guardState.pointee.budgetNanos = wanted
        defer { guardState.pointee.budgetNanos = saved }
        return try body()
    }

    /// Runs `body` — what a host function does while it waits for another thread (a store's action that a spec
    /// checks) — without counting the time it takes against the running call's budget: the budget counts CPU
    /// time, which waiting does not spend, and its wall-clock backstop moves by as long as `body` took.
    public func excludingFromBudget<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        checkThread()
        let clock = ContinuousClock()
        let start = clock.now
        defer {
            let waited = clock.now - start
            clua_budget_exclude(state, Self.nanoseconds(waited))
        }
        return try body()
    }

    /// Runs `body` with the memory cap raised by `bytes`: room for what the host hands the VM to read and drop
    /// — the text a whole state is decoded from —, which is not the state, and which a state that fit under the
    /// cap must not be refused for. Then collects the garbage and puts the cap back (also when the heap holds more
    /// than it: the next allocation is refused, as it would be).
    public func withMemoryRoom<Result>(_ bytes: Int, _ body: () throws(LuaError) -> Result) throws(LuaError) -> Result {
        checkThread()
        let saved = guardState.pointee.bytesLimit
        guardState.pointee.bytesLimit = saved > Int.max - max(bytes, 0) ? Int.max : saved + max(bytes, 0)
        defer {
            _ = clua_gc(state, LUA_GCCOLLECT, 0)
            guardState.pointee.bytesLimit = saved
        }
        return try body()
    }

    /// Runs a full garbage collection.
    public func collectGarbage() {
        checkThread()
        _ = clua_gc(state, LUA_GCCOLLECT, 0)
    }

    /// How this VM enforces its time budget: `limits.budgetEnforcement`, or `.countHook(instructions: 1000)`
    /// when the watchdog is unavailable (under ThreadSanitizer, or when its thread could not start).
    public var budgetEnforcement: BudgetEnforcement {
        guardState.pointee.enforcement == CLUA_ENFORCE_WATCHDOG
            ? .watchdog : .countHook(instructions: Int(guardState.pointee.hookInterval))
    }

    /// How many threads the watchdog watches (those on which a call under it has run, until they exit): what
    /// each of its looks reads, however many VMs those threads run.
    static var watchedThreadCount: Int { Int(clua_watched_threads()) }

    /// Makes Ctrl-C (`SIGINT`) stop the script the calling thread runs as the stand-alone `lua` does: the error
    /// `interrupted!` at its next instruction (an error as any other: a `pcall` catches it), and the next Ctrl-C ends
    /// the process; between calls, Ctrl-C ends it at once. For a command-line tool: call it once, on the thread its
    /// VMs run on (an interrupt delivered to another thread is passed on to it).
    public static func stopScriptsOnInterrupt() {
        _ = clua_interrupt_on(SIGINT)
    }

    /// Runs `body` and counts the Lua instructions this VM executes meanwhile, and the blocks its allocator
    /// hands out (new or grown): deterministic measures of the work of scripts and of the C and Swift code that
    /// builds values in the VM, for tests and profiling (every instruction traps into a hook while counting, so
    /// scripts run several times slower). Counting does not nest.
    ///
    /// ```swift
    /// let (_, instructions, allocations) = try vm.countingInstructions { try vm.call(reduce, arguments: [...]) }
    /// ```
    public func countingInstructions<T, E: Error>(_ body: () throws(E) -> T) throws(E)
        -> (result: T, instructions: Int, allocations: Int) {
        checkThread()
        precondition(guardState.pointee.countingInstructions == 0, "countingInstructions does not nest")
        let start = guardState.pointee.instructionCount
        let allocationsBefore = guardState.pointee.allocationCount
        clua_count_instructions(state, guardState, 1)
        defer { clua_count_instructions(state, guardState, 0) }
        let result = try body()
        return (result, Int(guardState.pointee.instructionCount - start), Int(guardState.pointee.allocationCount - allocationsBefore))
    }

    /// Whether the collector is running (it always should be: scripts cannot stop it).
    public var isCollectorRunning: Bool { clua_gc(state, LUA_GCISRUNNING, 0) != 0 }

    /// Slots on the Lua stack; zero between calls.
    public var stackDepth: Int { Int(lua_gettop(state)) }

    // MARK: Internals

    func checkThread() {
        precondition(pthread_equal(pthread_self(), owner) != 0, "LuaVM used off the thread that created it")
        for id in ledger.drain() { luaL_unref(state, clua_registryindex(), id) }
    }

    /// [-0, +0, -]
    private func buildSandbox() throws(LuaError) {
        clua_pushcfunction(state, clua_open_libraries)
        try protectedCall(arguments: 0, results: 0)
        if limits.system != .none {
            clua_pushcfunction(state, clua_open_os)
            lua_pushboolean(state, limits.system == .recorded ? 1 : 0)
            try protectedCall(arguments: 1, results: 0)
        }
        try loadChunk(Prelude.source, chunkName: Prelude.chunkName, debug: .lines)
        lua_createtable(state, 0, 6)
        clua_pushcfunction(state, clua_push_sandbox_strings)
        try protectedCall(arguments: 0, results: 1)
        lua_setfield(state, -2, "strings")
        clua_pushcfunction(state, clua_push_sandbox_tables)
        try protectedCall(arguments: 0, results: 1)
        lua_setfield(state, -2, "tables")
        setHostFunction("print", in: -1) { vm throws(HostFailure) in try vm.printPrimitive() }
        setHostFunction("write", in: -1) { vm throws(HostFailure) in try vm.writePrimitive() }
        if writeError != nil {
            setHostFunction("writeerror", in: -1) { vm throws(HostFailure) in try vm.writeErrorPrimitive() }
        }
        if standardOutput != nil {
            setHostFunction("flush", in: -1) { vm throws(HostFailure) in try vm.flushPrimitive() }
            setHostFunction("setvbuf", in: -1) { vm throws(HostFailure) in try vm.setBufferingPrimitive() }
        }
        setHostFunction("readmodule", in: -1) { vm throws(HostFailure) in try vm.readModulePrimitive() }
        setHostFunction("readfile", in: -1) { vm throws(HostFailure) in try vm.readFilePrimitive() }
        if limits.system == .system {
            setHostFunction("readdata", in: -1) { vm throws(HostFailure) in try vm.readDataPrimitive() }
            if readInput != nil {
                setHostFunction("readstdin", in: -1) { vm throws(HostFailure) in try vm.readInputPrimitive() }
            }
            try loadChunk(SandboxFiles.source, chunkName: SandboxFiles.chunkName, debug: .lines)
            lua_setfield(state, -2, "files")
        }
        try loadChunk(PreludeParts.base.source, chunkName: PreludeParts.base.chunkName, debug: .lines)
        lua_setfield(state, -2, "base")
        try loadChunk(PreludeParts.namespaces.source, chunkName: PreludeParts.namespaces.chunkName, debug: .lines)
        lua_setfield(state, -2, "namespaces")
        setHostFunction("hostmodule", in: -1) { vm throws(HostFailure) in try vm.hostModulePrimitive() }
        func define(_ name: String, _ function: lua_CFunction) {
            clua_pushcfunction(state, function)
            lua_setfield(state, -2, name)
        }
        define("callerkind", clua_caller_kind)
        define("resume", clua_sandbox_resume)
        define("checkbudget", clua_sandbox_checkbudget)
        define("newhandle", clua_sandbox_newhandle)
        define("builtin", clua_make_builtin)
        define("searcher", clua_make_searcher)
        define("error", clua_builtin_error)
        define("argerror", clua_builtin_argerror)
        define("callnoyield", clua_call_noyield)
        define("makenext", clua_make_sandbox_next)
        define("makepairs", clua_make_sandbox_pairs)
        define("makeclose", clua_make_sandbox_close)
        define("makewrap", clua_make_sandbox_wrap)
        define("makeprint", clua_make_sandbox_print)
        define("scripterror", clua_sandbox_error)
        switch limits.garbageCollection {
        case .incremental: lua_pushstring(state, "incremental")
        case .generational: lua_pushstring(state, "generational")
        }
        lua_setfield(state, -2, "gcmode")
        lua_pushboolean(state, limits.weakTables == .honoured ? 1 : 0)
        lua_setfield(state, -2, "weaktables")
        lua_pushboolean(state, limits.system == .system ? 1 : 0)
        lua_setfield(state, -2, "system")
        lua_pushboolean(state, limits.system != .none ? 1 : 0)
        lua_setfield(state, -2, "os")
        pushString((["./?.lua", "./?/init.lua"] + modulePath.filter { !ModuleResolver.rootTemplates.contains($0) }).joined(separator: ";"))
        lua_setfield(state, -2, "path")
        clua_pushcfunction(state, clua_sandbox_pcall)
        lua_setfield(state, -2, "pcall")
        clua_pushcfunction(state, clua_sandbox_xpcall)
        lua_setfield(state, -2, "xpcall")
        try protectedCall(arguments: 1, results: 1)
        func field(_ name: String) -> Int32 {
            lua_getfield(state, -1, name)
            return luaL_ref(state, clua_registryindex())
        }
        sandbox = SandboxInterface(environment: field("environment"), define: field("define"),
                                   defineModule: field("definemodule"), defineDeferred: field("definedeferred"),
                                   require: field("require"),
                                   namespace: field("namespace"),
                                   referenceStrings: field("reference_strings"), seal: field("seal"), lock: field("lock"))
        clua_pop(state, 1)
        // Trusted host code only (scripts never see the real global table).
        clua_pushcfunction(state, clua_restart_budget)
        lua_setglobal(state, "restartbudget")
        clua_pushcfunction(state, clua_call_within)
        lua_setglobal(state, "within")
        clua_define_accounts(state)
        clua_pushcfunction(state, clua_new_account)
        lua_setglobal(state, "newaccount")
        clua_pushcfunction(state, clua_read_account)
        lua_setglobal(state, "readaccount")
        clua_pushcfunction(state, clua_is_table)
        lua_setglobal(state, "istable")
        clua_pushcfunction(state, clua_is_string)
        lua_setglobal(state, "isstring")
        clua_pushcfunction(state, clua_push_copy_data)
        try protectedCall(arguments: 0, results: 1)
        lua_setglobal(state, "copydata")
        clua_pushcfunction(state, clua_reads_only)
        lua_setglobal(state, "readsonly")
        clua_pushcfunction(state, clua_placed_pcall)
        lua_setglobal(state, "placedpcall")
    }

    /// [-0, +1, -] Loads `source` as a text chunk named `chunkName` (compiled with the real global table as `_ENV`;
    /// callers replace it). A chunk starting with Lua's binary signature is refused before parsing. Keeping less than
    /// all its `debug` information, the function loaded keeps no names of its variables, and maybe no lines
    /// (`UnnamedChunk`): the first VM to compile it loads it back from its dump without them too, so that every VM
    /// runs the same function.
    func loadChunk(_ source: String, chunkName: String, debug: DebugInfo = .all) throws(LuaError) {
        if source.utf8.first == 0x1B {
            throw LuaError(.binaryChunk, "binary chunks are refused; load Lua source text", chunkName: chunkName)
        }
        let cache = CompiledChunks.shared
        if let dump = cache.dump(of: source, chunkName: chunkName, debug: debug) {
            // (Compiled by a VM of this process before: its own dump, read back as binary — never a script's bytes.)
            let status = loadBinary(dump, chunkName: chunkName)
            guard status == LUA_OK else { throw loadFailure(status, chunkName: chunkName) }
            return
        }
        var text = source
        try text.withUTF8 { bytes in compile(UnsafeRawBufferPointer(bytes), chunkName: chunkName) }.get()
        let dump = CompiledChunks.dumpTop(state)
        guard debug != .all, let unnamed = UnnamedChunk.from(dump, keepingLines: debug == .lines) else {
            cache.keep(dump, of: source, chunkName: chunkName)
            return
        }
        lua_settop(state, -2)
        let reloaded = loadBinary(unnamed, chunkName: chunkName)
        guard reloaded == LUA_OK else { throw loadFailure(reloaded, chunkName: chunkName) }
        cache.keep(unnamed, of: source, chunkName: chunkName, debug: debug)
    }

    /// [-0, +1, -] Loads `source`'s bytes as a text chunk, as Lua reads a source file: a string literal may hold
    /// bytes that are not UTF-8 text, and the chunk's source is the file's name, `@` and `chunkName`, as Lua names
    /// a file's chunk (what `debug.getinfo` reads). Not kept in `CompiledChunks` (for a file loaded once: a script,
    /// a spec).
    func loadChunk(bytes source: some ContiguousBytes, chunkName: String) throws(LuaError) {
        try source.withUnsafeBytes { bytes in
            bytes.first == 0x1B ? .failure(LuaError(.binaryChunk, "binary chunks are refused; load Lua source text", chunkName: chunkName))
                : compile(bytes, chunkName: chunkName, file: true)
        }.get()
    }

    /// [-0, +1, -] Compiles `bytes` as a text chunk named `chunkName` (a `file`'s: its source `@` and the name, as
    /// Lua names a file's chunk; otherwise `=` and the name).
    private func compile(_ bytes: UnsafeRawBufferPointer, chunkName: String, file: Bool = false) -> Result<Void, LuaError> {
        clua_begin_call(state, guardState)
        let status = luaL_loadbufferx(state, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count,
                                      (file ? "@" : "=") + chunkName, "t")
        clua_end_call(state, guardState)
        return status == LUA_OK ? .success(()) : .failure(loadFailure(status, chunkName: chunkName))
    }

    /// [-0, +1, -] Loads a dump this process made (`CompiledChunks`).
    private func loadBinary(_ dump: [UInt8], chunkName: String) -> Int32 {
        clua_begin_call(state, guardState)
        defer { clua_end_call(state, guardState) }
        return dump.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { chars in
                luaL_loadbufferx(state, chars.baseAddress, chars.count, "=" + chunkName, "b")
            }
        }
    }

    /// [-1, +0, -] The error a failed load left on the stack, as a syntax error (or running out of memory).
    private func loadFailure(_ status: Int32, chunkName: String) -> LuaError {
        var error = popError(status: status)
        error.kind = error.kind == .memory ? .memory : .syntax
        if error.chunkName == nil { error.chunkName = chunkName }
        return error
    }

    /// [-(arguments + 1), +results, -] Calls the function below the top `arguments` values, under the time budget
    /// and memory cap, with the message handler that records location and traceback. On failure the function
    /// and its arguments are gone and the error is thrown.
    func protectedCall(arguments: Int32, results: Int32, handler: lua_CFunction = clua_message_handler) throws(LuaError) {
        calls &+= 1
        let handlerIndex = lua_gettop(state) - arguments
        clua_pushcfunction(state, handler)
        clua_insert(state, handlerIndex)
        let hostAllocations = guardState.pointee.hostAllocations
        guardState.pointee.hostAllocations = 0
        clua_begin_call(state, guardState)
        let status = clua_pcall(state, arguments, results, handlerIndex)
        clua_end_call(state, guardState)
        guardState.pointee.hostAllocations = hostAllocations
        clua_remove(state, handlerIndex)
        if status != LUA_OK { throw popError(status: status) }
    }
}
