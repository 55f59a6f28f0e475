import CLua
import Glibc
internal import LuaStoreConcurrency

/// Chunks this process has compiled, as Lua's own binary dump of them, shared by every VM: a chunk any VM compiled
/// before (the sandbox's prelude, a state runtime, an app's modules in the thousandth store of the same app) is
/// loaded from its dump instead of being parsed again — the same function, with its source name and lines, at a
/// fraction of the cost (parsing was most of what making a VM cost: `stores.create_ms`, docs/benchmarks.md).
///
/// A dump is made here from source text a VM compiled, and read back only here: scripts still cannot load a binary
/// chunk. A chunk is known by its name and its whole text; one that did not compile is never kept (it fails again,
/// with the same message). The cache holds at most `byteLimit` bytes of dumps; past that, chunks compile as before.
final class CompiledChunks: Sendable {
    static let shared = CompiledChunks(byteLimit: 32 << 20)

    private struct Compiled {
        let source: String
        let debug: DebugInfo
        let dump: [UInt8]

        /// Whether this is `source` compiled keeping `debug`.
        func holds(_ source: String, debug: DebugInfo) -> Bool {
            self.debug == debug && String.sameBytes(self.source, source)
        }
    }

    private struct Entries {
        /// By chunk name (cheap to hash; a source is compared byte for byte, never hashed).
        var byName: [String: [Compiled]] = [:]
        var bytes = 0
        var hits = 0
    }

    private let byteLimit: Int
    private let entries = Protected(Entries())

    init(byteLimit: Int) { self.byteLimit = byteLimit }

    /// The dump of `source` compiled as `chunkName` (keeping `debug` of its debug information), if a VM compiled it
    /// before.
    func dump(of source: String, chunkName: String, debug: DebugInfo = .all) -> [UInt8]? {
        entries.withLock { entries in
            let dump = entries.byName[chunkName]?.first(where: { $0.holds(source, debug: debug) })?.dump
            if dump != nil { entries.hits += 1 }
            return dump
        }
    }

    /// How many chunks were loaded from their dumps (for tests).
    var hits: Int { entries.withLock { $0.hits } }

    /// Whether the dump of `source` compiled as `chunkName` is kept (for tests).
    func holds(_ source: String, chunkName: String, debug: DebugInfo = .all) -> Bool {
        entries.withLock { $0.byName[chunkName]?.contains(where: { $0.holds(source, debug: debug) }) ?? false }
    }

    /// Keeps `dump` for `source` compiled as `chunkName`, unless the cache is full.
    func keep(_ dump: [UInt8], of source: String, chunkName: String, debug: DebugInfo = .all) {
        entries.withLock { entries in
            guard entries.bytes + dump.count + source.utf8.count <= byteLimit else { return }
            var list = entries.byName[chunkName] ?? []
            guard !list.contains(where: { $0.holds(source, debug: debug) }) else { return }
            list.append(Compiled(source: source, debug: debug, dump: dump))
            entries.byName[chunkName] = list
            entries.bytes += dump.count + source.utf8.count
        }
    }

    /// [-0, +0, -] The dump of the function on top of `state`'s stack (with its debug information: messages and
    /// tracebacks name the same lines).
    static func dumpTop(_ state: OpaquePointer) -> [UInt8] {
        var bytes: [UInt8] = []
        withUnsafeMutablePointer(to: &bytes) { buffer in
            _ = lua_dump(state, { _, data, size, context in
                guard let data, size > 0 else { return 0 }
                context!.assumingMemoryBound(to: [UInt8].self).pointee.append(
                    contentsOf: UnsafeRawBufferPointer(start: data, count: size))
                return 0
            }, buffer, 0)
        }
        return bytes
    }
}

/// What a compiled chunk keeps of its debug information: all of it; its lines (its functions' local variables and
/// upvalues go unnamed); or neither.
enum DebugInfo: Sendable, Equatable {
    case all, lines, none
}

/// A Lua 5.4 binary chunk without the names of its functions' local variables and upvalues: what a trusted chunk
/// loaded into every VM keeps of its debug information (its source name, its lines and where each function starts
/// stay, so messages and tracebacks name the same places). The names are about a third of a compiled function's
/// memory; without them a message about one of its variables says `?` for the name. Without its lines too (for the
/// host's own runtime, loaded into every store: ≈ 6 KiB of each), a message raised in it names no place, and a
/// traceback names its chunk without a line; where each function starts stays.
///
/// The layout is the one `ldump.c` writes and `lundump.c` reads (format 0 of Lua 5.4, every 5.4 release): a header,
/// then the main function, each function being its source, its lines, its code, constants, upvalues, nested
/// functions, and last its debug information (line deltas, absolute lines, local variables, upvalue names).
/// Sizes are written most significant 7 bits first, the last byte flagged with 0x80; a string is its length + 1
/// (0: none) then its bytes.
enum UnnamedChunk {
    /// `dump` without the names (and, not `keepingLines`, without its lines), or nil when it is not a chunk this
    /// reader knows (a VM then keeps the full dump).
    static func from(_ dump: [UInt8], keepingLines: Bool = true) -> [UInt8]? {
        var reader = Reader(bytes: dump, keepingLines: keepingLines)
        return reader.rewrite()
    }

    private struct Reader {
        let bytes: [UInt8]
        let keepingLines: Bool
        var position = 0
        var output: [UInt8] = []

        init(bytes: [UInt8], keepingLines: Bool) {
            self.bytes = bytes
            self.keepingLines = keepingLines
            output.reserveCapacity(bytes.count)
        }

        /// The header this build's Lua writes: signature, version 5.4, format 0, the conversion check bytes, the
        /// sizes of an instruction (4), an integer and a float (8), and the check integer and float (16 bytes).
        static let headerLength = 4 + 1 + 1 + 6 + 3 + 16

        mutating func rewrite() -> [UInt8]? {
            guard bytes.count > Self.headerLength + 1, bytes[0] == 0x1B, bytes[4] == 0x54, bytes[5] == 0,
                  bytes[12] == 4, bytes[13] == 8, bytes[14] == 8,
                  copy(Self.headerLength + 1), // (+ the main function's upvalue count)
                  function(), position == bytes.count else { return nil }
            return output
        }

        /// Copies `count` bytes as they are.
        mutating func copy(_ count: Int) -> Bool {
            guard count >= 0, position + count <= bytes.count else { return false }
            output.append(contentsOf: bytes[position..<(position + count)])
            position += count
            return true
        }

        /// Reads a size (without writing it).
        mutating func size() -> Int? {
            var value = 0
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                guard value < Int.max >> 7 else { return nil }
                value = value << 7 | Int(byte & 0x7F)
                if byte & 0x80 != 0 { return value }
            }
            return nil
        }

        mutating func write(size value: Int) {
            var groups: [UInt8] = [UInt8(value & 0x7F) | 0x80]
            var rest = value >> 7
            while rest > 0 {
                groups.append(UInt8(rest & 0x7F))
                rest >>= 7
            }
            output.append(contentsOf: groups.reversed())
        }

        /// Copies a size and returns it.
        mutating func copySize() -> Int? {
            guard let value = size() else { return nil }
            write(size: value)
            return value
        }

        /// Copies a string.
        mutating func copyString() -> Bool {
            guard let length = copySize() else { return false }
            return length == 0 || copy(length - 1)
        }

        /// Skips a string.
        mutating func skipString() -> Bool {
            guard let length = size(), length == 0 || position + length - 1 <= bytes.count else { return false }
            position += max(0, length - 1)
            return true
        }

        mutating func function() -> Bool {
            // source, first and last line, parameters, vararg flag, stack size
            guard copyString(), copySize() != nil, copySize() != nil, copy(3) else { return false }
            guard let code = copySize(), copy(4 * code) else { return false }
            guard let constants = copySize() else { return false }
            for _ in 0..<constants {
                guard position < bytes.count else { return false }
                let tag = bytes[position]
                guard copy(1) else { return false }
                switch tag {
                case 0x03, 0x13: guard copy(8) else { return false } // an integer, a float
                case 0x04, 0x14: guard copyString() else { return false } // a short, a long string
                case 0x00, 0x01, 0x11: break // nil, false, true
                default: return false
                }
            }
            guard let upvalues = copySize(), copy(3 * upvalues) else { return false } // in stack, index, kind
            guard let functions = copySize() else { return false }
            for _ in 0..<functions {
                guard function() else { return false }
            }
            // Debug information: the lines stay (unless not `keepingLines`), the names go.
            guard let lines = size(), lines <= bytes.count - position else { return false }
            if keepingLines {
                write(size: lines)
                guard copy(lines) else { return false }
            } else {
                position += lines
                write(size: 0)
            }
            guard let absolute = size() else { return false }
            if keepingLines { write(size: absolute) } else { write(size: 0) }
            for _ in 0..<absolute {
                guard let instruction = size(), let line = size() else { return false }
                if keepingLines {
                    write(size: instruction)
                    write(size: line)
                }
            }
            guard let locals = size() else { return false }
            for _ in 0..<locals {
                guard skipString(), size() != nil, size() != nil else { return false } // name, first and last instruction
            }
            guard let names = size() else { return false }
            for _ in 0..<names {
                guard skipString() else { return false }
            }
            write(size: 0)
            write(size: 0)
            return true
        }
    }
}
