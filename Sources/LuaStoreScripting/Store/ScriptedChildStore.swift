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
    private let core: ChildStore<Void, Void, LuaValue>

    init(id: Int64, engine: ScriptEngine, core: ChildStore<Void, Void, LuaValue>) {
        self.id = id
        self.engine = engine
        self.core = core
    }

    deinit {
        engine.thread.async { [engine, id] in engine.removeChild(id) }
    }

    /// Dispatches `action` to the app's reducer and then to the child's.
    public func dispatch(_ action: LuaValue) { core.dispatch(action) }

    /// The child as LuaStoreCore's `Store`: its state is the child's props (`props(local, root)`), its actions
    /// go to `dispatch`. Observers, scopes and presenters subscribed to it are told as every observer is (see
    /// `ScriptedStore.store`). The handle does not keep the child alive.
    public var store: Store<LuaValue, LuaValue> {
        let thread = engine.thread
        return Store(dispatch: { [weak self] in self?.dispatch($0) }, subscribe: { [weak engine, id] observer in
            thread.async { [weak engine] in engine?.addReader(.childProps(id), observer) }
        })
    }

    /// Observes the child's props (`props(local, root)`): now, then whenever they differ from the last delivered.
    public func observeProps(on queue: DispatchQueue? = nil, _ body: @escaping @Sendable (LuaValue) -> ObserverStatus) {
        store.subscribe(Observer(on: queue, removeDuplicates: .asEquatable, body))
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
