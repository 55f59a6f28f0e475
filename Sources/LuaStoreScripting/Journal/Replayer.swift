import Foundation
import LuaKit
import LuaStoreCore

/// Replays recorded actions with the app's scripts as they are now, and says where what they do differs from what
/// was recorded — the one replayer behind `luastore replay`, the devtools' import and the devtools' replay. A
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
        public var changesJSON: ArraySlice<UInt8>?
        /// The commands it returned (nil: not recorded, not compared).
        public var commands: [LuaValue]?

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
            case changes
            case commands
            case props
        }

        public var aspect: Aspect
        /// The places that differ (at least one): a path, the value then and now.
        public var differences: [JournalComparison.Difference]
    }

    /// Starts a replay of the app in `folder` from `state` (nil: the app's `init`). `options` are the store's
    /// (effects are turned off; a `journal` given there hears every entry too).
    public init(app folder: URL, from state: LuaValue?, options: ScriptedStoreOptions) async throws(ScriptFailure) {
        var options = options
        options.performsEffects = false
        options.initialState = state
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
    public func send(_ action: LuaValue) async -> JournalEntry? {
        heard.withLock { $0 = [] }
        _ = await store.send(action)
        return heard.withLock { heard in
            defer { heard = nil }
            return heard?.last
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
            if then != failure {
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
            if recorded.changes == nil, let json = recorded.changesJSON { then = try RecordingLine.changes(from: RecordedJSON(parsing: json)) }
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
