import LuaKit
import Testing

/// `String(utf8:)` accepts exactly what `String(validating:as:)` accepts, and gives the same string.
@Suite struct UTF8TextTests {
    static let samples: [[UInt8]] = [
        [], Array("plain ascii text, longer than eight bytes".utf8), Array("é".utf8), Array("1234567é".utf8),
        Array("12345678é9".utf8), Array("🙂 emoji ✓".utf8), [0x61, 0x00, 0x62], // a NUL inside
        [0xFF], [0xC3], [0xC3, 0x28], [0xE2, 0x82], [0xED, 0xA0, 0x80], // invalid: lone byte, truncated, surrogate
        [0xC0, 0xAF], [0xF4, 0x90, 0x80, 0x80], Array("abcdefg".utf8) + [0x80], // overlong, beyond U+10FFFF, stray
        [0xEF, 0xBF, 0xBD], Array("valid \u{FFFD} replacement".utf8),
    ]

    @Test func acceptsWhatValidatingAccepts() {
        var generator = SystemRandomNumberGenerator()
        var cases = Self.samples
        for _ in 0..<2_000 { // random bytes, mostly ASCII with some high bytes, of lengths around the 8-byte steps
            let count = Int.random(in: 0...20, using: &generator)
            cases.append((0..<count).map { _ in Bool.random(using: &generator) ? UInt8.random(in: 0x20...0x7E, using: &generator) : UInt8.random(in: 0...255, using: &generator) })
        }
        for bytes in cases {
            let expected = String(validating: bytes, as: UTF8.self)
            #expect(String(utf8: bytes) == expected, "\(bytes)")
            #expect(bytes.withUnsafeBytes { String(utf8: $0) } == expected, "\(bytes)")
        }
    }

    /// Up to 15 bytes of ASCII (a key, a tag) are made as a small string straight from their bytes: on this
    /// platform that path is taken, and what it makes is, bit for bit, the string `String(decoding:)` makes — one
    /// that compares, hashes and grows as any other.
    @Test func smallASCIIStringsAreMadeFromTheirBytes() {
        #expect(String.smallASCIIDiscriminator != 0, "the layout check passed: the fast path is in use")
        var generator = SystemRandomNumberGenerator()
        for count in 0...16 {
            for _ in 0..<200 {
                let bytes = (0..<count).map { _ in UInt8.random(in: 0...0x7F, using: &generator) } // NUL and DEL too
                guard let made = String(utf8: bytes) else {
                    Issue.record("ASCII refused: \(bytes)")
                    continue
                }
                let decoded = String(decoding: bytes, as: UTF8.self)
                #expect(made == decoded && made.hashValue == decoded.hashValue && Array(made.utf8) == bytes)
                if count <= 15 { // (a longer one is stored apart: its address differs)
                    #expect(withUnsafeBytes(of: made) { Array($0) } == withUnsafeBytes(of: decoded) { Array($0) }, "\(bytes)")
                }
                #expect(made + "é" == decoded + "é" && made.count == decoded.count)
            }
        }
        // A byte past ASCII in a short string goes the validating way, and is refused when it is not UTF-8.
        #expect(String(utf8: Array("caf".utf8) + [0xC3, 0xA9]) == "café")
        #expect(String(utf8: Array("abc".utf8) + [0xFF]) == nil)
    }
}
