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
    /// Lua instructions between two budget checks. Smaller reacts faster and costs more.
    public var hookInterval: Int = 1000
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
