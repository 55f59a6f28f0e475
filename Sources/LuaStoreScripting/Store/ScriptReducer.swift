import LuaKit
import LuaStoreCore

/// The app's Lua `reduce` and `subscriptions` as the reducer of the Swift store, which takes runs of actions
/// (`RunReducer`). The state lives in the VM, so the Swift store holds none (`Void`).
struct ScriptReducer: RunReducer {
    let engine: ScriptEngine

    func reduce(into state: inout Void, action: LuaValue) throws -> [ScriptEffect] {
        try engine.reduce(action, source: .outside)
    }

    func reduce(into state: inout Void, action: LuaValue, source: ActionSource) throws -> [ScriptEffect] {
        try engine.reduce(action, source: source)
    }

    /// The props, selectors and child stores' props run within the VM's run, at the store's notification
    /// points, when an action since the last changed what they read (the barrier knows).
    var notifiesWithinRuns: Bool { true }

    /// Queued actions cross into the VM a run at a time (see `ScriptEngine.reduce(run:)`).
    func reduce(into state: inout Void, actions: ArraySlice<LuaValue>, sinceNotification: Int) -> RunOutcome<ScriptEffect> {
        engine.reduce(run: actions, sinceNotification: sinceNotification)
    }

    func subscriptions(for state: Void) throws -> [String: ScriptEffect] {
        try engine.currentSubscriptions()
    }

    /// Whether the running app declares subscriptions (it may change with a reload).
    var declaresSubscriptions: Bool { engine.declaresSubscriptions }
}

/// A child store's Lua `reduce`, applied to its local state (in the VM) after the root's reducer.
struct ChildScriptReducer: Reducer {
    let engine: ScriptEngine
    let id: Int64

    func reduce(into state: inout Void, action: LuaValue) throws -> [ScriptEffect] {
        try engine.reduceChild(id, action)
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
