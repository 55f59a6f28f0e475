/// The bounds a VM enforces on the scripts it runs.
///
/// ```swift
/// var limits = LuaLimits()
/// limits.memoryBytes = 16 << 20
/// limits.timeBudget = .milliseconds(50)
/// let vm = try LuaVM(limits: limits)
/// ```
public struct LuaLimits: Sendable, Equatable {
    /// The most memory the VM's heap may hold. Exceeding it is a `.memory` error; the VM stays usable.
    public var memoryBytes: Int = 64 << 20
    /// Wall-clock budget of one top-level call. Exceeding it is a `.timeout` error that scripts cannot catch.
    public var timeBudget: Duration = .milliseconds(200)
    /// How an overrun of `timeBudget` is caught (default: the watchdog, which costs nothing while scripts run
    /// within budget).
    public var budgetEnforcement: BudgetEnforcement = .watchdog
    /// Deepest nesting of tables converted between Lua and Swift.
    public var conversionDepth: Int = 200
    /// Most values (table entries included) converted in one conversion.
    public var conversionElements: Int = 1_000_000
    /// Largest module file `require` reads.
    public var moduleBytes: Int = 1 << 20
    /// Longest error message kept; longer ones are cut and say how long they were.
    public var errorMessageBytes: Int = 4096

    /// The default limits: 64 MiB, 200 ms per call.
    public init() {}
}

/// How a `LuaVM` stops a call that overruns its time budget. Either way the script is stopped at its next Lua
/// instruction (a long-running C function such as `string.rep` finishes first) and nothing can catch it.
public enum BudgetEnforcement: Sendable, Equatable {
    /// One watchdog thread per process signals (`SIGURG`) the VM's thread when a call's deadline passes; only
    /// then is a Lua hook set. Scripts run at full speed. A `SIGURG` handler the host installed earlier still
    /// receives every `SIGURG` that is not the watchdog's; VMs made after the host replaced the watchdog's
    /// handler use `.countHook(instructions: 1000)`. Under ThreadSanitizer (which holds signals back
    /// while uninstrumented code such as the Lua interpreter runs) VMs use `.countHook(instructions: 1000)`.
    case watchdog
    /// Lua's count hook checks the clock every `instructions` instructions. No signal and no extra thread,
    /// but while any hook is set Lua 5.4 traps every instruction: scripts run ≈ 20–30 % slower.
    case countHook(instructions: Int)
}
