import LuaKit
import LuaStoreCore

/// What the Swift store holds for a scripted app: the state itself lives in the VM, so this is only a version
/// number that grows with every applied action.
struct ScriptState: Sendable, Equatable {
    /// Actions applied so far.
    var version: UInt64 = 0
}

/// The app's Lua `reduce` and `subscriptions` as a `Reducer` of the Swift store.
struct ScriptReducer: Reducer {
    let engine: ScriptEngine

    func reduce(into state: inout ScriptState, action: LuaValue) throws -> [ScriptEffect] {
        try reduce(into: &state, action: action, source: .outside)
    }

    func reduce(into state: inout ScriptState, action: LuaValue, source: ActionSource) throws -> [ScriptEffect] {
        let commands = try engine.reduce(action, source: source)
        state.version += 1
        return commands
    }

    /// Queued actions cross into the VM a run at a time (see `ScriptEngine.reduce(run:)`).
    var reducesRuns: Bool { true }

    /// The props, selectors and child stores' props run within the VM's run, at the store's notification
    /// points, when an action since the last changed what they read (the barrier knows).
    var notifiesWithinRuns: Bool { true }

    func reduce(into state: inout ScriptState, actions: ArraySlice<LuaValue>) -> RunOutcome<ScriptEffect> {
        reduce(into: &state, actions: actions, sinceNotification: 0)
    }

    func reduce(into state: inout ScriptState, actions: ArraySlice<LuaValue>, sinceNotification: Int) -> RunOutcome<ScriptEffect> {
        let outcome = engine.reduce(run: actions, sinceNotification: sinceNotification)
        state.version += UInt64(outcome.applied - outcome.failures.count)
        return outcome
    }

    func subscriptions(for state: ScriptState) throws -> [String: ScriptEffect] {
        try engine.currentSubscriptions()
    }

    /// Whether the running app declares subscriptions (it may change with a reload).
    var declaresSubscriptions: Bool { engine.declaresSubscriptions }
}

/// A child store's Lua `reduce`, applied to its local state after the root's reducer.
struct ChildScriptReducer: Reducer {
    let engine: ScriptEngine
    let id: Int64

    func reduce(into state: inout ScriptState, action: LuaValue) throws -> [ScriptEffect] {
        let commands = try engine.reduceChild(id, action)
        state.version += 1
        return commands
    }

    var declaresSubscriptions: Bool { false }
}

/// Runs a store's jobs on the app's `LuaThread`, where its VM lives.
struct LuaThreadExecutor: StoreExecutor {
    let thread: LuaThread

    func execute(_ job: @escaping @Sendable () -> Void) {
        thread.async(job)
    }
}
