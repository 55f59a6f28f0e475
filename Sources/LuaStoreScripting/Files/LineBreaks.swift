import Foundation

extension [UInt8] {
    /// The index of the first line break (`\n`) from `index` on, or nil: found with `memchr`, as lines are looked
    /// for in blocks of recorded and input lines (a 64 KiB block holds hundreds of them).
    public func firstLineBreak(from index: Int) -> Int? {
        withUnsafeBytes { bytes in
            guard index < bytes.count, let found = memchr(bytes.baseAddress! + index, 10, bytes.count - index) else { return nil }
            return bytes.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }
}
