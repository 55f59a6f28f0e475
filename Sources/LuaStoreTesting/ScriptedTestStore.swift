import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting

/// A scripted store for tests, in the manner of TCA's `TestStore`: `send` an action and say what it changes
/// (on a mirror of the state, `$0["todos"][1]["done"] = true`), `receive` the actions its effects send back
/// (performed by stand-ins the test supplies: nothing reaches the network or the disk unless a stand-in does),
/// and `finish`. Exhaustive by default: a change, a command or a received action the test did not state fails
/// with a readable account of the difference, paths as Lua writes them. Non-exhaustive on request: then only
/// what the test states is checked.
///
/// Every check throws a `TestStoreFailure` — a thrown error fails the test under Swift Testing and XCTest alike.
///
/// ```swift
/// let store = try await ScriptedTestStore(app: appFolder)
/// try await store.send(["type": "add", "title": "Buy milk"]) {
///     $0["todos"][1] = ["title": "Buy milk", "done": false]
/// }
/// try await store.finish()
/// ```
public final class ScriptedTestStore: Sendable {
    /// How much the test must state.
    public enum Exhaustivity: Sendable, Equatable {
        /// Every change, command and received action (the default).
        case on
        /// Only what the test states is checked; the rest is taken as it came.
        case off
    }

    /// The store under test.
    public let store: ScriptedStore
    private let exhaustivity: Exhaustivity
    private let mirror: Protected<LuaValue>
    /// Journal entries of actions the effects sent back, not yet received by the test.
    private let unreceived: Protected<[JournalEntry]>
    /// Failures the store reported that no `send` returned (effects, props, subscriptions).
    private let reported: Protected<[ScriptFailure]>
    /// What the store's clock reads.
    private let clock: Protected<Date>

    /// The time a test store's clock starts at unless the test says otherwise: 2000-01-01 00:00:00 UTC.
    public static let defaultNow = Date(timeIntervalSince1970: 946_684_800)

    /// Loads the app in `app` (as `ScriptedStore(app:options:)`). `effects` are the stand-ins, by kind (see
    /// `ScriptedStoreOptions.effectDoubles`); effects of other kinds are not performed. `now`: the time the store's
    /// clock reads (`os.time()`, `os.date()`, `os.clock()` in its scripts), standing still until the test moves it
    /// (`now`, `advance(by:)`). `configure` adjusts the remaining options (limits, initial state, the clock's
    /// offset from UTC and environment, …).
    public init(app: URL, exhaustivity: Exhaustivity = .on, now: Date = ScriptedTestStore.defaultNow,
                effects: [String: @Sendable (ScriptEffect) async throws -> [LuaValue]] = [:],
                configure: (inout ScriptedStoreOptions) -> Void = { _ in }) async throws {
        let clock = Protected(now)
        self.clock = clock
        let unreceived = Protected<[JournalEntry]>([])
        let reported = Protected<[ScriptFailure]>([])
        // (A reducer's failures, and refusals of undeclared actions, come back to the test through `send` and `receive`; the
        // rest are kept here.)
        var options = ScriptedStoreOptions(log: { _ in }, failures: { failure in
            if failure.stage != .reduce && failure.stage != .undeclared { reported.withLock { $0.append(failure) } }
        })
        configure(&options)
        options.clock.now = { clock.value }
        var doubles = options.effectDoubles
        for kind in ScriptEffect.kinds where doubles[kind] == nil { doubles[kind] = { _ in [] } } // (not performed)
        for (kind, standIn) in effects { doubles[kind] = standIn }
        options.effectDoubles = doubles
        let userJournal = options.journal
        options.journal = { entry in
            userJournal?(entry)
            if case .effect = entry.origin, case .action = entry.event { unreceived.withLock { $0.append(entry) } }
        }
        let store = try await ScriptedStore(app: app, options: options)
        self.store = store
        self.exhaustivity = exhaustivity
        self.unreceived = unreceived
        self.reported = reported
        mirror = Protected(try await store.state())
    }

    deinit { store.shutdown() }

    /// The time the store's clock reads: the actions sent after setting it run at it (their scripts' `os.time()`).
    public var now: Date {
        get { clock.value }
        set { clock.withLock { $0 = newValue } }
    }

    /// Moves the store's clock on by `seconds`.
    public func advance(by seconds: TimeInterval) {
        clock.withLock { $0 = $0.addingTimeInterval(seconds) }
    }

    /// The state as the test has stated it so far (with what non-exhaustive steps took as it came).
    public var state: LuaValue { mirror.withLock { $0 } }

    /// Failures the store reported apart from `send`'s own (an effect, props or subscription that failed).
    public var failures: [ScriptFailure] { reported.withLock { $0 } }

    /// Sends `action` and checks it: it must apply (not fail); the state after it must be the state before
    /// with `update` applied (exhaustive: all of it; else what `update` changed); its commands must be
    /// `commands` (their payloads, in order) — exhaustive: when the action returned commands, the test must
    /// list them. Returns the action's journal entry. Exhaustive: actions the effects sent back before must
    /// have been received first.
    @discardableResult
    public func send(_ action: LuaValue, commands: [LuaValue]? = nil, fileID: StaticString = #fileID, line: UInt = #line,
                     _ update: ((inout LuaValue) throws -> Void)? = nil) async throws -> JournalEntry {
        let place = "\(fileID):\(line)"
        if exhaustivity == .on {
            let pending = unreceived.withLock { $0 }
            if !pending.isEmpty {
                throw TestStoreFailure(place, "send \(action): the effects sent actions the test has not received:\n"
                                       + pending.map { "  \(Self.action(of: $0))" }.joined(separator: "\n"))
            }
        }
        switch await store.send(action) {
        case .applied(let entry):
            try check(entry, what: "send \(action)", update: update, place: place)
            try checkCommands(entry.commands, expected: commands, what: "send \(action)", place: place)
            return entry
        case .failed(let failure):
            throw TestStoreFailure(place, "send \(action): the reducer failed: \(failure)")
        case .held:
            throw TestStoreFailure(place, "send \(action): the store stands at a past entry of its history; the action is held")
        case .dropped:
            throw TestStoreFailure(place, "send \(action): the store has stopped")
        }
    }

    /// Sends `action`, which must fail; returns the failure. The state must be as it was (it always is: each
    /// action is a transaction).
    @discardableResult
    public func sendFailing(_ action: LuaValue, fileID: StaticString = #fileID, line: UInt = #line) async throws -> ScriptFailure {
        let place = "\(fileID):\(line)"
        switch await store.send(action) {
        case .failed(let failure):
            let now = try await store.state()
            let expected = mirror.withLock { $0 }
            if exhaustivity == .on, now != expected {
                throw TestStoreFailure(place, "send \(action) failed but the state changed:\n" + StateDifference.lines(expected: expected, actual: now))
            }
            return failure
        case .applied(let entry):
            throw TestStoreFailure(place, "send \(action): expected the reducer to fail, but it applied (changes: \(Self.describe(entry.changes)))")
        case .held, .dropped:
            throw TestStoreFailure(place, "send \(action): the action was not reduced")
        }
    }

    /// Receives the next action an effect sent back (waiting up to `timeout` for it): it must equal `action`,
    /// and the state after it must be the state before with `update` applied (as for `send`). Non-exhaustive:
    /// actions before it that do not equal `action` are skipped.
    @discardableResult
    public func receive(_ action: LuaValue, commands: [LuaValue]? = nil, timeout: Duration = .seconds(5),
                        fileID: StaticString = #fileID, line: UInt = #line,
                        _ update: ((inout LuaValue) throws -> Void)? = nil) async throws -> JournalEntry {
        let place = "\(fileID):\(line)"
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            let next: JournalEntry? = unreceived.withLock { entries in
                if exhaustivity == .off {
                    while let first = entries.first, Self.action(of: first) != action {
                        entries.removeFirst()
                        try? applyTaken(first)
                    }
                }
                return entries.isEmpty ? nil : entries.removeFirst()
            }
            if let entry = next {
                let received = Self.action(of: entry)
                guard received == action else {
                    throw TestStoreFailure(place, "receive: expected \(action), but the effects sent \(received)")
                }
                if let failure = entry.failure {
                    throw TestStoreFailure(place, "receive \(action): the reducer failed: \(failure)")
                }
                try check(entry, what: "receive \(action)", update: update, place: place)
                try checkCommands(entry.commands, expected: commands, what: "receive \(action)", place: place)
                return entry
            }
            guard clock.now < deadline else {
                throw TestStoreFailure(place, "receive: no action \(action) came from the effects within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Ends the test: waits (up to `timeout`) until the store is idle; exhaustive, every action the effects sent
    /// back must have been received, and no failure reported apart from `send`'s.
    public func finish(timeout: Duration = .seconds(5), fileID: StaticString = #fileID, line: UInt = #line) async throws {
        let place = "\(fileID):\(line)"
        guard await store.waitUntilIdle(timeout: timeout) else {
            throw TestStoreFailure(place, "finish: the store was still busy after \(timeout) (an effect still running?)")
        }
        guard exhaustivity == .on else { return }
        let pending = unreceived.withLock { $0 }
        if !pending.isEmpty {
            throw TestStoreFailure(place, "finish: the effects sent actions the test has not received:\n"
                                   + pending.map { "  \(Self.action(of: $0))" }.joined(separator: "\n"))
        }
        let failures = reported.withLock { $0 }
        if !failures.isEmpty {
            throw TestStoreFailure(place, "finish: the store reported failures:\n" + failures.map { "  \($0)" }.joined(separator: "\n"))
        }
    }

    // MARK: Checking

    /// Applies `entry`'s changes to the mirror and compares. Exhaustive: with the mirror as it was, with
    /// `update` applied. Non-exhaustive: with the state as it came, with `update` applied — whatever the update
    /// states that did not come is a difference; whatever it does not state is taken as it came.
    private func check(_ entry: JournalEntry, what: String, update: ((inout LuaValue) throws -> Void)?, place: String) throws {
        var actual = mirror.withLock { $0 }
        for change in entry.changes { actual.apply(change) }
        var expected = exhaustivity == .on ? mirror.withLock { $0 } : actual
        mirror.withLock { $0 = actual } // (what came, whether or not the test said it: later steps go on from it)
        do {
            try update?(&expected)
        } catch {
            throw TestStoreFailure(place, "\(what): the update closure threw: \(error)")
        }
        if actual != expected {
            throw TestStoreFailure(place, "\(what): the state is not what the test says (− expected, + actual):\n"
                                   + StateDifference.lines(expected: expected, actual: actual))
        }
    }

    private func checkCommands(_ commands: [ScriptEffect], expected: [LuaValue]?, what: String, place: String) throws {
        let actual = commands.map(\.payload)
        if let expected {
            if actual != expected {
                throw TestStoreFailure(place, "\(what): commands (− expected, + actual):\n"
                                       + expected.map { "− \($0)" }.joined(separator: "\n") + (expected.isEmpty ? "" : "\n")
                                       + actual.map { "+ \($0)" }.joined(separator: "\n"))
            }
        } else if exhaustivity == .on, !actual.isEmpty {
            throw TestStoreFailure(place, "\(what): the action returned commands the test has not stated (pass commands:):\n"
                                   + actual.map { "+ \($0)" }.joined(separator: "\n"))
        }
    }

    /// (Non-exhaustive `receive` skipping an action: its changes go into the mirror as they came.)
    private func applyTaken(_ entry: JournalEntry) throws {
        mirror.withLock { state in for change in entry.changes { state.apply(change) } }
    }

    private static func action(of entry: JournalEntry) -> LuaValue {
        if case .action(let action) = entry.event { return action }
        return .nil
    }

    private static func describe(_ changes: [StateChange]) -> String {
        changes.map { "\(LuaPath.render(root: "state", keys: $0.path)) = \($0.value.map(\.description) ?? "nil")" }
            .joined(separator: ", ")
    }
}

/// A check of a `ScriptedTestStore` that did not hold: where (the test's file and line) and what differed.
public struct TestStoreFailure: Error, CustomStringConvertible, Sendable {
    /// `File.swift:LINE` of the step that failed.
    public let place: String
    /// What differed, in words.
    public let message: String

    init(_ place: String, _ message: String) {
        self.place = place
        self.message = message
    }

    public var description: String { "\(place): \(message)" }
}
