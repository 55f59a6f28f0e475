/// A semantic version (`MAJOR.MINOR.PATCH`, with an optional `-prerelease`; `+build` is accepted and ignored), as
/// semver.org defines it and orders it: a prerelease comes before its release, and its dot-separated parts compare
/// numerically when they are numbers, as text otherwise.
public struct SemanticVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The `MAJOR` number (a change that breaks compatibility raises it).
    public var major: Int
    /// The `MINOR` number (a change that adds without breaking raises it).
    public var minor: Int
    /// The `PATCH` number (a fix raises it).
    public var patch: Int
    /// The prerelease's parts (`["beta", "2"]` for `-beta.2`); empty for a release.
    public var prerelease: [String]

    /// The version `major.minor.patch`; a prerelease of it when `prerelease` has parts.
    public init(_ major: Int, _ minor: Int, _ patch: Int, prerelease: [String] = []) {
        self.major = major
        self.minor = minor
        self.patch = patch
        self.prerelease = prerelease
    }

    /// Parses `1.2.3`, `1.2.3-beta.2`, `1.2.3+build.5`; nil for anything else (`1.2`, `v1.2.3`, `01.2.3`).
    public init?(_ text: String) {
        var rest = Substring(text)
        if let plus = rest.firstIndex(of: "+") {
            let build = rest[rest.index(after: plus)...]
            guard Self.identifiers(build) != nil else { return nil }
            rest = rest[..<plus]
        }
        var prerelease: [String] = []
        if let dash = rest.firstIndex(of: "-") {
            guard let parts = Self.identifiers(rest[rest.index(after: dash)...]),
                  parts.allSatisfy({ !Self.isNumber($0) || $0 == "0" || !$0.hasPrefix("0") }) else { return nil }
            prerelease = parts
            rest = rest[..<dash]
        }
        let numbers = rest.split(separator: ".", omittingEmptySubsequences: false)
        guard numbers.count == 3, let major = Self.number(numbers[0]), let minor = Self.number(numbers[1]),
              let patch = Self.number(numbers[2]) else { return nil }
        self.init(major, minor, patch, prerelease: prerelease)
    }

    public var description: String {
        "\(major).\(minor).\(patch)" + (prerelease.isEmpty ? "" : "-" + prerelease.joined(separator: "."))
    }

    public static func < (lhs: SemanticVersion, rhs: SemanticVersion) -> Bool {
        if (lhs.major, lhs.minor, lhs.patch) != (rhs.major, rhs.minor, rhs.patch) {
            return (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
        }
        if lhs.prerelease.isEmpty || rhs.prerelease.isEmpty { return !lhs.prerelease.isEmpty && rhs.prerelease.isEmpty }
        for (left, right) in zip(lhs.prerelease, rhs.prerelease) where left != right {
            switch (Int(left), Int(right)) {
            case let (l?, r?): return l < r
            case (_?, nil): return true // (numeric parts come first)
            case (nil, _?): return false
            default: return left < right
            }
        }
        return lhs.prerelease.count < rhs.prerelease.count
    }

    /// A version number: digits, no leading zero (but `0` itself).
    static func number(_ text: Substring) -> Int? {
        guard isNumber(text), text == "0" || !text.hasPrefix("0"), text.count <= 9 else { return nil }
        return Int(text)
    }

    static func isNumber(_ text: some StringProtocol) -> Bool {
        !text.isEmpty && text.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// Dot-separated identifiers of `[0-9A-Za-z-]`, none empty.
    private static func identifiers(_ text: Substring) -> [String]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") } })
        else { return nil }
        return parts
    }
}

/// A range of versions as npm writes them (what a plugin's manifest says it needs of the host): comparator sets
/// joined by `||`, each a list of comparators all of which hold — `>=1.2.0 <2`, `=1.0.0`, `1.2.3`; `^1.2` (the
/// same major: `>=1.2.0 <2.0.0`; for `0.x` the same minor), `~1.2.3` (the same minor), `1.x`, `1.2.*`, `*`, and
/// hyphen ranges `1.2 - 2.3`. A partial version on its own is the versions it names (`1.2` is `>=1.2.0 <1.3.0`).
/// A prerelease matches only a comparator of the same `MAJOR.MINOR.PATCH` that names a prerelease, as in npm.
public struct VersionRange: Sendable, Hashable, CustomStringConvertible {
    /// `version <op> bound`.
    struct Comparator: Sendable, Hashable {
        enum Operator: String, Sendable { case less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">=", equal = "=" }
        var op: Operator
        var bound: SemanticVersion

        func holds(for version: SemanticVersion) -> Bool {
            switch op {
            case .less: version < bound
            case .lessOrEqual: version <= bound
            case .greater: version > bound
            case .greaterOrEqual: version >= bound
            case .equal: version == bound
            }
        }
    }

    /// The text it was parsed from.
    public let description: String
    /// Any of these sets, each of whose comparators all hold (an empty set: any version).
    let sets: [[Comparator]]

    /// Parses an npm-style range; nil when it is not one.
    public init?(_ text: String) {
        var sets: [[Comparator]] = []
        for alternative in text.components(separatedBy: "||") {
            guard let set = Self.comparators(alternative) else { return nil }
            sets.append(set)
        }
        guard !sets.isEmpty else { return nil }
        self.description = text.trimmingCharacters(in: .whitespaces)
        self.sets = sets
    }

    /// Whether `version` is in the range.
    public func contains(_ version: SemanticVersion) -> Bool {
        sets.contains { set in
            guard set.allSatisfy({ $0.holds(for: version) }) else { return false }
            guard !version.prerelease.isEmpty else { return true }
            return set.contains { !$0.bound.prerelease.isEmpty && ($0.bound.major, $0.bound.minor, $0.bound.patch) == (version.major, version.minor, version.patch) }
        }
    }

    // MARK: Parsing

    /// A partial version: `1`, `1.2`, `1.2.3` (with a prerelease only when whole), `x`/`*` for any part missing.
    private struct Partial {
        var numbers: [Int] // 0 to 3 of them
        var prerelease: [String] = []

        init?(_ text: Substring) {
            var text = text
            if text.hasPrefix("v") { text = text.dropFirst() }
            if text.isEmpty { return nil } // (an operator with nothing after it is a mistake)
            if text == "*" || text == "x" || text == "X" {
                numbers = []
                return
            }
            if let whole = SemanticVersion(String(text)) {
                numbers = [whole.major, whole.minor, whole.patch]
                prerelease = whole.prerelease
                return
            }
            var found: [Int] = []
            var wild = false
            for part in text.split(separator: ".", omittingEmptySubsequences: false) {
                if part == "x" || part == "X" || part == "*" {
                    wild = true
                } else if let number = SemanticVersion.number(part), !wild {
                    found.append(number)
                } else {
                    return nil
                }
            }
            guard found.count <= 3, text.split(separator: ".", omittingEmptySubsequences: false).count <= 3 else { return nil }
            numbers = found
        }

        /// The lowest version it names.
        var low: SemanticVersion {
            SemanticVersion(numbers.first ?? 0, numbers.count > 1 ? numbers[1] : 0, numbers.count > 2 ? numbers[2] : 0,
                            prerelease: prerelease)
        }

        /// The first version past the ones it names (nil: no bound).
        var pastLast: SemanticVersion? {
            switch numbers.count {
            case 0: nil
            case 1: SemanticVersion(numbers[0] + 1, 0, 0, prerelease: ["0"])
            case 2: SemanticVersion(numbers[0], numbers[1] + 1, 0, prerelease: ["0"])
            default: nil
            }
        }
    }

    private static func comparators(_ text: String) -> [Comparator]? {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
        if words.isEmpty { return [] }
        if words.count == 3, words[1] == "-" { // a hyphen range
            guard let low = Partial(words[0]), let high = Partial(words[2]) else { return nil }
            var set = [Comparator(op: .greaterOrEqual, bound: low.low)]
            if let past = high.pastLast {
                set.append(Comparator(op: .less, bound: past))
            } else if !high.numbers.isEmpty {
                set.append(Comparator(op: .lessOrEqual, bound: high.low))
            }
            return set
        }
        var set: [Comparator] = []
        for word in words {
            guard let parsed = comparator(word) else { return nil }
            set += parsed
        }
        return set
    }

    private static func comparator(_ word: Substring) -> [Comparator]? {
        for op in ["<=", ">=", "<", ">", "="] where word.hasPrefix(op) {
            guard let partial = Partial(word.dropFirst(op.count)) else { return nil }
            let low = partial.low
            switch (op, partial.numbers.count) {
            case (_, 0): return op == "<" ? nil : [] // (`>=*`: any; `<*`: none, refused as a mistake)
            case ("=", 3): return [Comparator(op: .equal, bound: low)]
            case ("=", _): return exactly(partial)
            case (">=", _): return [Comparator(op: .greaterOrEqual, bound: low)]
            case ("<", _): return [Comparator(op: .less, bound: low)]
            case (">", 3): return [Comparator(op: .greater, bound: low)]
            case (">", _): return partial.pastLast.map { [Comparator(op: .greaterOrEqual, bound: $0)] }
            case ("<=", 3): return [Comparator(op: .lessOrEqual, bound: low)]
            default: return partial.pastLast.map { [Comparator(op: .less, bound: $0)] } // `<=1.2`: below 1.3.0
            }
        }
        if word.hasPrefix("^") {
            guard let partial = Partial(word.dropFirst()) else { return nil }
            let low = partial.low
            let n = partial.numbers
            let past: SemanticVersion? = switch n.count {
            case 0: nil
            case 1: SemanticVersion(n[0] + 1, 0, 0, prerelease: ["0"])
            case 2: n[0] > 0 ? SemanticVersion(n[0] + 1, 0, 0, prerelease: ["0"]) : SemanticVersion(0, n[1] + 1, 0, prerelease: ["0"])
            default:
                n[0] > 0 ? SemanticVersion(n[0] + 1, 0, 0, prerelease: ["0"])
                    : n[1] > 0 ? SemanticVersion(0, n[1] + 1, 0, prerelease: ["0"]) : SemanticVersion(0, 0, n[2] + 1, prerelease: ["0"])
            }
            return [Comparator(op: .greaterOrEqual, bound: low)] + (past.map { [Comparator(op: .less, bound: $0)] } ?? [])
        }
        if word.hasPrefix("~") {
            guard let partial = Partial(word.dropFirst()) else { return nil }
            let n = partial.numbers
            let past: SemanticVersion? = switch n.count {
            case 0: nil
            case 1: SemanticVersion(n[0] + 1, 0, 0, prerelease: ["0"])
            default: SemanticVersion(n[0], n[1] + 1, 0, prerelease: ["0"])
            }
            return [Comparator(op: .greaterOrEqual, bound: partial.low)] + (past.map { [Comparator(op: .less, bound: $0)] } ?? [])
        }
        guard let partial = Partial(word) else { return nil }
        return exactly(partial)
    }

    /// The versions a partial version names (`1.2`: `>=1.2.0 <1.3.0`; `1.2.3`: exactly it).
    private static func exactly(_ partial: Partial) -> [Comparator] {
        if partial.numbers.count == 3 { return [Comparator(op: .equal, bound: partial.low)] }
        if partial.numbers.isEmpty { return [] }
        return [Comparator(op: .greaterOrEqual, bound: partial.low)] + (partial.pastLast.map { [Comparator(op: .less, bound: $0)] } ?? [])
    }
}
