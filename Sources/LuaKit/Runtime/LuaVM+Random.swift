import CLua
import CLuaGuard

/// The state of `math.random`'s generator — Lua 5.4's xoshiro256**, four words of 64 bits: every number it draws
/// next follows from it alone. A scripted store records it with its journal (what its reducers left it at), so that
/// a store resumed from its journal, or a replay from a later state, draws what the first run drew next.
public struct LuaRandomState: Hashable, Sendable, CustomStringConvertible {
    /// The four words, as Lua keeps them.
    public var words: (UInt64, UInt64, UInt64, UInt64)

    /// The state whose words are `words`, in Lua's order.
    public init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }

    /// Reads the 64 hexadecimal digits `description` writes (lower or upper case); nil for anything else.
    public init?<Text: StringProtocol>(hexadecimal text: Text) {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { return nil }
        var parsed: [UInt64] = []
        for word in 0..<4 {
            var value: UInt64 = 0
            for digit in digits[(word * 16)..<(word * 16 + 16)] {
                let nibble: UInt8
                switch digit {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = digit - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = digit - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = digit - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt64(nibble)
            }
            parsed.append(value)
        }
        words = (parsed[0], parsed[1], parsed[2], parsed[3])
    }

    /// 64 hexadecimal digits, lower case: the four words in order, each most significant digit first.
    public var description: String {
        [words.0, words.1, words.2, words.3].map { word in
            let digits = String(word, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }.joined()
    }

    /// Whether two states are the same: the same words, in order.
    public static func == (a: LuaRandomState, b: LuaRandomState) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    /// Hashes the four words.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}

extension LuaVM {
    /// The state of `math.random`'s generator now (nil where the VM's `math` has none of Lua 5.4's); setting it sets
    /// what the next numbers drawn are. No Lua runs.
    public var randomState: LuaRandomState? {
        get {
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            let found = withUnsafeMutableBytes(of: &words) { bytes in
                clua_random_state(state, bytes.baseAddress!.assumingMemoryBound(to: UInt64.self))
            }
            return found != 0 ? LuaRandomState(words: words) : nil
        }
        set {
            guard let newValue else { return }
            var words = newValue.words
            _ = withUnsafeBytes(of: &words) { bytes in
                clua_set_random_state(state, bytes.baseAddress!.assumingMemoryBound(to: UInt64.self))
            }
        }
    }
}
