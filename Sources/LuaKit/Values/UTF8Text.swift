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
        let text = String(decoding: bytes, as: UTF8.self)
        if !Self.isASCII(bytes) {
            guard text.utf8.count == bytes.count, text.utf8.elementsEqual(bytes) else { return nil }
        }
        self = text
    }

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
