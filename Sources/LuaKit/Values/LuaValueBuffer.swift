import Foundation
internal import LuaStoreConcurrency

/// Values queued as bytes, oldest first: what a scripted store keeps between `dispatch` and its VM.
///
/// `append` copies a value's contents into one growing buffer (no allocation per value once the buffer has
/// grown), so the thread that dispatched a value frees its storage at once, where it allocated it, instead of
/// the store's thread freeing it much later — under a burst, the values waiting in a queue of Swift values held
/// megabytes the allocator handed out, and took back, page by page. The VM builds tables straight from the bytes
/// (`LuaVM.reference(toList:positions:)`); `subscript` reads a value back as a `LuaValue`.
///
/// A value appended right after the very same value (the same storage: an action dispatched again and again)
/// is kept as a mention of the first, and converted by copying the first's table inside the VM. A value the
/// bytes do not carry exactly as the VM would take it — nested deeper than `maximumDepth` tables, a `nil` or
/// a NaN among a table's keys or values, a string or table too large — is kept as it is and converted as a
/// `LuaValue` would be, with the same errors.
///
/// A value, as an array is: copies share the bytes until one of them changes, so a copy may go to another
/// thread (a store's journal hands the values of a run to its recorder's thread this way); one copy is changed
/// by one thread at a time.
public struct LuaValueBuffer: @unchecked Sendable {
    /// Tables nested deeper than this are kept as `LuaValue`s.
    public static let maximumDepth = 16

    enum Tag: UInt8 {
        case `nil` = 0, `false`, `true`, integer, number, string, table, repeated, kept
    }

    /// (Its fields change only through the one `LuaValueBuffer` that holds it — `uniqueStorage` copies a shared
    /// one first — and that is used by one thread at a time, so their exclusive access is not checked at run time.)
    final class Storage {
        @exclusivity(unchecked) var bytes = Region()
        @exclusivity(unchecked) var starts = Region() // the byte offset of each value, as an `Int`
        @exclusivity(unchecked) var count = 0
        /// The last value appended, and where its bytes start: a value appended again is recognised by its bits.
        /// (Held, so that its storage cannot be freed and handed to another value meanwhile.)
        @exclusivity(unchecked) var last: LuaValue?
        @exclusivity(unchecked) var lastStart = 0
        /// Values kept as they are (`Tag.kept` names one by its index).
        @exclusivity(unchecked) var kept: [LuaValue] = []

        init() {}
        init(copying other: Storage) {
            bytes.append(UnsafeRawBufferPointer(start: other.bytes.base, count: other.bytes.used))
            starts.append(UnsafeRawBufferPointer(start: other.starts.base, count: other.starts.used))
            count = other.count
            last = other.last
            lastStart = other.lastStart
            kept = other.kept
        }

        deinit {
            bytes.release()
            starts.release()
        }
    }

    /// (Made by the first `append`: an empty buffer holds no memory.)
    private(set) var storage: Storage?

    /// An empty buffer.
    public init() {}

    /// How many values it holds.
    public var count: Int { storage?.count ?? 0 }

    /// Whether it holds no value.
    public var isEmpty: Bool { count == 0 }

    /// Removes every value, keeping the bytes' storage for the next ones.
    public mutating func removeAll() {
        guard storage != nil else { return }
        guard isKnownUniquelyReferenced(&storage) else { // (another holds the values: they stay theirs)
            storage = nil
            return
        }
        let storage = storage!
        storage.bytes.used = 0
        storage.starts.used = 0
        storage.count = 0
        storage.last = nil
        if !storage.kept.isEmpty { storage.kept.removeAll() }
    }

    /// Adds `value` after the others.
    public mutating func append(_ value: LuaValue) {
        let storage = uniqueStorage()
        let start = storage.bytes.used
        storage.starts.appendInteger(start)
        storage.count += 1
        if let last = storage.last, Self.isSame(last, value) {
            storage.bytes.appendTag(.repeated)
            storage.bytes.appendInteger(storage.lastStart)
            return
        }
        storage.lastStart = start
        storage.last = value
        if !Self.encode(value, into: &storage.bytes, depth: 0) {
            storage.bytes.used = start
            storage.bytes.appendTag(.kept)
            storage.bytes.appendInteger(storage.kept.count)
            storage.kept.append(value)
        }
    }

    /// The value at `position` (from 0, oldest first).
    public subscript(position: Int) -> LuaValue {
        precondition(position >= 0 && position < count, "LuaValueBuffer: position \(position) out of 0..<\(count)")
        var reader = Reader(storage: storage!, at: original(of: position))
        return reader.value()
    }

    /// Calls `body` with the fields of the value at `position` when it is a table of at most `LuaTable.pairsLimit`
    /// string-keyed fields and nothing else (an action, usually), read from the bytes without making the table
    /// (in the order they were appended); `nil` when it is not.
    public func withStringPairs<Result>(at position: Int, _ body: (UnsafeBufferPointer<(String, LuaValue)>) throws -> Result)
        rethrows -> Result? {
        var reader = Reader(storage: storage!, at: original(of: position))
        guard reader.tag() == .table, reader.int32() == 0 else { return nil }
        let count = reader.int32()
        guard count <= LuaTable.pairsLimit else { return nil }
        let fields = reader.offset
        for _ in 0..<count { // all keys strings?
            guard reader.tag() == .string else { return nil }
            _ = reader.string()
            reader.skipValue()
        }
        reader.offset = fields
        return try withUnsafeTemporaryAllocation(of: (String, LuaValue).self, capacity: count) { pairs in
            for index in 0..<count {
                guard case .string(let name) = reader.value() else { preconditionFailure("checked above") }
                (pairs.baseAddress! + index).initialize(to: (name, reader.value()))
            }
            defer { pairs.baseAddress!.deinitialize(count: count) }
            return try body(UnsafeBufferPointer(start: pairs.baseAddress, count: count))
        }
    }

    /// Whether the value at `position` is a table.
    public func isTable(_ position: Int) -> Bool {
        var reader = Reader(storage: storage!, at: original(of: position))
        switch reader.tag() {
        case .table: return true
        case .kept:
            if case .table = reader.storage.kept[reader.integer()] { return true }
            return false
        default: return false
        }
    }

    /// Where the bytes of the value at `position` start (of the first, for a value appended again).
    func original(of position: Int) -> Int {
        let storage = storage!
        let start = storage.starts.integer(at: position * MemoryLayout<Int>.size)
        var reader = Reader(storage: storage, at: start)
        guard reader.tag() == .repeated else { return start }
        return reader.integer()
    }

    /// Whether the value at `position` was appended right after the very same value.
    func isRepeat(_ position: Int) -> Bool {
        let storage = storage!
        let start = storage.starts.integer(at: position * MemoryLayout<Int>.size)
        return storage.bytes.base!.load(fromByteOffset: start, as: UInt8.self) == Tag.repeated.rawValue
    }

    private mutating func uniqueStorage() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { // (also when there is none yet)
            storage = storage.map { Storage(copying: $0) } ?? Storage()
        }
        return storage!
    }

    /// Whether two values are bit for bit the same: the same number or string, or a table with the same storage
    /// (which implies equal contents: storage shared by two values is never changed in place).
    private static func isSame(_ a: LuaValue, _ b: LuaValue) -> Bool {
        withUnsafeBytes(of: a) { left in
            withUnsafeBytes(of: b) { right in memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0 }
        }
    }

    /// Appends the bytes of `value`; false (what it appended is to be dropped) when they would not carry it
    /// exactly as converting the `LuaValue` makes it: a table nested deeper than `maximumDepth`, a `nil` in a
    /// table, a NaN key, a string or a table too large to count in 32 bits.
    private static func encode(_ value: LuaValue, into bytes: inout Region, depth: Int) -> Bool {
        switch value {
        case .nil: bytes.appendTag(.nil)
        case .boolean(let flag): bytes.appendTag(flag ? .true : .false)
        case .integer(let integer):
            bytes.appendTag(.integer)
            bytes.appendInteger(Int(integer))
        case .number(let number):
            bytes.appendTag(.number)
            bytes.appendInteger(Int(bitPattern: UInt(number.bitPattern)))
        case .string(let text): return encode(text, into: &bytes)
        case .table(let table):
            if table.array.isEmpty, let pairs = table.stringPairs { return encode(pairs, into: &bytes, depth: depth) }
            guard depth < maximumDepth, table.count <= Int(Int32.max) else { return false }
            bytes.appendTag(.table)
            bytes.appendInt32(Int32(table.array.count))
            bytes.appendInt32(Int32(table.fieldCount))
            for element in table.array {
                if case .nil = element { return false }
                guard encode(element, into: &bytes, depth: depth + 1) else { return false }
            }
            var exact = true
            table.forEachField { key, element in
                guard exact else { return }
                switch key {
                case .string(let name): exact = encode(name, into: &bytes)
                case .integer(let integer):
                    bytes.appendTag(.integer)
                    bytes.appendInteger(Int(integer))
                case .number(let number):
                    guard !number.isNaN else { exact = false; return }
                    bytes.appendTag(.number)
                    bytes.appendInteger(Int(bitPattern: UInt(number.bitPattern)))
                case .boolean(let flag): bytes.appendTag(flag ? .true : .false)
                }
                if case .nil = element { exact = false }
                if exact { exact = encode(element, into: &bytes, depth: depth + 1) }
            }
            return exact
        }
        return true
    }

    /// `encode` for a table of a few string-keyed pairs (the usual action, as a literal writes it): scalars are
    /// written in place, without a call per value.
    private static func encode(_ pairs: [(String, LuaValue)], into bytes: inout Region, depth: Int) -> Bool {
        guard depth < maximumDepth else { return false }
        bytes.appendTag(.table)
        bytes.appendInt32(0)
        bytes.appendInt32(Int32(pairs.count))
        for index in pairs.indices {
            guard encode(pairs[index].0, into: &bytes) else { return false }
            switch pairs[index].1 {
            case .boolean(let flag): bytes.appendTag(flag ? .true : .false)
            case .integer(let integer):
                bytes.appendTag(.integer)
                bytes.appendInteger(Int(integer))
            case .string(let text):
                guard encode(text, into: &bytes) else { return false }
            case .nil: return false
            case .number, .table:
                guard encode(pairs[index].1, into: &bytes, depth: depth + 1) else { return false }
            }
        }
        return true
    }

    @inline(__always)
    private static func encode(_ text: String, into bytes: inout Region) -> Bool {
        let written: Bool? = text.utf8.withContiguousStorageIfAvailable { utf8 in
            guard utf8.count <= Int(Int32.max) else { return false }
            bytes.appendTag(.string)
            bytes.appendInt32(Int32(utf8.count))
            bytes.append(UnsafeRawBufferPointer(utf8))
            return true
        }
        if let written { return written }
        var text = text
        return text.withUTF8 { utf8 in
            guard utf8.count <= Int(Int32.max) else { return false }
            bytes.appendTag(.string)
            bytes.appendInt32(Int32(utf8.count))
            bytes.append(UnsafeRawBufferPointer(utf8))
            return true
        }
    }

    /// Reads values back from the bytes, from a position on.
    struct Reader {
        /// (Not retained: a reader lives within a call that holds its buffer.)
        unowned(unsafe) let storage: Storage
        var offset: Int

        init(storage: Storage, at offset: Int) {
            self.storage = storage
            self.offset = offset
        }

        mutating func tag() -> Tag {
            let raw = storage.bytes.base!.load(fromByteOffset: offset, as: UInt8.self)
            offset += 1
            return Tag(rawValue: raw)!
        }

        mutating func integer() -> Int {
            let value = storage.bytes.integer(at: offset)
            offset += MemoryLayout<Int>.size
            return value
        }

        mutating func int32() -> Int {
            let value = storage.bytes.base!.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            offset += 4
            return Int(value)
        }

        /// The bytes of a string whose tag was just read.
        mutating func string() -> UnsafeRawBufferPointer {
            let length = int32()
            let bytes = UnsafeRawBufferPointer(start: storage.bytes.base! + offset, count: length)
            offset += length
            return bytes
        }

        /// Moves past the value it is at.
        mutating func skipValue() {
            switch tag() {
            case .nil, .false, .true: break
            case .integer, .number, .kept, .repeated: offset += MemoryLayout<Int>.size
            case .string: offset += int32()
            case .table:
                let entries = int32() + 2 * int32()
                for _ in 0..<entries { skipValue() }
            }
        }

        /// A key as it was encoded (`carriesExactly` lets no other kind of key through).
        static func key(_ value: LuaValue) -> LuaKey {
            switch value {
            case .boolean(let flag): .boolean(flag)
            case .integer(let integer): .integer(integer)
            case .number(let number): .number(number)
            case .string(let text): .string(text)
            case .nil, .table: preconditionFailure("LuaValueBuffer: a key that is not a boolean, number or string")
            }
        }

        mutating func value() -> LuaValue {
            switch tag() {
            case .nil: return .nil
            case .false: return .boolean(false)
            case .true: return .boolean(true)
            case .integer: return .integer(Int64(integer()))
            case .number: return .number(Double(bitPattern: UInt64(UInt(bitPattern: integer()))))
            case .string: return .string(String(decoding: string(), as: UTF8.self))
            case .kept: return storage.kept[integer()]
            case .repeated:
                var original = Reader(storage: storage, at: integer())
                return original.value()
            case .table:
                let arrayCount = int32(), fieldCount = int32()
                var array: [LuaValue] = []
                array.reserveCapacity(arrayCount)
                for _ in 0..<arrayCount { array.append(value()) }
                var pairs: [(String, LuaValue)] = []
                var fields: [LuaKey: LuaValue] = [:]
                var allStrings = fieldCount <= LuaTable.pairsLimit
                if allStrings { pairs.reserveCapacity(fieldCount) }
                for _ in 0..<fieldCount {
                    let key = value(), element = value()
                    if allStrings, case .string(let name) = key {
                        pairs.append((name, element))
                        continue
                    }
                    if allStrings {
                        allStrings = false
                        for (name, earlier) in pairs { fields[.string(name)] = earlier }
                        pairs = []
                    }
                    fields[Self.key(key)] = element
                }
                return .table(allStrings ? LuaTable(array: array, distinctPairs: pairs) : LuaTable(array: array, fields: fields))
            }
        }
    }
}

/// Bytes in one block the buffer grows with `realloc` (which, for a large block, moves its pages rather than
/// copying them), and gives to the next buffer when it is done (`spareRegions`).
struct Region {
    var base: UnsafeMutableRawPointer?
    var capacity = 0
    var used = 0

    init() {
        if let spare = spareRegions.withLock({ $0.popLast() }) {
            base = spare.base
            capacity = spare.capacity
        }
    }

    @inline(__always)
    mutating func reserve(_ more: Int) {
        if used + more > capacity { grow(to: used + more) }
    }

    mutating func grow(to needed: Int) {
        var size = max(4096, capacity)
        while size < needed { size *= 2 }
        guard let grown = realloc(base, size) else { fatalError("LuaValueBuffer: out of memory growing to \(size) bytes") }
        base = grown
        capacity = size
    }

    @inline(__always)
    mutating func appendTag(_ tag: LuaValueBuffer.Tag) {
        reserve(1)
        base!.storeBytes(of: tag.rawValue, toByteOffset: used, as: UInt8.self)
        used += 1
    }

    @inline(__always)
    mutating func appendInteger(_ value: Int) {
        reserve(MemoryLayout<Int>.size)
        base!.storeBytes(of: value, toByteOffset: used, as: Int.self)
        used += MemoryLayout<Int>.size
    }

    @inline(__always)
    mutating func appendInt32(_ value: Int32) {
        reserve(4)
        base!.storeBytes(of: value, toByteOffset: used, as: Int32.self)
        used += 4
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        reserve(bytes.count)
        (base! + used).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        used += bytes.count
    }

    @inline(__always)
    func integer(at offset: Int) -> Int {
        base!.loadUnaligned(fromByteOffset: offset, as: Int.self)
    }

    /// Gives the block to the next buffer (`spareRegions`), or frees it.
    func release() {
        guard let base else { return }
        let kept = spareRegions.withLock { spares -> Bool in
            guard spares.count < spareRegionLimit, capacity <= spareRegionBytes else { return false }
            spares.append(SpareRegion(base: base, capacity: capacity))
            return true
        }
        if !kept { free(base) }
    }
}

/// A block a finished buffer left for the next (see `Region`).
struct SpareRegion: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let capacity: Int
}

/// At most this many blocks of at most `spareRegionBytes` each (16 MiB in all) wait for the next buffers: a
/// process that makes stores one after another (tests, benchmarks, an app replacing its store) does not grow
/// fresh pages for each.
let spareRegionLimit = 4
let spareRegionBytes = 4 << 20
let spareRegions = Protected<[SpareRegion]>([])
