/// Performs effects: a handler per effect kind, each given its dependencies when it is made (dependency
/// injection by construction), and at run time an `EffectContext` to report back with actions.
///
/// ```swift
/// let runner = URLEffectRunner(policy: .init(allowedHosts: ["api.example.com"]))
/// let effects = EffectInterpreter<AppEffect, AppState, AppAction>()
///     .handling("url") { effect, context in
///         guard case .fetch(let request) = effect else { return }
///         switch await runner.perform(request) {
///         case .success(let response): context.dispatch(.loaded(response.body))
///         case .failure(let failure): context.dispatch(.failed(failure.message))
///         }
///     }
/// ```
public struct EffectInterpreter<Effect: StoreEffect, State: Sendable, Action: Sendable>: Sendable {
    /// Performs one effect. For a subscription it runs until cancelled (or done); for a command until done.
    public typealias Handler = @Sendable (Effect, EffectContext<State, Action>) async throws -> Void

    private var handlers: [EffectKind: Handler] = [:]
    private var inTurnKinds: Set<EffectKind> = []

    /// An interpreter with no handlers.
    public init() {}

    /// This interpreter, with `handler` performing effects of `kind`.
    public func handling(_ kind: EffectKind, _ handler: @escaping Handler) -> EffectInterpreter {
        var copy = self
        copy.handlers[kind] = handler
        return copy
    }

    /// This interpreter, with `check` asked before every effect of the kinds it handles whether the effect may
    /// run: a gate for what effects may do (a plugin's declared capabilities), set apart from how they are done.
    /// It returns whether the handler runs (it may answer with actions through the context instead); an error
    /// it throws fails the effect, as a handler's would.
    public func checking(_ check: @escaping @Sendable (Effect, EffectContext<State, Action>) throws -> Bool) -> EffectInterpreter {
        var copy = self
        for (kind, handler) in handlers {
            copy.handlers[kind] = { effect, context in
                guard try check(effect, context) else { return }
                try await handler(effect, context)
            }
        }
        return copy
    }

    /// This interpreter, with the commands of `kinds` run one at a time, each once every such command its store
    /// launched before it is done: effects that read and write the same things (a store's saves and loads) take
    /// effect in the order the reducers asked for them, while every other effect runs beside them as before.
    /// (Subscriptions are not held back: they run until cancelled.)
    public func inTurn(_ kinds: Set<EffectKind>) -> EffectInterpreter {
        var copy = self
        copy.inTurnKinds.formUnion(kinds)
        return copy
    }

    /// Whether commands of `kind` run in turn (`inTurn(_:)`).
    func runsInTurn(_ kind: EffectKind) -> Bool { !inTurnKinds.isEmpty && inTurnKinds.contains(kind) }

    /// The kinds this interpreter can perform.
    public var kinds: Set<EffectKind> { Set(handlers.keys) }

    func handler(for kind: EffectKind) -> Handler? { handlers[kind] }
}

/// No handler is registered for an effect's kind.
public struct UnhandledEffect: Error, Sendable, CustomStringConvertible {
    /// The kind nobody handles.
    public let kind: EffectKind
    public var description: String { "no handler is registered for effects of kind '\(kind)'" }
}
