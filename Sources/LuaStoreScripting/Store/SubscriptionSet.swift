import LuaKit

/// The subscriptions the state declares, a part of the engine (`ScriptEngine.subscriptions`): the last set the
/// app's `subscriptions` returned, whether it must run again before that set is used (an action changed what it
/// read, a reload, a jump), and who hears what each new set launches and cancels.
struct SubscriptionSet {
    /// Hears which subscriptions each new set launches and cancels (`ScriptedStoreOptions.subscriptionsChanged`).
    var changed: (@Sendable (SubscriptionChange) -> Void)?
    /// The last set, by key.
    private(set) var current: [String: ScriptEffect] = [:]
    /// Whether `subscriptions` must run again before `current` is used.
    private(set) var dirty = true

    /// What `subscriptions` read changed.
    mutating func markDirty() { dirty = true }

    /// The app declares none (any that ran are cancelled by the store).
    mutating func clear() { current = [:] }

    /// Takes `effects` as the new set, telling `changed` what it launches and cancels (taken after entry `after`).
    mutating func replace(with effects: [String: ScriptEffect], after: UInt64) {
        if let changed {
            var change = SubscriptionChange(after: after, launched: [:], cancelled: [])
            for (key, effect) in effects where current[key] != effect { change.launched[key] = effect }
            for (key, effect) in current where effects[key] != effect { change.cancelled.append(key) }
            change.cancelled.sort()
            if !change.launched.isEmpty || !change.cancelled.isEmpty { changed(change) }
        }
        current = effects
        dirty = false
    }
}
