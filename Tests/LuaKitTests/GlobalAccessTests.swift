import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// `LuaVM.globalAccesses(in:chunkName:)`: the globals a chunk reads and writes by name, read from its bytecode
/// without running it, each with its line — what `luastore check` lints.
struct GlobalAccessTests {
    @Test func eachAccessIsListedWithItsLine() async throws {
        try await withVM { vm throws in
            let source = """
                count = 1
                local function f()
                  return count + missing
                end
                function g() _G.viaG = 2; return _G.readViaG end
                print(f)
                """
            let accesses = try vm.globalAccesses(in: source, chunkName: "a.lua")
            let listed = Set(accesses.map { "\($0.name)@\($0.line)\($0.writes ? "=" : "")\($0.inFunction ? "f" : "")" })
            #expect(listed == ["count@1=", "count@3f", "missing@3f", "g@5=", "_G@5f", "viaG@5=f", "readViaG@5f", "print@6"], "\(listed)")
            #expect(try vm.run("return count", chunkName: "probe.lua") == [.nil], "the chunk was not run")
        }
    }

    /// Lines stay right far into a long function and across long gaps, where Lua stores them as absolute lines
    /// (every 128 instructions, and past a jump of 128 lines or more).
    @Test func linesStayRightInLongFunctions() async throws {
        try await withVM { vm throws in
            var lines = ["local function long()"]
            for index in 1...300 { lines.append("  sink(known\(index))") }
            lines += Array(repeating: "", count: 200)
            lines.append("  return last")
            lines.append("end")
            let accesses = try vm.globalAccesses(in: lines.joined(separator: "\n"), chunkName: "long.lua")
            for index in [1, 127, 128, 129, 255, 256, 300] {
                #expect(accesses.first { $0.name == "known\(index)" }?.line == index + 1, "known\(index)")
            }
            #expect(accesses.first { $0.name == "last" }?.line == 502)
        }
    }

    @Test func aSyntaxErrorIsThrownNamingItsLine() async throws {
        try await withVM { vm throws in
            let error = luaError { _ = try vm.globalAccesses(in: "x = 1\nlocal = 2", chunkName: "bad.lua") }
            #expect(error?.location == "bad.lua:2", "\(String(describing: error))")
        }
    }
}
