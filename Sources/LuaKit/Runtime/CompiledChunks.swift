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
        let dump: [UInt8]
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

    /// The dump of `source` compiled as `chunkName`, if a VM compiled it before.
    func dump(of source: String, chunkName: String) -> [UInt8]? {
        entries.withLock { entries in
            let dump = entries.byName[chunkName]?.first(where: { Self.same($0.source, source) })?.dump
            if dump != nil { entries.hits += 1 }
            return dump
        }
    }

    /// How many chunks were loaded from their dumps (for tests).
    var hits: Int { entries.withLock { $0.hits } }

    /// Whether the dump of `source` compiled as `chunkName` is kept (for tests).
    func holds(_ source: String, chunkName: String) -> Bool {
        entries.withLock { $0.byName[chunkName]?.contains(where: { Self.same($0.source, source) }) ?? false }
    }

    /// Keeps `dump` for `source` compiled as `chunkName`, unless the cache is full.
    func keep(_ dump: [UInt8], of source: String, chunkName: String) {
        entries.withLock { entries in
            guard entries.bytes + dump.count + source.utf8.count <= byteLimit else { return }
            var list = entries.byName[chunkName] ?? []
            guard !list.contains(where: { Self.same($0.source, source) }) else { return }
            list.append(Compiled(source: source, dump: dump))
            entries.byName[chunkName] = list
            entries.bytes += dump.count + source.utf8.count
        }
    }

    /// Whether two texts are the same bytes (`==` on `String` would compare them as Unicode, normalizing).
    private static func same(_ first: String, _ second: String) -> Bool {
        guard first.utf8.count == second.utf8.count else { return false }
        var first = first, second = second
        return first.withUTF8 { a in second.withUTF8 { b in a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 } }
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
