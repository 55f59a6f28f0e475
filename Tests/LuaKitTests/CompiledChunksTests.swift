import Foundation
import LuaStoreConcurrency
import LuaStoreTestSupport
import Testing
@testable import LuaKit

/// Chunks compiled once per process: a VM that loads a chunk another compiled reads the dump, and nothing a
/// script can see differs — results, messages, lines, tracebacks; binary chunks stay refused to scripts.
@Suite struct CompiledChunksTests {
    static let script = """
    local M = {}
    local function inner(n)
      if n == 0 then error("deep enough") end
      return n
    end
    function M.run(n) return inner(n) * 2 end
    return M.run(...)
    """

    @Test func aChunkAnotherVMCompiledLoadsFromItsDumpAndBehavesTheSame() async throws {
        let name = "cached-\(UUID().uuidString).lua"
        let cache = CompiledChunks.shared
        func runTwice() async throws -> (value: [LuaValue], error: LuaError?) {
            try await withVM { vm throws in
                let value = try vm.call(try vm.load(Self.script, chunkName: name), arguments: [.value(.integer(21))])
                let error = luaError { _ = try vm.call(try vm.load(Self.script, chunkName: name), arguments: [.value(.integer(0))]) }
                return (value, error)
            }
        }
        #expect(!cache.holds(Self.script, chunkName: name))
        let compiled = try await runTwice()
        #expect(cache.holds(Self.script, chunkName: name))
        let hitsBefore = cache.hits
        let loaded = try await runTwice()
        #expect(cache.hits >= hitsBefore + 2, "the second VM read both loads from the dump")
        #expect(compiled.value == [42] && loaded.value == [42])
        #expect(compiled.error?.description == "\(name):3: deep enough")
        #expect(loaded.error?.description == compiled.error?.description)
        #expect(loaded.error?.traceback == compiled.error?.traceback, "the dump keeps every line")
        #expect(loaded.error?.traceback?.contains("\(name):6: in") == true)
    }

    /// A trusted chunk loaded without its names (`keepingNames: false`): the same results, lines and chunk name in
    /// every VM, the first that compiles it too; names of its variables read `?`; less memory.
    @Test func aTrustedChunkWithoutNamesKeepsItsLinesAndBehaviour() async throws {
        let name = "unnamed-\(UUID().uuidString).lua"
        let source = """
        local M = {}
        local counter = 0
        function M.bump(by) counter = counter + by; return counter end
        function M.fail(value) local item = value; return item.field end
        function M.where() error("here") end
        return M
        """
        func exercise(keepingNames: Bool, keepingLines: Bool = true) async throws
            -> (results: [LuaValue], fail: String?, here: String?, bytes: Int) {
            try await withVM { vm throws in
                vm.collectGarbage()
                let before = vm.memory.bytesInUse
                let module = try vm.callForReferences(try vm.loadTrusted(source, chunkName: name, keepingNames: keepingNames,
                                                                         keepingLines: keepingLines), arguments: [])[0]!
                vm.collectGarbage()
                let bytes = vm.memory.bytesInUse - before
                let bump = try vm.field("bump", of: module)!
                let results = try vm.call(bump, 2) + vm.call(bump, 3)
                let fail = luaError { _ = try vm.call(try vm.field("fail", of: module)!, .nil) }
                let here = luaError { _ = try vm.call(try vm.field("where", of: module)!) }
                return (results, fail?.message, here.map { "\($0.description)\n\($0.traceback ?? "")" }, bytes)
            }
        }
        let named = try await exercise(keepingNames: true)
        let first = try await exercise(keepingNames: false)
        #expect(CompiledChunks.shared.holds(source, chunkName: "host:" + name, debug: .lines))
        let later = try await exercise(keepingNames: false)
        #expect(named.results == [2, 5] && first.results == [2, 5] && later.results == [2, 5])
        #expect(named.fail == "attempt to index a nil value (local 'item')")
        #expect(first.fail == "attempt to index a nil value (local '?')" || first.fail == "attempt to index a nil value",
                "\(first.fail ?? "nil")")
        #expect(later.fail == first.fail, "the VM that compiled it runs the same function as the others")
        #expect(first.here == named.here && later.here == named.here, "its lines and chunk name stay: \(named.here ?? "nil")")
        #expect(named.here?.hasPrefix("host:\(name):5: here\n") == true, "\(named.here ?? "nil")")
        #expect(named.here?.contains("host:\(name):5: in function <host:\(name):5>") == true)
        #expect(first.bytes < named.bytes && later.bytes == first.bytes, "\(named.bytes) → \(first.bytes), \(later.bytes)")
        // Without its lines too: the same behaviour, less memory; its own message names no place, its traceback
        // names the chunk and where each function starts, but no line.
        let bare = try await exercise(keepingNames: false, keepingLines: false)
        #expect(CompiledChunks.shared.holds(source, chunkName: "host:" + name, debug: DebugInfo.none))
        let bareLater = try await exercise(keepingNames: false, keepingLines: false)
        #expect(bare.results == [2, 5] && bareLater.results == [2, 5])
        #expect(bare.fail?.hasSuffix(first.fail ?? "-") == true && bareLater.fail == bare.fail, "\(bare.fail ?? "nil")")
        #expect(bare.here?.hasPrefix("here\n") == true, "\(bare.here ?? "nil")")
        #expect(bare.here?.contains("host:\(name): in function <host:\(name):5>") == true, "\(bare.here ?? "nil")")
        #expect(bare.bytes < first.bytes && bareLater.bytes == bare.bytes, "\(first.bytes) → \(bare.bytes), \(bareLater.bytes)")
    }

    @Test func aDumpThatIsNotLuas54IsLeftAsItIs() {
        #expect(UnnamedChunk.from([]) == nil)
        #expect(UnnamedChunk.from(Array("return 1".utf8)) == nil)
        #expect(UnnamedChunk.from([0x1B, 0x4C, 0x75, 0x61, 0x53] + [UInt8](repeating: 0, count: 40)) == nil, "Lua 5.3's")
    }

    @Test func aChunkThatDoesNotCompileIsNeverKept() async throws {
        let name = "broken-\(UUID().uuidString).lua"
        let source = "return 1 +"
        for _ in 0..<2 {
            let error = try await withVM { vm throws in luaError { _ = try vm.run(source, chunkName: name) } }
            #expect(error?.kind == .syntax)
            #expect(error?.description.hasPrefix("\(name):1:") == true)
        }
        #expect(!CompiledChunks.shared.holds(source, chunkName: name))
    }

    @Test func chunksWithTheSameNameButOtherTextAreToldApart() async throws {
        let name = "same-name-\(UUID().uuidString).lua"
        for round in 0..<2 {
            for value in [1, 2, 3] {
                let result = try await withVM { vm throws in try vm.run("return \(value) + \(round)", chunkName: name) }
                #expect(result == [.integer(Int64(value + round))])
            }
        }
    }

    @Test func scriptsStillCannotLoadBinaryChunks() async throws {
        let results = try await withVM { vm throws in
            _ = try vm.run("return 1", chunkName: "dumped-once.lua") // (its dump is kept; a script never gets it)
            return try vm.run("return load('\\27Lua')", chunkName: "binary.lua")
        }
        #expect(results.first == .nil)
        #expect(results.dropFirst().first?.string?.contains("binary chunk") == true, "\(results)")
    }

    @Test func vmsOfAPoolShareItsThreadsInTurn() async throws {
        let pool = LuaThreadPool(threads: 2, name: "pool-test")
        #expect(pool.threads.count == 2)
        let handed = (0..<6).map { _ in pool.thread() }
        #expect(handed.map { ObjectIdentifier($0) } == (0..<6).map { ObjectIdentifier(pool.threads[$0 % 2]) })
        // Three VMs on one thread; a VM that runs out of time stops alone.
        let thread = pool.threads[0]
        var limits = LuaLimits()
        limits.timeBudget = .milliseconds(200)
        let vms = try thread.sync { () throws(LuaError) -> [LuaVM] in try (0..<3).map { _ throws(LuaError) in try LuaVM(limits: limits) } }
        let results = try thread.sync { () throws(LuaError) -> [[LuaValue]] in
            try vms.enumerated().map { index, vm throws(LuaError) in
                try vm.run("return \(index + 1)", chunkName: "vm\(index).lua")
            }
        }
        #expect(results == [[1], [2], [3]])
        let timeout = thread.sync { luaError { _ = try vms[1].run("while true do end", chunkName: "loop.lua") } }
        #expect(timeout?.kind == .timeout)
        let after = try thread.sync { () throws(LuaError) in try vms.map { vm throws(LuaError) in try vm.run("return 7", chunkName: "after.lua") } }
        #expect(after == [[7], [7], [7]], "every VM of the thread goes on, the one that ran out of time too")
        thread.sync { _ = vms }
    }
}
