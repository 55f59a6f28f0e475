import Foundation
import Glibc
import LuaKit
import LuaStoreConcurrency
import Synchronization

/// The clock and environment a scripted store's `os` reads (`os.time`, `os.date`, `os.clock`, `os.getenv`). The
/// store reads `now` once per run of actions, before its reducers run: every action of the run, and the props
/// and subscriptions it leads to, read that time, and the journal records it with each entry — so a replay, given
/// the recorded times, reads what the session read, and time travel shows the time the user saw. `init` reads the
/// time the store started.
///
/// ```swift
/// var options = ScriptedStoreOptions()
/// options.clock = StoreClock(now: { Date(timeIntervalSince1970: 1_700_000_000) }, utcOffsetSeconds: 3600,
///                            environment: ["REGION": "eu"])
/// ```
public struct StoreClock: Sendable {
    /// What time it is (read once per run of actions). By default the system's wall clock.
    public var now: @Sendable () -> Date {
        get { custom ?? { Date() } }
        set { custom = newValue }
    }
    /// `now` when the host gave one (nil: the system's wall clock, read without making a `Date`).
    private var custom: (@Sendable () -> Date)?
    /// The time zone `os.date` (without `!`) and `os.time(t)` read local time in: a fixed offset east of UTC, in
    /// seconds, at most 18 hours either way (0, the default: UTC). Recorded with the session. (Not a named zone:
    /// its rules change with the system's time zone database, which a replay elsewhere would read differently.)
    public var utcOffsetSeconds: Int
    /// What `os.getenv` finds: only these (recorded with the session), never the process's environment.
    public var environment: [String: String]

    /// A clock; by default (`now` nil) the system's wall clock, in UTC, with no environment.
    public init(now: (@Sendable () -> Date)? = nil, utcOffsetSeconds: Int = 0, environment: [String: String] = [:]) {
        self.custom = now
        self.utcOffsetSeconds = utcOffsetSeconds
        self.environment = environment
    }

    /// The system's wall clock, in UTC, with no environment.
    public static var system: StoreClock { StoreClock() }

    /// A clock stopped at `date`.
    public static func fixed(_ date: Date, utcOffsetSeconds: Int = 0, environment: [String: String] = [:]) -> StoreClock {
        StoreClock(now: { date }, utcOffsetSeconds: utcOffsetSeconds, environment: environment)
    }

    /// The largest offset from UTC a clock may have (18 hours, as ISO 8601 allows).
    public static let utcOffsetLimit = 18 * 3600

    /// `now`, in milliseconds since 1970-01-01 UTC.
    func nowMillis() -> Int64 {
        if let custom { return Self.millis(custom()) }
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    static func millis(_ date: Date) -> Int64 {
        let value = (date.timeIntervalSince1970 * 1000).rounded(.down)
        guard value.isFinite else { return 0 }
        return Int64(Swift.max(Swift.min(value, 9.2e18), -9.2e18))
    }

    /// The date of `millis` since 1970-01-01 UTC.
    public static func date(millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }
}

/// What a session's clock was set to, recorded in the recording's header (and a durable store's): when the store
/// started (`os.clock()` counts from it), its offset from UTC and the environment `os.getenv` read.
public struct RecordedClock: Sendable, Equatable {
    /// When the store started, in milliseconds since 1970-01-01 UTC.
    public var started: Int64
    /// Its offset east of UTC, in seconds, which `os.date` and `os.time(t)` read local time in.
    public var utcOffsetSeconds: Int
    /// What `os.getenv` found.
    public var environment: [String: String]

    /// A record of a clock started at `started` (milliseconds since 1970-01-01 UTC); by default UTC, no environment.
    public init(started: Int64, utcOffsetSeconds: Int = 0, environment: [String: String] = [:]) {
        self.started = started
        self.utcOffsetSeconds = utcOffsetSeconds
        self.environment = environment
    }
}

/// The times a replay gives its actions, in dispatch order (`ScriptedStore.dispatch(_:at:)`): runs of actions that
/// share a time. The store's thread takes them as it reduces the actions; the dispatching thread adds them. An
/// action dispatched without a time while none are waiting reads the clock.
final class TimeSchedule: Sendable {
    /// Runs of actions that share a time, oldest first from `head` (those before it are spent; dropped in blocks,
    /// not one by one: a window of a replay may hold thousands).
    private struct Waiting {
        var runs: [(time: Int64, count: Int)] = []
        var head = 0
    }
    private let waiting = Protected(Waiting())
    /// How many actions wait with a time: none (most stores, always) costs one load per run, no lock.
    private let count = Atomic<Int>(0)

    /// The next actions are to run at `times`, in order.
    func add(_ times: some Sequence<Int64>) {
        waiting.withLock { waiting in
            var added = 0
            for time in times {
                if waiting.runs.count > waiting.head, waiting.runs[waiting.runs.count - 1].time == time {
                    waiting.runs[waiting.runs.count - 1].count += 1
                } else {
                    waiting.runs.append((time, 1))
                }
                added += 1
            }
            count.add(added, ordering: .releasing)
        }
    }

    /// The time of the next action and how many after it share it (at most `limit`); nil when none wait.
    func next(upTo limit: Int) -> (time: Int64, count: Int)? {
        guard count.load(ordering: .acquiring) > 0 else { return nil }
        return waiting.withLock { waiting in
            guard waiting.head < waiting.runs.count else { return nil }
            let run = waiting.runs[waiting.head]
            return (run.time, min(run.count, limit))
        }
    }

    /// `taken` actions were reduced at the first waiting time.
    func took(_ taken: Int) {
        guard taken > 0, count.load(ordering: .acquiring) > 0 else { return }
        waiting.withLock { waiting in
            guard waiting.head < waiting.runs.count else { return }
            let used = min(taken, waiting.runs[waiting.head].count)
            waiting.runs[waiting.head].count -= used
            if waiting.runs[waiting.head].count == 0 {
                waiting.head += 1
                if waiting.head == waiting.runs.count {
                    waiting.runs.removeAll(keepingCapacity: waiting.runs.count <= 65_536)
                    waiting.head = 0
                } else if waiting.head >= 4_096 {
                    waiting.runs.removeFirst(waiting.head)
                    waiting.head = 0
                }
            }
            count.subtract(used, ordering: .releasing)
        }
    }
}

/// The engine's clock, a part of the engine (`ScriptEngine.clock`): the host's `StoreClock`, what it was set to
/// (recorded), and a replay's schedule of times, which goes first while it holds any.
struct EngineClock {
    let source: StoreClock
    let recorded: RecordedClock
    let schedule: TimeSchedule?

    /// The time of the next run of up to `limit` actions, how many of them may run at it, and whether it is a
    /// replay's (then `took` must be told how many did).
    func next(upTo limit: Int) -> (time: Int64, count: Int, scheduled: Bool) {
        if let schedule, let next = schedule.next(upTo: limit) { return (next.time, next.count, true) }
        return (source.nowMillis(), limit, false)
    }

    /// `count` actions ran at the time `next` gave, a replay's when `scheduled`.
    func took(_ count: Int, scheduled: Bool) {
        if scheduled { schedule?.took(count) }
    }
}
