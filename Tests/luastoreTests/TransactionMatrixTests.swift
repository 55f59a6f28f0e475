import Foundation
import LuaStoreTestSupport
import Testing

/// A run is a transaction in every mode: whatever makes an action fail, the action is undone, the actions before it
/// in the same batch stay applied and acknowledged, those after it run — sent in one batch or one at a time, plain,
/// recorded or durable (issue "Nothing lost, second sweep", item 1).
@Suite(.serialized) struct TransactionMatrixTests { // (one case at a time: each runs the CLI up to three times)
    static let app = TestApps.failingKinds
    static let kinds = TestApps.failureKinds
    static var lines: [String] { TestApps.failureLines }

    enum Mode: String, CaseIterable {
        case plain, record, persistFull, persistBatch
    }

    @Test(arguments: [false, true], Mode.allCases)
    func aFailingActionIsUndoneAndItsNeighboursKeepTheirs(paced: Bool, mode: Mode) async throws {
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let actions = folder.appendingPathComponent("actions.jsonl")
        try Data((Self.lines.joined(separator: "\n") + "\n").utf8).write(to: actions)
        let recording = folder.appendingPathComponent("session.jsonl").path
        let database = folder.appendingPathComponent("store.sqlite").path
        var options = ["--format", "json", "--time-budget-ms", "100"]
        switch mode {
        case .plain: break
        case .record: options += ["--record", recording]
        case .persistFull: options += ["--persist", database, "--persist-sync", "full"]
        case .persistBatch: options += ["--persist", database, "--persist-sync", "batch"]
        }
        let run: ChildProcessResult
        if paced { // one line at a time, each after the last was answered (a slow pipe)
            let script = #"while IFS= read -r line; do printf '%s\n' "$line"; sleep 0.4; done < "$1""#
            let shell = "(\(script)) | \"$0\" run \"$2\" --actions - \"${@:3}\""
            run = try await runChildProcess(URL(fileURLWithPath: "/bin/bash"),
                                            ["-c", shell, CLI.binary.path, actions.path, folder.path] + options,
                                            input: "", directory: CLI.packageRoot, environment: CLI.environment)
        } else {
            run = try await CLI.run(["run", folder.path, "--actions", actions.path] + options)
        }
        #expect(run.status == 1, "\(run.errors)")
        let adds = Self.kinds.count + 1
        let printed = run.output.split(separator: "\n").map(String.init)
        #expect(printed.last == #"{"count":\#(adds),"keys":0}"#, "\(mode) paced \(paced): \(printed)")
        #expect(!printed.contains { $0.contains("100") }, "a failed action showed: \(printed)")
        for kind in Self.kinds where kind != "budget" {
            #expect(run.errors.contains("reduce failed"), "\(kind)")
        }
        #expect(!run.errors.contains("journal could not"), "\(run.errors)")

        switch mode {
        case .plain: break
        case .record:
            let entries = try String(contentsOfFile: recording, encoding: .utf8).split(separator: "\n").dropFirst()
            #expect(entries.count == Self.lines.count, "one entry per action")
            for (index, entry) in entries.enumerated() {
                #expect(entry.contains(#""seq":\#(index + 1),"#))
                #expect(entry.contains(#""failure""#) == (index % 2 == 1), "entry \(index + 1): \(entry)")
            }
            let replay = try await CLI.run(["replay", folder.path, recording, "--time-budget-ms", "100"])
            #expect(replay.status == 0, "\(replay.errors)")
        case .persistFull, .persistBatch:
            let state = folder.appendingPathComponent("state.json").path
            let resumed = try await CLI.run(["run", folder.path, "--persist", database, "--actions", "/dev/null", "--state-out", state])
            #expect(resumed.status == 0, "\(resumed.errors)")
            let resumedState = try String(contentsOfFile: state, encoding: .utf8).trimmingCharacters(in: .newlines)
            #expect(resumedState == #"{"count":\#(adds),"list":{}}"#, "\(resumedState)")
        }
    }
}
