/// Decides whether two values are equal for an observer's purposes (Puredux's `Equating`): deduplication
/// skips a notification when the new value equals the last one delivered.
///
/// ```swift
/// Observer(removeDuplicates: .equal { $0.title } && .equal { $0.subtitle }) { state in … }
/// ```
public struct Equating<T>: Sendable {
    /// The comparison.
    public let predicate: @Sendable (T, T) -> Bool

    /// An equating from a comparison.
    public init(_ predicate: @escaping @Sendable (T, T) -> Bool) {
        self.predicate = predicate
    }

    /// Whether `lhs` and `rhs` are equal.
    public func isEqual(_ lhs: T, _ rhs: T) -> Bool { predicate(lhs, rhs) }

    /// Equal when the selected parts are equal.
    public static func equal<Part: Equatable & Sendable>(_ part: @escaping @Sendable (T) -> Part) -> Equating {
        Equating { part($0) == part($1) }
    }

    /// Equal when the values at `keyPath` are equal.
    public static func keyPath<Part: Equatable & Sendable>(_ keyPath: KeyPath<T, Part> & Sendable) -> Equating {
        Equating { $0[keyPath: keyPath] == $1[keyPath: keyPath] }
    }

    /// Always equal: the observer is notified once, then never again.
    public static var alwaysEqual: Equating { Equating { _, _ in true } }

    /// Never equal: the observer is notified on every change.
    public static var neverEqual: Equating { Equating { _, _ in false } }

    /// Equal when both equatings say so.
    public static func && (lhs: Equating, rhs: Equating) -> Equating {
        Equating { lhs.isEqual($0, $1) && rhs.isEqual($0, $1) }
    }

    /// Equal when either equating says so.
    public static func || (lhs: Equating, rhs: Equating) -> Equating {
        Equating { lhs.isEqual($0, $1) || rhs.isEqual($0, $1) }
    }
}

extension Equating where T: Equatable & Sendable {
    /// `==`.
    public static var asEquatable: Equating { Equating { $0 == $1 } }
}
