import CLua
import CLuaGuard

/// Lua 5.4 patterns (`string.find`, `match`, `gmatch`, `gsub`), matched with a deadline.
///
/// Lua's own matcher runs in C where no hook can interrupt it, and backtracking patterns such as
/// `string.rep("a*", 20) .. "b"` take exponential time. This matcher follows the same semantics (classes,
/// sets, `%b`, `%f`, back-references, position captures, the 32-capture and 200-level limits) and checks the
/// call's deadline every 1,024 steps, so no pattern runs past the time budget.
struct PatternMatcher {
    /// Why a match could not be completed.
    enum Failure: Error {
        /// The pattern is malformed; the message says how, in Lua's words.
        case malformed(String)
        /// The deadline passed.
        case budgetExhausted
    }

    /// A capture: a substring (`start..<end`), a position capture (`()`), 0-based, or one left open by the
    /// pattern (an error only if the caller uses it, as in Lua).
    enum Capture {
        case range(Int, Int)
        case position(Int)
        case unfinished
    }

    /// A successful match: the bytes `start..<end` of the subject and its captures.
    struct Match {
        var start: Int
        var end: Int
        var captures: [Capture]
    }

    static let maximumCaptures = 32
    static let maximumDepth = 200
    private static let unfinished = -1
    private static let positionCapture = -2

    private let subject: UnsafeBufferPointer<UInt8>
    private let pattern: UnsafeBufferPointer<UInt8>
    private let deadline: Int64
    private var captures: [(start: Int, length: Int)] = []
    private var depth = 0
    private var steps = 0

    init(subject: UnsafeBufferPointer<UInt8>, pattern: UnsafeBufferPointer<UInt8>, deadline: Int64) {
        self.subject = subject
        self.pattern = pattern
        self.deadline = deadline
    }

    /// Whether `pattern` has none of Lua's special characters (`^$*+?.([%-`), so plain search gives the same result.
    static func isPlain(_ pattern: UnsafeBufferPointer<UInt8>) -> Bool {
        !pattern.contains { "^$*+?.([%-".utf8.contains($0) }
    }

    /// Plain substring search from `start` (0-based) in linear time (Knuth–Morris–Pratt), so a long
    /// needle against a long subject cannot take quadratic time either.
    static func plainFind(_ subject: UnsafeBufferPointer<UInt8>, _ needle: UnsafeBufferPointer<UInt8>, from start: Int) -> Range<Int>? {
        if needle.isEmpty { return start <= subject.count ? start..<start : nil }
        guard start < subject.count, needle.count <= subject.count - start else { return nil }
        if needle.count == 1 {
            guard let index = subject[start...].firstIndex(of: needle[0]) else { return nil }
            return index..<(index + 1)
        }
        var fallback = [Int](repeating: 0, count: needle.count)
        var matched = 0
        for index in 1..<needle.count {
            while matched > 0, needle[index] != needle[matched] { matched = fallback[matched - 1] }
            if needle[index] == needle[matched] { matched += 1 }
            fallback[index] = matched
        }
        matched = 0
        for index in start..<subject.count {
            while matched > 0, subject[index] != needle[matched] { matched = fallback[matched - 1] }
            if subject[index] == needle[matched] { matched += 1 }
            if matched == needle.count { return (index + 1 - matched)..<(index + 1) }
        }
        return nil
    }

    /// Finds the first match starting at or after `start`.
    ///
    /// - Parameters:
    ///   - honorsAnchor: a leading `^` anchors the match at `start` (`find`, `match`); otherwise it is literal.
    ///   - anchored: try `start` only (`gsub` with a `^` pattern, stripped by the caller).
    ///   - excludingEnd: skip matches ending here (the previous match's end in `gmatch`/`gsub`); -1 for none.
    mutating func firstMatch(from start: Int, honorsAnchor: Bool, anchored: Bool, excludingEnd: Int) throws(Failure) -> Match? {
        var patternStart = 0
        var anchored = anchored
        if honorsAnchor, pattern.first == UInt8(ascii: "^") {
            patternStart = 1
            anchored = true
        }
        var position = start
        repeat {
            captures.removeAll(keepingCapacity: true)
            depth = 0
            if let end = try match(position, patternStart), end != excludingEnd {
                return Match(start: position, end: end, captures: captures.indices.map(capture))
            }
            position += 1
        } while position <= subject.count && !anchored
        return nil
    }

    private func capture(_ index: Int) -> Capture {
        let (start, length) = captures[index]
        if length == Self.positionCapture { return .position(start) }
        if length == Self.unfinished { return .unfinished }
        return .range(start, start + length)
    }

    private mutating func tick() throws(Failure) {
        steps &+= 1
        if steps & 1023 == 0, deadline != 0, clua_now_nanos() >= deadline { throw .budgetExhausted }
    }

    private func patternByte(_ index: Int) -> UInt8 { index < pattern.count ? pattern[index] : 0 }

    /// Matches the pattern from `p` against the subject from `s`; returns where the match ends.
    private mutating func match(_ s: Int, _ p: Int) throws(Failure) -> Int? {
        depth += 1
        defer { depth -= 1 }
        if depth > Self.maximumDepth { throw .malformed("pattern too complex") }
        var s = s
        var p = p
        while true {
            try tick()
            if p == pattern.count { return s }
            switch pattern[p] {
            case UInt8(ascii: "("):
                if patternByte(p + 1) == UInt8(ascii: ")") {
                    return try startCapture(s, p + 2, length: Self.positionCapture)
                }
                return try startCapture(s, p + 1, length: Self.unfinished)
            case UInt8(ascii: ")"):
                return try endCapture(s, p + 1)
            case UInt8(ascii: "$") where p + 1 == pattern.count:
                return s == subject.count ? s : nil
            case UInt8(ascii: "%") where patternByte(p + 1) == UInt8(ascii: "b"):
                guard let end = try matchBalance(s, p + 2) else { return nil }
                s = end
                p += 4
                continue
            case UInt8(ascii: "%") where patternByte(p + 1) == UInt8(ascii: "f"):
                p += 2
                guard patternByte(p) == UInt8(ascii: "[") else { throw .malformed("missing '[' after '%f' in pattern") }
                let end = try classEnd(p)
                let previous = s == 0 ? 0 : subject[s - 1]
                let current = s < subject.count ? subject[s] : 0
                guard !matchesSet(previous, p, end - 1), matchesSet(current, p, end - 1) else { return nil }
                p = end
                continue
            case UInt8(ascii: "%") where (48...57).contains(patternByte(p + 1)):
                guard let end = try matchBackReference(s, Int(patternByte(p + 1)) - 48) else { return nil }
                s = end
                p += 2
                continue
            default:
                let end = try classEnd(p)
                let matches = s < subject.count && singleMatch(subject[s], p, end)
                switch patternByte(end) {
                case UInt8(ascii: "?"):
                    if matches, let result = try match(s + 1, end + 1) { return result }
                    p = end + 1
                    continue
                case UInt8(ascii: "+"):
                    return matches ? try maxExpand(s + 1, p, end) : nil
                case UInt8(ascii: "*"):
                    return try maxExpand(s, p, end)
                case UInt8(ascii: "-"):
                    return try minExpand(s, p, end)
                default:
                    guard matches else { return nil }
                    s += 1
                    p = end
                    continue
                }
            }
        }
    }

    /// The index just past the single-character class at `p`.
    private func classEnd(_ p: Int) throws(Failure) -> Int {
        var p = p
        let first = pattern[p]
        p += 1
        if first == UInt8(ascii: "%") {
            guard p < pattern.count else { throw .malformed("malformed pattern (ends with '%')") }
            return p + 1
        }
        if first == UInt8(ascii: "[") {
            if patternByte(p) == UInt8(ascii: "^") { p += 1 }
            repeat {
                guard p < pattern.count else { throw .malformed("malformed pattern (missing ']')") }
                let byte = pattern[p]
                p += 1
                if byte == UInt8(ascii: "%"), p < pattern.count { p += 1 }
            } while patternByte(p) != UInt8(ascii: "]") || p >= pattern.count
            return p + 1
        }
        return p
    }

    private func singleMatch(_ byte: UInt8, _ p: Int, _ end: Int) -> Bool {
        switch pattern[p] {
        case UInt8(ascii: "."): true
        case UInt8(ascii: "%"): Self.matchesClass(byte, pattern[p + 1])
        case UInt8(ascii: "["): matchesSet(byte, p, end - 1)
        default: pattern[p] == byte
        }
    }

    /// Whether `byte` is in the set `[...]` spanning `p` (the `[`) to `setEnd` (the `]`).
    private func matchesSet(_ byte: UInt8, _ p: Int, _ setEnd: Int) -> Bool {
        var p = p + 1
        var included = true
        if pattern[p] == UInt8(ascii: "^") {
            included = false
            p += 1
        }
        while p < setEnd {
            if pattern[p] == UInt8(ascii: "%"), p + 1 < setEnd {
                if Self.matchesClass(byte, pattern[p + 1]) { return included }
                p += 2
            } else if p + 2 < setEnd, pattern[p + 1] == UInt8(ascii: "-") {
                if pattern[p] <= byte, byte <= pattern[p + 2] { return included }
                p += 3
            } else {
                if pattern[p] == byte { return included }
                p += 1
            }
        }
        return !included
    }

    /// Lua's `%a`, `%d`, … classes in the C locale; an upper-case class letter is the complement.
    static func matchesClass(_ byte: UInt8, _ classLetter: UInt8) -> Bool {
        let isAlpha = (65...90).contains(byte) || (97...122).contains(byte)
        let isDigit = (48...57).contains(byte)
        let result: Bool
        switch classLetter | 0x20 {
        case UInt8(ascii: "a"): result = isAlpha
        case UInt8(ascii: "c"): result = byte < 32 || byte == 127
        case UInt8(ascii: "d"): result = isDigit
        case UInt8(ascii: "g"): result = (33...126).contains(byte)
        case UInt8(ascii: "l"): result = (97...122).contains(byte)
        case UInt8(ascii: "p"): result = (33...126).contains(byte) && !isAlpha && !isDigit
        case UInt8(ascii: "s"): result = byte == 32 || (9...13).contains(byte)
        case UInt8(ascii: "u"): result = (65...90).contains(byte)
        case UInt8(ascii: "w"): result = isAlpha || isDigit
        case UInt8(ascii: "x"): result = isDigit || (65...70).contains(byte) || (97...102).contains(byte)
        default: return classLetter == byte
        }
        return (65...90).contains(classLetter) ? !result : result
    }

    private mutating func maxExpand(_ s: Int, _ p: Int, _ end: Int) throws(Failure) -> Int? {
        var count = 0
        while s + count < subject.count, singleMatch(subject[s + count], p, end) {
            try tick()
            count += 1
        }
        while count >= 0 {
            if let result = try match(s + count, end + 1) { return result }
            count -= 1
        }
        return nil
    }

    private mutating func minExpand(_ s: Int, _ p: Int, _ end: Int) throws(Failure) -> Int? {
        var s = s
        while true {
            if let result = try match(s, end + 1) { return result }
            guard s < subject.count, singleMatch(subject[s], p, end) else { return nil }
            s += 1
        }
    }

    private mutating func startCapture(_ s: Int, _ p: Int, length: Int) throws(Failure) -> Int? {
        guard captures.count < Self.maximumCaptures else { throw .malformed("too many captures") }
        captures.append((s, length))
        if let result = try match(s, p) { return result }
        captures.removeLast()
        return nil
    }

    private mutating func endCapture(_ s: Int, _ p: Int) throws(Failure) -> Int? {
        guard let open = captures.lastIndex(where: { $0.length == Self.unfinished }) else {
            throw .malformed("invalid pattern capture")
        }
        captures[open].length = s - captures[open].start
        if let result = try match(s, p) { return result }
        captures[open].length = Self.unfinished
        return nil
    }

    private mutating func matchBalance(_ s: Int, _ p: Int) throws(Failure) -> Int? {
        guard p + 1 < pattern.count else { throw .malformed("malformed pattern (missing arguments to '%b')") }
        guard s < subject.count, subject[s] == pattern[p] else { return nil }
        let open = pattern[p]
        let close = pattern[p + 1]
        var nesting = 1
        var index = s + 1
        while index < subject.count {
            try tick()
            let byte = subject[index]
            if byte == close {
                nesting -= 1
                if nesting == 0 { return index + 1 }
            } else if byte == open {
                nesting += 1
            }
            index += 1
        }
        return nil
    }

    private mutating func matchBackReference(_ s: Int, _ number: Int) throws(Failure) -> Int? {
        let index = number - 1
        guard index >= 0, index < captures.count, captures[index].length != Self.unfinished else {
            throw .malformed("invalid capture index %\(number)")
        }
        let (start, length) = captures[index]
        guard length >= 0 else { return nil }
        guard subject.count - s >= length else { return nil }
        for offset in 0..<length where subject[start + offset] != subject[s + offset] { return nil }
        return s + length
    }
}
