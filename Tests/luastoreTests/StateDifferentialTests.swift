import Foundation
import LuaStoreTestSupport
import Testing

/// A store's state tables are tables as Lua has them: the fixture `state-differential/app.lua`, run by `luastore run`,
/// reads the same borders as the same reducer run by stock `lua5.4` on plain tables (`stock.lua`) — tables with
/// holes stored in the state and appended to (where `#` depends on how Lua laid the table out: a copy made without
/// the table's array part answered 0 or 1 where Lua answers 7), made by `init` or by the reducer.
@Suite(.enabled(if: realBusted != nil, "needs Debian's lua5.4 (scripts/bootstrap installs it)"))
struct StateDifferentialTests {
    @Test func bordersOfStoredTablesAreLuas() async throws {
        let folder = CLI.packageRoot.appendingPathComponent("Tests/luastoreTests/state-differential")
        let stock = try await runChildProcess(URL(fileURLWithPath: try #require(realBusted).lua), ["stock.lua"], directory: folder)
        #expect(stock.status == 0, "\(stock.errors)")
        let actions = (1...7).map { #"{"type":"borders","shape":\#($0)}"# } + [#"{"type":"kept"}"#]
        let run = try await CLI.run(["run", folder.path, "--format", "json"], input: actions.joined(separator: "\n") + "\n")
        #expect(run.status == 0, "\(run.errors)")
        let logs = run.outputLines.dropFirst().map { line -> String in
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return object?["log"] as? String ?? "(not props: \(line))"
        }
        let expected = stock.output.split(separator: "\n").map(String.init)
        #expect(expected.count == 8)
        for (index, (ours, luas)) in zip(logs, expected).enumerated() {
            let differing = zip(ours.split(separator: " "), luas.split(separator: " ")).enumerated().filter { $0.element.0 != $0.element.1 }
            #expect(ours == luas, "line \(index + 1): \(differing.count) of 64 differ, first \(differing.prefix(3).map { "holes \($0.offset): \($0.element.0) against \($0.element.1)" })")
        }
    }
}
