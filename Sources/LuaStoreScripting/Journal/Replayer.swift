import Foundation
import LuaKit
import LuaStoreCore

/// Replays recorded actions with the app's scripts as they are now, and says where what they do differs from what
/// was recorded — the one replayer, and the one replay-and-compare loop (`replay`), behind `luastore replay`, the
/// devtools' import and the devtools' replay. A
/// store of its own (effects are data: none is performed) starts from the recorded state; each action is
/// reduced as the session reduced it, and its journal entry is compared with the recorded one: its outcome
/// (applied or failed, and the failure's message), what it changed, the commands it returned (where they were
/// recorded) and the props after it (where they were kept). Costs what the compared actions hold, never the
/// state's size.
public final class Replayer: Sendable {
    /// The store replaying: the caller may observe it, read its props, keep it (the devtools' import browses it).
    public let store: ScriptedStore
    /// The entries heard while `reduce` or `send` runs (nil: not listening — the store may be used on after).
    private let heard = Protected<[JournalEntry]?>(nil)

    /// What an action did when it was recorded.
    public struct Recorded: Sendable {
        /// The failure's message (nil: it was applied).
        public var failure: String?
        /// What it changed: as values, or as the recording's JSON (compared without reading when the barrier
        /// writes the same bytes now).
        public var changes: [StateChange]?
        /// What it changed as the recording wrote it (JSON), when read from a line.
        public var changesJSON: ArraySlice<UInt8>?
        /// The commands it returned (nil: not recorded, not compared).
        public var commands: [LuaValue]?

        /// What an action did: its failure (nil: applied), its changes as values or JSON, its commands (nil: not compared).
        public init(failure: String?, changes: [StateChange]? = nil, changesJSON: ArraySlice<UInt8>? = nil, commands: [LuaValue]? = nil) {
            self.failure = failure
            self.changes = changes
            self.changesJSON = changesJSON
            self.commands = commands
        }

        /// What a journal entry says the action did.
        public init(_ entry: JournalEntry) {
            self.init(failure: entry.failure?.error.message, changes: entry.changes, commands: entry.commands.map(\.payload))
        }
    }

    /// Where an action now does something else than it did: what differs, and where.
    public struct Divergence: Sendable, Equatable {
        /// What differs, in the order they are compared.
        public enum Aspect: String, Sendable {
            /// Applied then and failed now, or the other way (or nothing was heard of it).
            case outcome
            /// It failed both times, with other messages.
            case failure
            /// What it changed differs.
            case changes
            /// The commands it returned differ.
            case commands
            /// The props after it differ.
            case props
        }

        /// What differs.
        public var aspect: Aspect
        /// The places that differ (at least one): a path, the value then and now.
        public var differences: [JournalComparison.Difference]
    }

    /// One action to replay: its sequence number when recorded, what it was, what it did then, and the props
    /// after it then (compared where given).
    public struct Step: Sendable {
        /// Its sequence number when recorded.
        public var sequence: UInt64
        /// The action to send.
        public var action: LuaValue
        /// What it did when recorded.
        public var recorded: Recorded
        /// The props after it then, compared when sent one by one (nil: not compared).
        public var props: LuaValue?
        /// When it ran (milliseconds since 1970-01-01 UTC): the time the replay gives it (nil: the clock's now).
        public var time: Int64?

        /// The action recorded as `sequence`, what it did then, the props after it (nil: not compared) and its time (nil: now).
        public init(sequence: UInt64, action: LuaValue, recorded: Recorded, props: LuaValue? = nil, time: Int64? = nil) {
            self.sequence = sequence
            self.action = action
            self.recorded = recorded
            self.props = props
            self.time = time
        }

        /// A recorded action of a recording.
        public init(_ recorded: RecordingLine.RecordedAction) {
            self.init(sequence: recorded.sequence, action: recorded.action, recorded: recorded.recorded, time: recorded.time)
        }
    }

    /// How actions are sent.
    public enum Pace: Sendable {
        /// A window of actions is dispatched without waiting for each, and compared once the store reduced it,
        /// while the next window is read; the props are not compared.
        case windowed
        /// Each action is sent on its own and waited for; the props after it are compared (where the step has
        /// them) and handed to `each`.
        case oneByOne
    }

    /// What a replay found.
    public struct Report: Sendable {
        /// Where the first divergence was found.
        public struct Found: Sendable {
            /// The step whose action diverged.
            public var step: Step
            /// The action's place among those replayed (1 for the first).
            public var position: Int
            /// Its journal entry now (nil: nothing was heard of it).
            public var now: JournalEntry?
            /// What differs.
            public var divergence: Divergence
        }

        /// The actions replayed (and compared).
        public var replayed = 0
        /// The first divergence found (nil: every action replayed did what was recorded).
        public var divergence: Found?
    }

    /// A recorded entry whose changes are not what the format says (found when compared).
    public struct UnreadableEntry: Error, CustomStringConvertible {
        /// The action's sequence number.
        public var sequence: UInt64
        /// What is wrong with its recorded changes.
        public var malformed: RecordingJSON.Malformed

        public var description: String { "the entry of action \(sequence) is not a recorded entry (\(malformed))" }
    }

    /// The replay-and-compare loop: sends the steps `next` hands over (until it hands over none) and compares what
    /// each does now with what it did, in order; stops at the first divergence, or goes on to the end when
    /// `continuing` (the first one is reported). `each` hears every step compared, with its entry and (one by one)
    /// the props after it. Errors of `next` and `each` are thrown as they are, after the steps before them were
    /// compared; a recorded entry that cannot be read is an `UnreadableEntry`.
    public func replay(_ pace: Pace, continuing: Bool = false, next: () throws -> [Step],
                       each: (Step, JournalEntry?, LuaValue?) throws -> Void = { _, _, _ in }) async throws -> Report {
        var report = Report()
        func compare(_ step: Step, _ now: JournalEntry?, props: LuaValue?) throws -> Bool {
            report.replayed += 1
            let divergence = try Self.divergence(of: step, now: now, props: props)
            if let divergence, report.divergence == nil {
                report.divergence = Report.Found(step: step, position: report.replayed, now: now, divergence: divergence)
            }
            try each(step, now, props)
            return report.divergence == nil || continuing
        }
        switch pace {
        case .windowed:
            // Each window is dispatched without waiting for each action (the store takes them in order, and each
            // makes one journal entry); the store reduces a window while the next is read and the one before
            // compared, on this thread; a failure to read the next window is thrown after this one was compared,
            // as if read after it.
            var window = try next()
            if !window.isEmpty { start(steps: window) }
            while !window.isEmpty {
                let following = Result { try next() }
                let now = await finish(window.count)
                if case .success(let following) = following, !following.isEmpty { start(steps: following) }
                for (step, now) in zip(window, now) where try !compare(step, now, props: nil) { return report }
                window = try following.get()
            }
        case .oneByOne:
            while case let steps = try next(), !steps.isEmpty {
                for step in steps {
                    let (now, props) = await send(step)
                    if try !compare(step, now, props: props) { return report }
                }
            }
        }
        return report
    }

    /// Starts a replay of the app in `folder` from `state` (nil: the app's `init`). `options` are the store's
    /// (effects are turned off; a `journal` given there hears every entry too). `clock`: the recorded store's, which
    /// the store goes on with, loading and `init` reading `time` (each step then runs at its own). `random`: the
    /// state of `math.random`'s generator with `state` (its header's).
    public init(app folder: URL, from state: LuaValue?, clock: RecordedClock? = nil, time: Int64? = nil, random: LuaRandomState? = nil,
                options: ScriptedStoreOptions) async throws(ScriptFailure) {
        var options = options
        options.performsEffects = false
        options.initialState = state
        options.initialRandom = random
        if let clock { options.recordedClock = clock }
        if let time { options.initialTime = time }
        let heard = self.heard
        let also = options.journal
        options.journal = { entry in
            heard.withLock { $0?.append(entry) }
            also?(entry)
        }
        store = try await ScriptedStore(app: folder, options: options)
    }

    /// Dispatches `actions` in order, without waiting for each, and returns the journal entry each made (nil where
    /// none was heard: a store that stopped).
    public func reduce(_ actions: some Collection<LuaValue>) async -> [JournalEntry?] {
        start(actions)
        return await finish(actions.count)
    }

    /// `reduce` in two halves: dispatches `actions` in order and returns at once, so that the caller can read the
    /// next actions while the store reduces these; `finish` then waits for their entries. (At most one `start`
    /// before each `finish`.)
    public func start(_ actions: some Collection<LuaValue>) {
        heard.withLock { $0 = [] }
        for action in actions { store.dispatch(action) }
    }

    /// `start` for steps: each runs at its recorded time, where it has one.
    public func start(steps: [Step]) {
        heard.withLock { $0 = [] }
        if steps.allSatisfy({ $0.time != nil }) {
            store.dispatch(timed: steps.map { ($0.action, $0.time ?? 0) })
            return
        }
        for step in steps {
            if let time = step.time { store.dispatch(step.action, at: time) } else { store.dispatch(step.action) }
        }
    }

    /// The journal entries of the `count` actions the last `start` dispatched, once the store reduced them (nil
    /// where none was heard: a store that stopped).
    public func finish(_ count: Int) async -> [JournalEntry?] {
        await store.barrier()
        let now = heard.withLock { heard in
            defer { heard = nil }
            return heard ?? []
        }
        return (0..<count).map { $0 < now.count ? now[$0] : nil }
    }

    /// Reduces one action and waits until its props are delivered (`ScriptedStore.send`); returns its entry.
    /// `time`: when it runs (nil: the clock's now).
    public func send(_ action: LuaValue, at time: Int64? = nil) async -> JournalEntry? {
        heard.withLock { $0 = [] }
        _ = await store.send(action, at: time)
        return heard.withLock { heard in
            defer { heard = nil }
            return heard?.last
        }
    }

    /// Sends one step's action and waits until its props are delivered: its entry, and the props after it (where
    /// the step has props to compare with, or `props` asks).
    public func send(_ step: Step, props: Bool = true) async -> (now: JournalEntry?, props: LuaValue?) {
        let now = await send(step.action, at: step.time)
        return (now, props || step.props != nil ? try? await store.props() : nil)
    }

    /// Where what a step did now differs from what it did then (at most one place named); a recorded entry that
    /// cannot be read is an `UnreadableEntry`.
    public static func divergence(of step: Step, now: JournalEntry?, props: LuaValue?) throws(UnreadableEntry) -> Divergence? {
        do {
            return try divergence(step.recorded, now: now, props: step.props.flatMap { then in props.map { (then, $0) } }, limit: 1)
        } catch {
            throw UnreadableEntry(sequence: step.sequence, malformed: error)
        }
    }

    /// Where what an action did now (`now`, its journal entry) differs from what was `recorded`, with the props
    /// after it then and now where both are known; nil when they agree. At most `limit` places are named.
    public static func divergence(_ recorded: Recorded, now: JournalEntry?, props: (then: LuaValue, now: LuaValue)? = nil,
                                  limit: Int = 50) throws(RecordingJSON.Malformed) -> Divergence? {
        typealias Difference = JournalComparison.Difference
        guard let now else { return Divergence(aspect: .outcome, differences: [Difference(path: "the outcome", then: "applied", now: "nothing heard")]) }
        switch (recorded.failure, now.failure?.error.message) {
        case (let then?, let failure?):
            // (A limit stopped it then and now — the time budget or the memory cap, whichever came first: the same.)
            if then != failure, !(LuaError.isLimitMessage(then) && now.failure?.error.stoppedByALimit == true) {
                return Divergence(aspect: .failure, differences: [Difference(path: "the failure", then: .string(then), now: .string(failure))])
            }
            return nil // (it failed both times: nothing changed, no commands, the props as they were)
        case (let then?, nil):
            return Divergence(aspect: .outcome, differences: [Difference(path: "the outcome", then: .string("failed: " + then), now: "applied")])
        case (nil, let failure?):
            return Divergence(aspect: .outcome, differences: [Difference(path: "the outcome", then: "applied", now: .string("failed: " + failure))])
        case (nil, nil):
            break
        }
        if let json = recorded.changesJSON, now.changesAreEncoded(as: json) {
            // (The same bytes: the same changes.)
        } else {
            var then = recorded.changes ?? []
            if recorded.changes == nil, let json = recorded.changesJSON { then = try RecordingLine.changes(from: RecordingJSON.Value(parsing: json)) }
            let changes = JournalComparison.differences(then, now.changes, limit: limit)
            if !changes.isEmpty { return Divergence(aspect: .changes, differences: changes) }
        }
        if let commands = recorded.commands {
            let returned = now.commands.map(\.payload)
            if commands != returned {
                return Divergence(aspect: .commands, differences: [Difference(path: "commands", then: .table(LuaTable(array: commands)),
                                                                              now: .table(LuaTable(array: returned)))])
            }
        }
        if let props, props.then != props.now {
            return Divergence(aspect: .props, differences: JournalComparison.differences(props.then, props.now, path: "props", limit: limit))
        }
        return nil
    }
}

extension RecordingLine.RecordedAction {
    /// What the recording says the action did, to compare with what it does now.
    public var recorded: Replayer.Recorded {
        Replayer.Recorded(failure: failure, changes: changes, changesJSON: changesJSON)
    }
}
