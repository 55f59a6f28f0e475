import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// The host's Lua lives in `.lua` files embedded at build time: what runs is those files. A builtin written there is a
/// C function to scripts, as Lua's are: a traceback names it `[C]: in function 'name'` and shows none of the
/// prelude's frames; its errors are at the script's line.
@Suite struct EmbeddedLuaTests {
    @Test func tracebacksShowTheBuiltinsAsLuasOwnAndNoneOfThePreludesFrames() async throws {
        let error = try await withVM { vm in
            luaError { _ = try vm.run("local function keys(t) return sortedpairs(t) end\nreturn keys({ [{}] = 1 })", chunkName: "keys.lua") }
        }
        let traceback = try #require(error?.traceback)
        // The script's own line is where the error is reported, in a tail call too…
        #expect(error?.location == "keys.lua:1")
        #expect(error?.message.contains("sortedpairs: keys of type table have no order") == true, "\(error?.message ?? "")")
        // …and the traceback starts at the builtin, as Lua's C builtins appear, with none of the prelude's frames.
        let frames = traceback.components(separatedBy: "\n").dropFirst().map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(frames.first == "[C]: in function 'sortedpairs'", "\(traceback)")
        #expect(frames.dropFirst().first?.hasPrefix("keys.lua:1: in ") == true, "\(traceback)")
        #expect(!traceback.contains("host:"), "\(traceback)")
        // (The prelude is what runs: the message is base.lua's own words.)
        let base = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/LuaKit/Sandbox/base.lua")
        #expect(try String(contentsOf: base, encoding: .utf8).contains("sortedpairs: keys of type"))
    }
}
