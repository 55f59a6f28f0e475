import LuaKit
import LuaStoreCore

/// What runs keep between calls, a part of the engine (`ScriptEngine.runs`): the store's notification points, how
/// many actions the next run takes (`RunSpan`), the number the next command gets, and counts for tests of
/// batching. The run loop itself coordinates every part (`ScriptEngine+Runs.swift`).
struct Runs {
    /// The store's notification points, in actions: 1 when it notifies after every action, n under
    /// `.batched(maximumActions: n)`; the readers run within runs at those points. 0 (an engine without a
    /// store): they run when `flush` is called.
    var notificationInterval = 0
    /// How many of a run's actions go into the VM at once.
    private(set) var span = RunSpan()
    /// The sequence number of the last command numbered.
    private var commandSequence: UInt64 = 0
    /// How many times a reducer call crossed into the VM (a run of actions is one), for tests of batching.
    private(set) var crossings = 0
    /// How many actions were converted into the VM to be reduced (a run's whole span, whether it ran all of it
    /// or not), for tests of batching.
    private(set) var convertedActions = 0
    /// The reduce last asked whether it only reads its action's fields, and its answer (`ScriptEngine.sharesRepeats`).
    var actionReading: (reduce: LuaReference, readsOnly: Bool)?

    /// The store notifies after every action (`.everyAction`): the readers run within each reduction.
    var notifiesEveryAction: Bool { notificationInterval == 1 }

    /// A reducer call crossed into the VM.
    mutating func crossed() { crossings += 1 }

    /// `count` actions were converted into the VM to be reduced.
    mutating func converted(_ count: Int) { convertedActions += count }

    /// A run of one was taken while more actions waited.
    mutating func tookOneOfMany() { span.tookOneOfMany() }

    /// A run of `offered` actions applied `applied` of them.
    mutating func ran(_ applied: Int, of offered: Int) { span.ran(applied, of: offered) }

    /// Numbers `effects` (a reducer's commands) in the order they were returned, after every earlier command.
    mutating func number(_ effects: inout [ScriptEffect]) {
        for index in effects.indices {
            commandSequence += 1
            effects[index].sequence = commandSequence
        }
    }
}

/// How many of a run's actions go into the VM at once: a run that ends early (a change observers must see,
/// subscriptions to diff) sets it to the length it had, a run taken whole doubles it, so the actions handed again
/// after an early end are not converted again and again (that was quadratic in the length of the queue). At 1 the
/// actions go one at a time, and two are tried again after `singlesBeforeTrying` of them: after 1 at first, twice
/// as many each time two end after one (at most 64), so a store whose every action ends its run (a reader sees
/// each one) does not convert an action it does not run every other time.
struct RunSpan {
    static let lengths = 1...65_536
    /// The most actions a run takes when the readers run within it, unless the store's notification points lie
    /// further apart: what they gave stays in the VM until the run returns and is delivered then, so a long run
    /// would hold a value per point there and in one large list here (65,536 of them under `.everyAction`:
    /// megabytes, new pages touched per run), and observers would hear of the first point late.
    static let observedLength = 256
    private(set) var length = 16
    private var singlesBeforeTrying = 1
    private var singlesLeft = 1

    /// A run of one was taken while more actions waited: after enough of them, two are tried again.
    mutating func tookOneOfMany() {
        singlesLeft -= 1
        if singlesLeft <= 0 { length = 2 }
    }

    /// A run of `offered` actions applied `applied` of them.
    mutating func ran(_ applied: Int, of offered: Int) {
        if applied < offered {
            length = max(Self.lengths.lowerBound, applied)
            if length == 1 {
                singlesBeforeTrying = offered == 2 ? min(64, 2 * singlesBeforeTrying) : 1
                singlesLeft = singlesBeforeTrying
            }
        } else {
            length = min(Self.lengths.upperBound, 2 * length)
            singlesBeforeTrying = 1
        }
    }
}
