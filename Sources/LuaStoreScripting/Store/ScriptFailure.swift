import LuaKit

/// A failure of a scripted app: thrown when the app cannot start (`ScriptedStore(app:)`, `child(module:)`) or a
/// reload is refused, and reported (`ScriptedStoreOptions.failures`) while it runs. The app keeps running: a
/// failed action changes nothing, a failed props call keeps the last props, a failed reload keeps the old
/// scripts. (The store's own failures are `StoreFailure`s, the VM's `LuaError`s.)
public struct ScriptFailure: Error, Sendable, CustomStringConvertible {
    /// Where a failure happened.
    public enum Stage: String, Sendable, Equatable {
        /// Loading the app's modules.
        case load
        /// Running `init`.
        case initialize = "init"
        /// Running `reduce` (the action was not applied).
        case reduce
        /// Refused before any reducer ran: the action is not one the app's contract declares (docs/contracts.md).
        case undeclared
        /// Running `props`.
        case props
        /// Running a selector.
        case selector
        /// Running `subscriptions`.
        case subscriptions
        /// Performing an effect.
        case effect
        /// Reloading (the old version keeps running).
        case reload
        /// Running `migrate` during a reload (the state was restored).
        case migrate
        /// An observer's body (Swift) threw; it stays subscribed.
        case observer
    }

    /// Where it happened.
    public var stage: Stage
    /// The error, with file and line when known.
    public var error: LuaError
    /// The action being handled, if any.
    public var action: LuaValue?
    /// For a `reduce` failure of an action given to `dispatch` (not an effect's, not a child store's): which of
    /// those actions it was, counting from 1 in the order they were dispatched (equal actions told apart).
    public var dispatchIndex: UInt64?

    /// A failure.
    public init(stage: Stage, error: LuaError, action: LuaValue? = nil, dispatchIndex: UInt64? = nil) {
        self.stage = stage
        self.error = error
        self.action = action
        self.dispatchIndex = dispatchIndex
    }

    public var description: String { "\(stage.rawValue): \(error)" }
}

/// What a reload did.
public enum ReloadOutcome: Sendable, Equatable {
    /// The files are byte for byte what is running: nothing to do.
    case unchanged
    /// The new version runs; the state was migrated if its schema version grew.
    case reloaded(fromSchema: Int64, toSchema: Int64)
}

/// What became of an action `ScriptedStore.send` dispatched.
public enum SendResult: Sendable {
    /// Reduced: its journal entry — `changes`, `commands`, `sequence`, `duration`.
    case applied(JournalEntry)
    /// The reducer failed, and the state is as it was.
    case failed(ScriptFailure)
    /// The store stood at a past entry of its history: the action is held, and reduced by `resume()` or
    /// `rewind(to:)`.
    case held
    /// The store stopped before it was reduced, or can no longer keep it (its database cannot be written; for a
    /// store of `luastore serve --cluster`, another node took its key over): it is not in the state; send it again.
    case dropped

    /// The journal entry, when the action was applied.
    public var entry: JournalEntry? {
        if case .applied(let entry) = self { return entry }
        return nil
    }

    /// The failure, when the reducer failed.
    public var failure: ScriptFailure? {
        if case .failed(let failure) = self { return failure }
        return nil
    }
}
