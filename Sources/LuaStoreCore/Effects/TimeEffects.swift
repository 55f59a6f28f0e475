extension EffectInterpreter {
    /// This interpreter, performing effects of `kind` as periodic timers: every `interval(effect)`, it
    /// dispatches `action(effect)`, until the subscription is removed. Ticks keep to a fixed schedule (no drift);
    /// a tick that falls behind is skipped rather than bunched.
    ///
    /// ```swift
    /// effects.handlingTimer("timer", interval: { effect in effect.interval }, action: { _ in .ticked })
    /// ```
    public func handlingTimer(
        _ kind: EffectKind,
        interval: @escaping @Sendable (Effect) -> Duration?,
        action: @escaping @Sendable (Effect) -> Action?
    ) -> EffectInterpreter {
        handling(kind) { effect, context in
            guard let period = interval(effect), period > .zero, let tick = action(effect) else {
                throw InvalidTimeEffect(kind: kind)
            }
            let clock = ContinuousClock()
            var next = clock.now.advanced(by: period)
            while !context.isCancelled {
                try await clock.sleep(until: next)
                context.dispatch(tick)
                next = next.advanced(by: period)
                let now = clock.now
                while next < now { next = next.advanced(by: period) }
            }
        }
    }

    /// This interpreter, performing effects of `kind` as delayed actions: after `delay(effect)`, it
    /// dispatches `action(effect)` once.
    public func handlingDelay(
        _ kind: EffectKind,
        delay: @escaping @Sendable (Effect) -> Duration?,
        action: @escaping @Sendable (Effect) -> Action?
    ) -> EffectInterpreter {
        handling(kind) { effect, context in
            guard let wait = delay(effect), wait >= .zero, let later = action(effect) else {
                throw InvalidTimeEffect(kind: kind)
            }
            try await Task.sleep(for: wait)
            context.dispatch(later)
        }
    }
}

/// A timer or delay effect without a usable interval or action.
public struct InvalidTimeEffect: Error, Sendable, CustomStringConvertible {
    /// The effect's kind.
    public let kind: EffectKind
    public var description: String { "a '\(kind)' effect needs a positive interval and an action" }
}
