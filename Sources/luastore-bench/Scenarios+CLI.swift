import Foundation

/// The command line, as a shell user runs it: the built `luastore` beside this program, on files of actions.
extension Scenarios {
    /// A 10-item app whose props (the list's length) no action changes: the rows measure reading, parsing and
    /// dispatching, not printing.
    static let hitsApp = """
        local app = {}
        function app.init()
          local items = {}
          for i = 1, 10 do items[i] = { id = i, hits = 0, note = "" } end
          return { items = items, total = 0 }
        end
        function app.reduce(state, action)
          if action.type == "hit" then
            local item = state.items[action.id]
            item.hits = item.hits + 1
            item.note = action.note
            state.total = state.total + 1
          end
        end
        function app.props(state) return { size = #state.items } end
        return app
        """

    /// `hitsApp` with its contract declared (docs/contracts.md): each action checked against `Hit` before its reducer.
    static let declaredHitsApp = hitsApp.replacingOccurrences(of: "function app.reduce(state, action)", with: """
        ---@class Hit
        ---@field type "hit"
        ---@field id integer
        ---@field note string

        ---@param action Hit
        function app.reduce(state, action)
        """)

    /// A counter whose props change with every action: a props line per action.
    static let countingApp = """
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action)
          if action.type == "increment" then state.count = state.count + 1 end
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    /// The built `luastore` beside this program, or nil (then the CLI rows are left out, with a note).
    var luastoreBinary: URL? {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("luastore")
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            FileHandle.standardError.write(Data("bench: no luastore binary beside the bench; its rows are left out\n".utf8))
            return nil
        }
        return binary
    }

    /// Runs `luastore arguments` (output discarded) and returns how long it took; it must exit 0.
    func timeLuastore(_ binary: URL, _ arguments: [String]) throws -> Duration {
        try Self.timeProcess(binary, arguments, named: "luastore")
    }

    /// Runs `executable arguments` in `directory` (output discarded) and returns how long it took; it must exit 0
    /// (else a failure naming it as `name`).
    static func timeProcess(_ executable: URL, _ arguments: [String], in directory: URL? = nil, named name: String) throws -> Duration {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let clock = ContinuousClock()
        let start = clock.now
        try process.run()
        process.waitUntilExit()
        let elapsed = clock.now - start
        guard process.terminationStatus == 0 else {
            throw BenchFailure("\(name) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
        return elapsed
    }

    /// A file of `count` JSON Lines made by `line(index)`.
    func actionsFile(_ name: String, count: Int, _ line: (Int) -> String) throws -> String {
        var text = ""
        text.reserveCapacity(count * 48)
        for index in 0..<count {
            text += line(index)
            text += "\n"
        }
        let path = workspace.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    func cli() async throws -> [Scenario] {
        guard let luastore = luastoreBinary else { return [] }
        let count = quick ? 20_000 : 200_000
        let rounds = quick ? 1 : 3
        let hits = try app("hits", Self.hitsApp)
        let counting = try app("counting", Self.countingApp)
        let hitLines = try actionsFile("hits.jsonl", count: count) { index in
            #"{"type":"hit","id":\#(index % 10 + 1),"note":"note \#(index)"}"#
        }
        let increments = try actionsFile("increments.jsonl", count: count) { _ in #"{"type":"increment"}"# }
        func perSecond(_ arguments: [String]) async throws -> Double {
            try await Harness.median(rounds: rounds) {
                Double(count) / Harness.milliseconds(try timeLuastore(luastore, arguments)) * 1_000
            }
        }
        let quiet = try await perSecond(["run", hits.path, "--actions", hitLines, "--format", "json"])
        let changing = try await perSecond(["run", counting.path, "--actions", increments, "--format", "json"])
        // A recording of the quiet run, replayed: every action's changes compared with the recorded ones.
        let recording = workspace.appendingPathComponent("hits-session.jsonl").path
        _ = try timeLuastore(luastore, ["run", hits.path, "--actions", hitLines, "--format", "json", "--record", recording])
        let replay = try await perSecond(["replay", hits.path, recording])
        // The same run of an app that declares its actions, alternated with the one that does not (time ÷ time).
        let declared = try app("declared-hits", Self.declaredHitsApp)
        let (_, _, declaredRatio) = try await Harness.alternate(
            rounds: rounds,
            { Harness.milliseconds(try timeLuastore(luastore, ["run", declared.path, "--actions", hitLines, "--format", "json"])) },
            { Harness.milliseconds(try timeLuastore(luastore, ["run", hits.path, "--actions", hitLines, "--format", "json"])) })
        return [
            Scenario(name: "cli.actions_per_second", value: quiet, unit: "/s", goal: "≥ 250000", pass: quiet >= 250_000),
            Scenario(name: "cli.actions_per_second_props_changing", value: changing, unit: "/s", goal: "—", pass: nil),
            Scenario(name: "replay.actions_per_second", value: replay, unit: "/s", goal: "—", pass: nil),
            Scenario(name: "cli.declared_vs_undeclared_ratio", value: declaredRatio, unit: "×", goal: "≤ 1.1", pass: declaredRatio <= 1.1),
        ]
    }
}
