/// The name effect handlers are registered under (`"url"`, `"timer"`, `"log"`).
public struct EffectKind: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The kind's name.
    public let name: String

    /// A kind named `name`.
    public init(_ name: String) { self.name = name }
    public init(stringLiteral name: String) { self.name = name }
    public var description: String { name }
}

/// An effect a reducer asks for, as data: equatable and hashable, so tests can assert the exact effects an
/// action produced without running them. Returned from `reduce` it is a command (one-off work that reports
/// back with actions); returned from `subscriptions(for:)` it is a subscription (runs until the state stops
/// asking for it).
///
/// ```swift
/// enum AppEffect: StoreEffect {
///     case fetch(URLRequestEffect)
///     case tick(every: Duration)
///     var kind: EffectKind { switch self { case .fetch: "url"; case .tick: "timer" } }
/// }
/// ```
public protocol StoreEffect: Hashable, Sendable {
    /// Which handler performs the effect.
    var kind: EffectKind { get }
}

extension Never: StoreEffect {
    public var kind: EffectKind { switch self {} }
}
