import Dispatch
import LuaKit
import LuaStoreCore

/// A child of a scripted store: local state of its own in the app's VM, reduced by one of the app's
/// modules, alive as long as this object.
///
/// Actions dispatched to it reach the app's `reduce` first and then the child module's `reduce(local,
/// action)`; actions dispatched to the app never reach the child's reducer, and siblings never see each
/// other's actions. Its props are the module's `props(local, root)`: they see both states.
///
/// ```swift
/// let editor = try await store.child(module: "editor")
/// editor.observeProps { props in print(props); return .active }
/// editor.dispatch(["type": "draftEdited", "text": "Buy milk"])
/// ```
public final class ScriptedChildStore: Sendable {
    private let id: Int64
    private let engine: ScriptEngine
    private let core: ChildStore<ScriptState, ScriptState, LuaValue>

    init(id: Int64, engine: ScriptEngine, core: ChildStore<ScriptState, ScriptState, LuaValue>) {
        self.id = id
        self.engine = engine
        self.core = core
    }

    deinit {
        engine.thread.async { [engine, id] in engine.removeChild(id) }
    }

    /// Dispatches `action` to the app's reducer and then to the child's.
    public func dispatch(_ action: LuaValue) { core.dispatch(action) }

    /// Observes the child's props (`props(local, root)`): now, then whenever they change.
    public func observeProps(on queue: DispatchQueue? = nil, _ body: @escaping @Sendable (LuaValue) -> ObserverStatus) {
        engine.thread.async { [engine, id] in engine.addReader(.childProps(id), queue: queue, deliver: body) }
    }

    /// The child's local state now, converted.
    public func state() async throws(LuaError) -> LuaValue {
        let result: Result<LuaValue, LuaError> = await withCheckedContinuation { continuation in
            engine.thread.async { [engine, id] in
                continuation.resume(returning: Result { () throws(LuaError) -> LuaValue in try engine.childState(id) })
            }
        }
        return try result.get()
    }
}
