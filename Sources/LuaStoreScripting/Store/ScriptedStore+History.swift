import Foundation
import LuaKit
import LuaStoreCore

// Time travel through the kept history, and reading the state and props at any point of it.
extension ScriptedStore {
    // MARK: Time travel

    /// The sequence numbers of the journal entries the history keeps (committed actions and migrations),
    /// oldest first, and the one the state is at.
    public func history() async -> (kept: [UInt64], at: UInt64?) {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: (engine.journal.history.sequences, engine.historyPosition)) }
        }
    }

    /// Puts the state as it was just after journal entry `sequence` (a kept one, or any later one), without
    /// running a reducer or an effect: observers get that point's props; actions that arrive meanwhile (from
    /// outside or from effects) are held, in order, until `resume()` or `rewind(to:)`. Costs what the entries in
    /// between changed, never the state's size.
    public func jump(to sequence: UInt64) async throws(ScriptFailure) {
        try await onThread { engine throws(ScriptFailure) in try engine.jump(to: sequence) }
    }

    /// Back to the present: the newest state, then the held actions, in order, before anything dispatched
    /// after them (each keeps the number of its dispatch: `ScriptFailure.dispatchIndex`).
    public func resume() async {
        await withCheckedContinuation { continuation in
            thread.async { [engine, root] in
                root.reinstate(engine.resume())
                continuation.resume()
            }
        }
    }

    /// Goes on from the state after entry `sequence`: the entries after it are dropped, the subscriptions are
    /// diffed again from that state (launching and cancelling), then the held actions are reduced, as `resume()`
    /// reduces them.
    public func rewind(to sequence: UInt64) async throws(ScriptFailure) {
        let result: Result<Void, ScriptFailure> = await withCheckedContinuation { continuation in
            thread.async { [engine, root] in
                do throws(ScriptFailure) {
                    root.reinstate(try engine.rewind(to: sequence), diffingSubscriptions: true)
                    continuation.resume(returning: .success(()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        try result.get()
    }

    /// The state just after journal entry `sequence` (a kept one, or any later one), converted; the store stays
    /// where it is.
    public func state(at sequence: UInt64) async throws(ScriptFailure) -> LuaValue {
        try await onThread { engine throws(ScriptFailure) in try engine.state(at: sequence) }
    }

    // MARK: Inspecting (at any point the history keeps)

    /// A page of the table at `path` in the state (see `StateSlice`): now (`at` nil), just after entry `at`, or
    /// just before it (`before`: the state its reducer saw). `nil` when no table is there. Costs that table's
    /// keys and the entries between here and there, never the whole state; nothing runs again.
    public func inspect(_ path: [LuaKey] = [], at sequence: UInt64? = nil, before: Bool = false,
                        offset: Int = 0, limit: Int = 200) async throws(ScriptFailure) -> StateSlice? {
        try await onThread { engine throws(ScriptFailure) in
            try engine.withState(at: sequence, before: before) { () throws(LuaError) in try engine.slice(path, offset: offset, limit: limit) }
        }
    }

    /// The values at `paths` (nil where absent), converted, at the same points as `inspect`.
    public func values(at paths: [[LuaKey]], at sequence: UInt64? = nil, before: Bool = false) async throws(ScriptFailure) -> [LuaValue] {
        try await onThread { engine throws(ScriptFailure) in
            try engine.withState(at: sequence, before: before) { () throws(LuaError) in
                var values: [LuaValue] = []
                for path in paths { values.append(try engine.value(at: path)) }
                return values
            }
        }
    }

    /// Where `text` occurs (case-insensitive) in a key or a value of the state, at most `limit` places, at the
    /// same points as `inspect`. Walks the whole state: for a person asking, not for every action.
    public func search(_ text: String, at sequence: UInt64? = nil, limit: Int = 200) async throws(ScriptFailure) -> [StateMatch] {
        try await onThread { engine throws(ScriptFailure) in
            try engine.withState(at: sequence) { () throws(LuaError) in try engine.search(text, limit: limit) }
        }
    }

    /// For entry `sequence` (a kept one), in one trip through the history: the values at `paths` just before it
    /// (what its changes replaced) and the props just after it.
    public func details(of sequence: UInt64, paths: [[LuaKey]]) async throws(ScriptFailure) -> (before: [LuaValue], props: Result<LuaValue, LuaError>) {
        try await onThread { engine throws(ScriptFailure) in try engine.details(of: sequence, paths: paths) }
    }

    /// The props the scripts give for the state just after entry `sequence` (delivered to no one).
    public func props(at sequence: UInt64) async throws(ScriptFailure) -> LuaValue {
        try await onThread { engine throws(ScriptFailure) in
            try engine.withState(at: sequence) { () throws(LuaError) in try engine.currentProps() }
        }
    }

    /// The props just after each of `sequences` (kept entries, ascending), computed by moving the state forward
    /// through the history once; an entry whose props fail gives the error.
    public func props(along sequences: [UInt64]) async throws(ScriptFailure) -> [Result<LuaValue, LuaError>] {
        try await onThread { engine throws(ScriptFailure) in try engine.props(along: sequences) }
    }

    /// The first kept entry after which the Lua `expression` holds (see `ConditionResult`): `state.count > 3`,
    /// `#state.todos == 0`. Reads the state as props do; checks every kept point from the oldest, each costing
    /// what one entry changed and one evaluation, and puts the state back.
    public func firstEntry(where expression: String) async throws(ScriptFailure) -> ConditionResult {
        try await onThread { engine throws(ScriptFailure) in try engine.firstEntry(where: expression) }
    }

    /// The app's folder.
    public var folder: URL { engine.app.folder }

    /// Whether the store is showing a past point (after `jump(to:)`, until `resume()` or `rewind(to:)`), and
    /// how many actions are held meanwhile.
    public func travelStatus() async -> (traveling: Bool, held: Int) {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: (engine.journal.history.traveling, engine.journal.history.heldCount)) }
        }
    }

    func onThread<T: Sendable>(_ body: @escaping @Sendable (ScriptEngine) throws(ScriptFailure) -> T) async throws(ScriptFailure) -> T {
        let result: Result<T, ScriptFailure> = await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: Result { () throws(ScriptFailure) -> T in try body(engine) }) }
        }
        return try result.get()
    }
}
