import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// The host's Lua lives in `.lua` files embedded at build time: what runs is those files, and messages and
/// tracebacks name them with their real line numbers.
@Suite struct EmbeddedLuaTests {
    /// `sortedpairs` lives in the prelude's part `base.lua`.
    static let base = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/LuaKit/Sandbox/base.lua")

    @Test func tracebacksNameThePreludeFileAndItsLines() async throws {
        let error = try await withVM { vm in
            luaError { _ = try vm.run("local keys = sortedpairs({ [{}] = 1 })\nreturn keys", chunkName: "keys.lua") }
        }
        let traceback = try #require(error?.traceback)
        // The script's own line is where the error is reported…
        #expect(error?.location == "keys.lua:1")
        // …and the prelude's frame names its file and a line that is, in that file, the raising call.
        let marker = "host:LuaKit/Sandbox/base.lua:"
        let frame = try #require(traceback.components(separatedBy: "\n").first { $0.contains(marker) }, "\(traceback)")
        let afterMarker = frame[frame.range(of: marker)!.upperBound...]
        let line = try #require(Int(afterMarker.prefix { $0.isNumber }))
        let lines = try String(contentsOf: Self.base, encoding: .utf8).components(separatedBy: "\n")
        try #require(line >= 1 && line <= lines.count, "line \(line) of a \(lines.count)-line file")
        #expect(lines[line - 1].contains("sortedpairs: keys of type"), "line \(line): \(lines[line - 1])")
    }
}
