import Logging

/// A failure inside a store: where it happened, the error, and the action and state it happened on.
public struct StoreFailure<State: Sendable, Action: Sendable>: Error, Sendable, CustomStringConvertible {
    /// Where a failure happened.
    public enum Stage: Sendable, Equatable, CustomStringConvertible {
        /// The reducer threw; the state was left as it was and nothing was notified.
        case reducer
        /// `subscriptions(for:)` threw; running subscriptions were left alone.
        case subscriptions
        /// An observer threw; it stays subscribed.
        case observer
        /// A presenter's props function threw.
        case presenter
        /// An effect of this kind failed (or no handler is registered for it).
        case effect(EffectKind)

        public var description: String {
            switch self {
            case .reducer: "reducer"
            case .subscriptions: "subscriptions"
            case .observer: "observer"
            case .presenter: "presenter"
            case .effect(let kind): "effect '\(kind)'"
            }
        }
    }

    /// Where it happened.
    public var stage: Stage
    /// What went wrong.
    public var error: any Error
    /// The action being handled, or that launched the failing effect.
    public var action: Action?
    /// The state at the time (for reducer failures: the state the action was applied to, unchanged).
    public var state: State?
    /// For a reducer failure of an action dispatched from outside the store (`dispatch`, not an effect's nor one
    /// routed from a child store): which of those actions it was, counting from 1 in the order they were
    /// dispatched — it tells equal actions apart (a runner reading actions from input can name the line with it).
    public var dispatchIndex: UInt64?

    /// A failure at `stage` with `error`, on `action` and `state` when they are known.
    public init(stage: Stage, error: any Error, action: Action?, state: State?, dispatchIndex: UInt64? = nil) {
        self.stage = stage
        self.error = error
        self.action = action
        self.state = state
        self.dispatchIndex = dispatchIndex
    }

    public var description: String { "\(stage) failed: \(error)" }
}

/// Receives every reducer, observer and effect failure of a store (Rodux's `errorReporter`). The store keeps
/// running after each.
public struct ErrorReporter<State: Sendable, Action: Sendable>: Sendable {
    /// Handles one failure.
    public let report: @Sendable (StoreFailure<State, Action>) -> Void

    /// A reporter calling `report`.
    public init(_ report: @escaping @Sendable (StoreFailure<State, Action>) -> Void) {
        self.report = report
    }

    /// Logs each failure as an error through swift-log (the default).
    public static func log(_ logger: Logger = Logger(label: "LuaStore")) -> ErrorReporter {
        ErrorReporter { failure in
            logger.error("\(failure.stage) failed: \(String(describing: failure.error))",
                         metadata: failure.action.map { ["action": "\($0)"] })
        }
    }

    /// Ignores failures.
    public static var ignore: ErrorReporter { ErrorReporter { _ in } }
}
