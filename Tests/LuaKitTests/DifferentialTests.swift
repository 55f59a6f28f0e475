import Foundation
import LuaStoreTestSupport
import Testing

/// Debian's stock interpreter, where it is installed.
let stockLua = ["/usr/bin/lua5.4", "/usr/local/bin/lua5.4"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// Scripts run under the built `luakit` and under Debian's stock `lua5.4` (the reference for what Lua does) print
/// the same bytes. Each fixture folder under `Differential/` is a script and the files it reads.
@Suite(.enabled(if: stockLua != nil, "needs Debian's lua5.4 (scripts/bootstrap installs it)"))
struct DifferentialTests {
    static var fixtures: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Differential")
    }

    @Test(arguments: [("package", "probes.lua")])
    func scriptsPrintWhatStockLuaPrints(folder: String, script: String) async throws {
        let directory = Self.fixtures.appendingPathComponent(folder)
        let stock = try await runChildProcess(URL(fileURLWithPath: stockLua!), [script], directory: directory)
        let sandboxed = try await runChildProcess(LuakitToolTests.binary, [script], directory: directory)
        #expect(stock.status == 0, "\(stock.errors)")
        #expect(sandboxed.status == 0, "\(sandboxed.errors)")
        #expect(sandboxed.output == stock.output)
        #expect(!stock.output.isEmpty)
    }
}
