import ArgumentParser
import Foundation
import LuaKit

/// The time budget a script call gets when `--time-budget-ms` is not given: 200 ms, or `LUASTORE_TIME_BUDGET_MS`
/// (a budget counts the thread's CPU time, with the wall clock as a backstop: `LuaLimits.timeBudget`).
public enum TimeBudgetDefault {
    /// The default, in milliseconds.
    public static var milliseconds: Double {
        ((try? LuaLimits.environmentTimeBudget()) ?? nil) ?? 200
    }

    /// Refuses a variable that is set but is not a number of milliseconds above 0.
    public static func validate() throws {
        do {
            _ = try LuaLimits.environmentTimeBudget()
        } catch {
            throw ValidationError(error.description)
        }
    }
}
