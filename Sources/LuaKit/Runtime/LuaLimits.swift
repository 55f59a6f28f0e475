import Foundation

/// The bounds a VM enforces on the scripts it runs, and how it collects their garbage.
///
/// ```swift
/// var limits = LuaLimits()
/// limits.memoryBytes = 16 << 20
/// limits.timeBudget = .milliseconds(50)
/// let vm = try LuaVM(limits: limits)
/// ```
public struct LuaLimits: Sendable, Equatable {
    /// The most memory the VM's heap may hold. Exceeding it is a `.memory` error; the VM stays usable. (The VM
    /// also keeps up to 4,096 freed blocks of each small size, ≤ 128 bytes, for reuse — at most ≈ 2.3 MB, not
    /// live Lua memory and not counted here.)
    public var memoryBytes: Int = 64 << 20
    /// Budget of one top-level call, counted in the thread's CPU time (what the call ran, not what it waited for a
    /// CPU on a busy machine), with five budgets of the wall clock as a backstop. Exceeding it is a `.timeout`
    /// error that scripts cannot catch.
    public var timeBudget: Duration = .milliseconds(200)
    /// Budget of the calls that build a whole state — a scripted store's loading of its scripts, `init` and
    /// `migrate` (`LuaVM.withTimeBudget(atLeast:)`) — when larger than `timeBudget`: building 100,000 items takes
    /// far longer than an action.
    public var stateBuildingTimeBudget: Duration = .seconds(2)
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
    /// How the VM's heap is collected (default: generational, major collections after the old generation grew
    /// by 300 %).
    public var garbageCollection: GarbageCollection = .generational()
    /// Whether a table whose metatable has `__mode` is weak (default: `.honoured`, as in Lua). A scripted store
    /// keeps them strong (`.keptStrong`) whatever this says, so that no reducer's outcome depends on when the
    /// collector ran.
    public var weakTables: WeakTables = .honoured

    /// What `os` scripts have (default: `.none`). `luakit` and `luastore test` give `.system`; a scripted store
    /// `.recorded`.
    public var system: SystemAccess = .none

    /// The default limits: 64 MiB, 200 ms per call.
    public init() {}
}

extension LuaLimits {
    /// The variable that sets the command-line tools' default time budget (`luastore`, `luakit`), for machines that
    /// run under load (a CI runner beside other jobs), where a budget counted on the wall clock would stop calls the
    /// scheduler merely paused.
    public static let timeBudgetVariable = "LUASTORE_TIME_BUDGET_MS"

    /// A `LUASTORE_TIME_BUDGET_MS` that is not a number of milliseconds above 0, in words.
    public struct InvalidTimeBudget: Error, CustomStringConvertible {
        public let description: String
    }

    /// The longest time budget the command-line tools take, in milliseconds (about 31 years: longer is no budget a
    /// call could spend, and no `Duration` holds 1e300 ms).
    public static let longestTimeBudgetMilliseconds: Double = 1e12

    /// Whether `milliseconds` is a time budget the command-line tools take: above 0, at most
    /// `longestTimeBudgetMilliseconds`.
    public static func isTimeBudget(milliseconds: Double) -> Bool {
        milliseconds > 0 && milliseconds <= longestTimeBudgetMilliseconds
    }

    /// What a time budget the command-line tools refuse must be, in words (`what`: the option or variable).
    public static func timeBudgetRule(_ what: String) -> String {
        "\(what) must be a number of milliseconds above 0 and at most \(Int64(longestTimeBudgetMilliseconds))"
    }

    /// The default time budget `LUASTORE_TIME_BUDGET_MS` sets, in milliseconds; nil when it is not set.
    public static func environmentTimeBudget() throws(InvalidTimeBudget) -> Double? {
        guard let text = ProcessInfo.processInfo.environment[timeBudgetVariable] else { return nil }
        guard let value = Double(text), isTimeBudget(milliseconds: value) else {
            throw InvalidTimeBudget(description: timeBudgetRule(timeBudgetVariable) + " (it is \"\(text)\")")
        }
        return value
    }
}

/// How a `LuaVM` collects its garbage: Lua 5.4's two collectors. Scripts cannot change it (`collectgarbage`
/// lets them collect, step, count and ask, never switch or tune it).
public enum GarbageCollection: Sendable, Equatable {
    /// Small steps of a full mark-and-sweep interleaved with the script, started when the heap has grown to
    /// `pause` % of its size after the last cycle, doing `stepMultiplier` % of the work per step (Lua's defaults:
    /// 200 and 100; each is at most 1000). Every pause is short, but each cycle walks the whole heap, so a large
    /// live state makes each byte of garbage dearer.
    case incremental(pause: Int = 200, stepMultiplier: Int = 100)
    /// Frequent minor collections of young objects (after the heap grew by `minorMultiplier` %), and a major
    /// one — a full, stop-the-world collection — once the heap grew by `majorMultiplier` % since the last one
    /// (at most 200 and 1000). Short-lived garbage — an action's table, a proxy, a props table — is freed
    /// cheaply while still in cache, which is most of what a scripted store makes; the price is the
    /// occasional major collection (milliseconds for a heap of 100,000 records: docs/benchmarks.md). The
    /// default major multiplier is 300, not Lua's 100: with 100, Lua 5.4.4 ran major collections often enough
    /// to make toggling an item of a 100,000-item state much dearer, for no smaller peak. Where 4 × the live
    /// heap would not fit under `memoryBytes`, the cap triggers the major collection instead (the same full
    /// collection, run by the allocator; nothing fails while the live data fits).
    case generational(minorMultiplier: Int = 20, majorMultiplier: Int = 300)
}

/// What a `LuaVM`'s scripts read of the system through `os`.
public enum SystemAccess: Sendable, Equatable {
    /// No `os` (`require("os")` says why).
    case none
    /// `os.time`, `clock`, `date`, `difftime` and `getenv` read a clock and an environment the host sets
    /// (`LuaVM.setClock(millis:)`, `LuaVM.setEnvironment(_:)`), as a scripted store records them: the time is
    /// the host's, `os.clock()` counts the seconds since the clock's start, dates are in UTC or at the fixed
    /// offset from it the host set, and `os.getenv` finds only what the host passed. `exit`, `execute`, `remove`,
    /// `rename`, `tmpname` and `setlocale` raise, naming the function.
    case recorded
    /// `os.time`, `clock`, `date`, `difftime` and `getenv` as Lua has them: the real clock and the process's
    /// environment. `os.exit`, `execute`, `remove`, `rename`, `tmpname` and `setlocale` raise, naming the function:
    /// a script never ends or changes the process, nor writes files. `io.open` and `io.lines` read the files of
    /// `moduleRoot` and the module path's folders (fixtures), never others.
    case system
}

/// What `__mode` in a metatable does in a `LuaVM`. Either way `__gc` (finalizers) stays refused, so weak
/// tables are the only way a script could see the collector at work.
public enum WeakTables: Sendable, Equatable {
    /// As in Lua: entries whose key or value (as the mode says) was collected disappear, and
    /// `collectgarbage("stop")`/`("restart")` stop and restart the collector, as scripts use them to hold weak
    /// entries while they look at them.
    case honoured
    /// Entries stay until the table itself is collected: `setmetatable` takes `__mode` out of the metatable it
    /// is given (`getmetatable(t).__mode` then reads `nil`), `rawset` refuses to write one, and
    /// `collectgarbage("stop")`/`("restart")` change only what `"isrunning"` answers. A `__mode` assigned into
    /// a metatable after `setmetatable` is not seen (Lua gives no way to catch that write): such a table is weak.
    case keptStrong
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
