import Glibc

extension String {
    /// Whether two strings are the same bytes, as Lua compares strings (`==` on `String` compares them as Unicode:
    /// "\u{E9}" and "e\u{301}" are equal there, two different strings in Lua). The bytes are read in place
    /// (`withContiguousStorageIfAvailable`, which copies no string): copying each into a `var` for `withUTF8` cost
    /// 40–100 ns a comparison, and a literal's few keys are compared pairwise on every dispatch. Short strings
    /// (keys, tags) are compared byte by byte, longer ones with `memcmp`.
    ///
    /// Two strings whose own 16 bytes are the same are the same bytes (a small string holds its bytes there, a
    /// large one its length and its storage's address), which answers the usual comparison — a key against the
    /// same key — without reading a byte.
    package static func sameBytes(_ first: String, _ second: String) -> Bool {
        if unsafeBitCast(first, to: (UInt64, UInt64).self) == unsafeBitCast(second, to: (UInt64, UInt64).self) { return true }
        let count = first.utf8.count
        guard count == second.utf8.count else { return false }
        let same = first.utf8.withContiguousStorageIfAvailable { a in
            second.utf8.withContiguousStorageIfAvailable { b in
                count < 16 ? a.elementsEqual(b) : memcmp(a.baseAddress!, b.baseAddress!, count) == 0
            }
        }
        if let same, let same { return same }
        return first.utf8.elementsEqual(second.utf8) // (a string whose bytes are not contiguous in memory)
    }

    /// Feeds the string's bytes (and their count) to `hasher`: a hash that agrees with `sameBytes`.
    package func hashBytes(into hasher: inout Hasher) {
        hasher.combine(utf8.count)
        let hashed: Void? = utf8.withContiguousStorageIfAvailable { bytes in hasher.combine(bytes: UnsafeRawBufferPointer(bytes)) }
        if hashed == nil { Array(utf8).withUnsafeBytes { hasher.combine(bytes: $0) } } // (bytes not contiguous in memory)
    }

    /// `bytes` as a string when they are valid UTF-8, `nil` when they are not — what `String(validating:as:)`
    /// does, without its generic path, which looks up type metadata at run time for every string (converting
    /// a table of a few strings from Lua spent most of its time there). ASCII, the usual text, is checked eight
    /// bytes at a time; other text is decoded and must come out as the very bytes it came from (decoding
    /// replaces any ill-formed sequence, so only valid UTF-8 does).
    package init?(utf8 bytes: UnsafeRawBufferPointer) {
        if let small = Self.smallASCII(bytes, discriminator: Self.smallASCIIDiscriminator) {
            self = small
            return
        }
        let text = String(decoding: bytes, as: UTF8.self)
        if !Self.isASCII(bytes) {
            guard text.utf8.count == bytes.count, text.utf8.elementsEqual(bytes) else { return nil }
        }
        self = text
    }

    /// At most 15 bytes of ASCII as the platform lays a small string out — the bytes in the string's own 16 bytes,
    /// the count in the top byte under `discriminator`'s flags — made without `String(decoding:)`'s pass (a key or a
    /// tag converted from Lua, for every value read); nil for any other bytes, and with a `discriminator` of 0.
    private static func smallASCII(_ bytes: UnsafeRawBufferPointer, discriminator: UInt64) -> String? {
        guard discriminator != 0, bytes.count <= 15 else { return nil }
        var words: (UInt64, UInt64) = (0, 0)
        if let base = bytes.baseAddress { withUnsafeMutableBytes(of: &words) { $0.baseAddress!.copyMemory(from: base, byteCount: bytes.count) } }
        guard (words.0 | words.1) & 0x8080_8080_8080_8080 == 0 else { return nil }
        words.1 |= (discriminator | UInt64(bytes.count)) << 56
        return unsafeBitCast(words, to: String.self)
    }

    /// The flags of a small ASCII string's top byte where `smallASCII` makes, for every count, the very string
    /// `String(decoding:)` makes (checked once, on strings of every small length); 0 anywhere else, which leaves
    /// every string to `String(decoding:)`.
    package static let smallASCIIDiscriminator: UInt64 = {
        guard MemoryLayout<String>.size == 16, 1.littleEndian == 1 else { return 0 }
        let flags = unsafeBitCast("", to: (UInt64, UInt64).self).1 >> 56
        guard flags & 0x0F == 0, flags != 0 else { return 0 }
        for count in 0...15 {
            let bytes = (0..<count).map { UInt8(0x41 + $0) }
            let made = bytes.withUnsafeBytes { smallASCII($0, discriminator: flags) }
            let decoded = String(decoding: bytes, as: UTF8.self)
            guard let made, unsafeBitCast(made, to: (UInt64, UInt64).self) == unsafeBitCast(decoded, to: (UInt64, UInt64).self),
                  made == decoded, made.utf8.count == count else { return 0 }
        }
        return flags
    }()

    /// `String(utf8:)` for the bytes of an array.
    package init?(utf8 bytes: [UInt8]) {
        guard let text = bytes.withUnsafeBytes({ String(utf8: $0) }) else { return nil }
        self = text
    }

    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var offset = 0
        while offset + 8 <= bytes.count {
            if base.loadUnaligned(fromByteOffset: offset, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            offset += 8
        }
        while offset < bytes.count {
            if base.load(fromByteOffset: offset, as: UInt8.self) & 0x80 != 0 { return false }
            offset += 1
        }
        return true
    }
}
