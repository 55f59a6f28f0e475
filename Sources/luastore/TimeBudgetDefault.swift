import ArgumentParser
import Foundation

/// The time budget a script call gets when `--time-budget-ms` is not given: 200 ms, or `LUASTORE_TIME_BUDGET_MS`
/// — for machines that run under load (a CI runner beside other jobs), where a budget counted on the wall clock
/// would stop calls the scheduler merely paused.
enum TimeBudgetDefault {
    static let variable = "LUASTORE_TIME_BUDGET_MS"

    /// The default, in milliseconds.
    static var milliseconds: Double {
        guard let text = ProcessInfo.processInfo.environment[variable], let value = Double(text), value > 0, value.isFinite else {
            return 200
        }
        return value
    }

    /// Refuses a variable that is set but is not a number of milliseconds above 0.
    static func validate() throws {
        guard let text = ProcessInfo.processInfo.environment[variable] else { return }
        guard let value = Double(text), value > 0, value.isFinite else {
            throw ValidationError("\(variable) must be a number of milliseconds > 0 (it is \"\(text)\")")
        }
    }
}
