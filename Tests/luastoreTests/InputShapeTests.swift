import Foundation
import LuaStoreTestSupport
import Testing

/// Inputs of any shape are read in time linear in their size, and a path that is not the file a command wants is
/// refused at once, in words (issue "Nothing lost, second sweep", item 7).
@Suite struct InputShapeTests {
    static let app = """
        local app = {}
        function app.init() return { keys = 0 } end
        function app.reduce(state, action)
          local n = 0
          for _ in pairs(action) do n = n + 1 end
          state.keys = n
        end
        function app.props(state) return { keys = state.keys } end
        return app
        """

    /// An action of 100,000 members is read and applied: reading an object was quadratic in its members (each one
    /// copied the dictionary of those before it: 25,000 members took 2.6 s, 100,000 took 42 s). The bound only
    /// catches a return of that (a linear read takes well under a second even in a debug build).
    @Test func anActionWithManyMembersIsReadInLinearTime() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        var line = #"{"type":"wide""#
        for index in 0..<100_000 { line += #","k\#(index)":\#(index)"# }
        line += "}\n"
        let actions = folder.appendingPathComponent("wide.jsonl")
        try Data(line.utf8).write(to: actions)
        let started = ContinuousClock.now
        let run = try await CLI.run(["run", folder.path, "--actions", actions.path, "--format", "json"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.outputLines.last == #"{"keys":100001}"#)
        #expect(ContinuousClock.now - started < .seconds(60), "a quadratic read is back")
    }

    /// `verify`, `--trust`, `--key` and a bundle to run, given a folder, a FIFO or a device, are refused at once
    /// naming what the path is (a folder made `verify` spin for ever, a FIFO would wait for ever).
    @Test func aPathThatIsNotAFileIsRefusedAtOnce() async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let fifo = folder.appendingPathComponent("pipe").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let commands: [([String], String)] = [
            (["verify", folder.path], "\(folder.path) is a folder, not a file: a bundle is a file luastore pack wrote"),
            (["verify", fifo], "\(fifo) is a FIFO (a named pipe), not a file"),
            (["verify", "/dev/zero"], "/dev/zero is a device, not a file"),
            (["verify", folder.appendingPathComponent("none.lsb").path], "none.lsb does not exist"),
            (["run", fifo, "--format", "json"], "is a FIFO (a named pipe), not a file"),
            (["verify", "/dev/null", "--trust", folder.path], "is a folder, not a file: a public key is a file luastore keygen wrote"),
            (["verify", "/dev/null", "--trust", fifo], "is a FIFO (a named pipe), not a file"),
            (["pack", folder.path, "-o", "/tmp/never.lsb", "--key", fifo], "is a FIFO (a named pipe), not a file: a private key"),
        ]
        for (arguments, said) in commands {
            let started = ContinuousClock.now
            let run = try await CLI.run(arguments, input: "")
            #expect(run.status != 0, "\(arguments)")
            #expect(run.errors.contains(said), "\(arguments): \(run.errors)")
            #expect(ContinuousClock.now - started < .seconds(60), "\(arguments) did not answer at once (a folder spun for ever)")
        }
        #expect(!FileManager.default.fileExists(atPath: "/tmp/never.lsb"))
    }
}
