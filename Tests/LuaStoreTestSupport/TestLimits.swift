import LuaKit

extension LuaLimits {
    /// The limits of a test VM whose test is not about limits: the defaults, with a time budget of 30 s. A budget
    /// counted on the wall clock (200 ms by default) can be spent by a loaded machine's pauses alone — the suite runs
    /// its tests side by side on two cores — on a script that needs a millisecond.
    public static var unhurried: LuaLimits {
        var limits = LuaLimits()
        limits.timeBudget = .seconds(30)
        return limits
    }
}
