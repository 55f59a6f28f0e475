import ArgumentParser
import Foundation
import LuaStoreScripting

/// `--clock`, `--utc-offset`, `--env`: the clock and environment a store's `os` reads (`StoreClock`).
struct ClockOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "The store's clock stands at this time instead of following the system's: ISO 8601 (2026-01-01T09:30:00Z) or milliseconds since 1970. Scripts' os.time() and os.date() read it, so runs of the same actions record the same bytes.",
        valueName: "time"))
    var clock: String?

    @Option(name: .customLong("utc-offset"), help: ArgumentHelp(
        "The time zone os.date and os.time(t) read local time in, as an offset from UTC (+02:00, -05:30; default +00:00). Recorded with the session.",
        valueName: "±HH:MM"))
    var utcOffset: String?

    @Option(name: .customLong("env"), help: ArgumentHelp(
        "A variable os.getenv finds (repeatable); scripts see nothing else of the environment. Recorded with the session.",
        valueName: "NAME=VALUE"))
    var environment: [String] = []

    func validate() throws {
        _ = try storeClock()
    }

    /// The clock these options describe.
    func storeClock() throws(ValidationError) -> StoreClock {
        var result = StoreClock.system
        if let clock {
            guard let date = Self.date(clock) else {
                throw ValidationError("--clock must be a time in ISO 8601 (2026-01-01T09:30:00Z) or milliseconds since 1970 (it is \"\(clock)\")")
            }
            result.now = { date }
        }
        if let utcOffset {
            guard let seconds = Self.offset(utcOffset) else {
                throw ValidationError("--utc-offset must be +HH:MM or -HH:MM within 18 hours of UTC (it is \"\(utcOffset)\")")
            }
            result.utcOffsetSeconds = seconds
        }
        for variable in environment {
            guard let equals = variable.firstIndex(of: "="), equals != variable.startIndex else {
                throw ValidationError("--env must be NAME=VALUE (it is \"\(variable)\")")
            }
            result.environment[String(variable[..<equals])] = String(variable[variable.index(after: equals)...])
        }
        return result
    }

    static func date(_ text: String) -> Date? {
        if let millis = Int64(text) { return StoreClock.date(millis: millis) }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    static func offset(_ text: String) -> Int? {
        let characters = Array(text)
        guard characters.count == 6, characters[0] == "+" || characters[0] == "-", characters[3] == ":",
              let hours = Int(String(characters[1...2])), let minutes = Int(String(characters[4...5])), minutes < 60 else { return nil }
        let seconds = hours * 3600 + minutes * 60
        guard seconds <= StoreClock.utcOffsetLimit else { return nil }
        return characters[0] == "-" ? -seconds : seconds
    }
}
