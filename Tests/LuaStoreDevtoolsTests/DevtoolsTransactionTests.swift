import Foundation
import LuaStoreTestSupport
import LuaStoreConcurrency
import RawHTTPClient
import Testing

/// The transaction matrix's devtools column (the others: `TransactionMatrixTests`): with the devtools on, whatever
/// makes an action fail, the action is undone and its neighbours keep theirs — in the props printed, in the
/// session the page shows (one entry per action, each with its outcome) and in the state the run ends with.
@Suite(.serialized) struct DevtoolsTransactionTests { // (one case at a time: each runs a serving CLI)
    @Test(arguments: [false, true])
    func aFailingActionIsUndoneInADevtoolsSession(paced: Bool) async throws {
        let folder = try CLI.makeApp(TestApps.failingKinds)
        defer { try? FileManager.default.removeItem(at: folder) }
        let lines = TestApps.failureLines
        let actions = folder.appendingPathComponent("actions.jsonl")
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: actions)
        let stateFile = folder.appendingPathComponent("state.json"), printed = folder.appendingPathComponent("props.jsonl")
        try Data().write(to: printed)
        let input = Pipe()
        // (A budget the `budget` action's endless loop spends and nothing else reaches: it counts the app's load too,
        // on the wall clock, which a debug build on a busy machine took 50 ms and more over.)
        let (process, banner) = try await DevtoolsTests.startServing(
            ["run", folder.path, "--actions", paced ? "-" : actions.path, "--format", "json", "--time-budget-ms", "400",
             "--devtools", "0", "--state-out", stateFile.path],
            output: try FileHandle(forWritingTo: printed), input: input)
        defer { if process.isRunning { process.interrupt() } }
        let line = try #require(banner.split(separator: "\n").first { $0.hasPrefix("devtools: ") }, "no devtools line: \(banner)")
        let match = try #require(line.wholeMatch(of: /devtools: http:\/\/127\.0\.0\.1:(\d+)\/\?token=([0-9a-f]{32})/))
        let port = try #require(UInt16(match.1)), token = String(match.2)
        let writer = input.fileHandleForWriting
        if paced { // one line at a time, each after the last was answered (a slow pipe)
            for line in lines {
                try writer.write(contentsOf: Data((line + "\n").utf8))
                try await Task.sleep(for: .milliseconds(400))
            }
        }
        try writer.close()

        // Each entry's outcome: "failed" or "applied", in order; and how the page shows the action the contract refused.
        let outcomes = Protected<[String]>([])
        let refusal = Protected<String?>(nil) // (the message of the entry failed as `undeclared`)
        let heardAll = await eventually(timeout: .seconds(60)) {
            guard let answer = try? await offPool({ try RawHTTP.request("GET", "/api/entries?limit=500", port: port, token: token) }),
                  answer.status == 200,
                  let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
                  let list = object["entries"] as? [[String: Any]] else { return false }
            outcomes.withLock { $0 = list.map { $0["failure"] == nil ? "applied" : "failed" } }
            let refused = list.compactMap { $0["failure"] as? [String: Any] }.first { $0["stage"] as? String == "undeclared" }
            refusal.withLock { $0 = refused?["message"] as? String }
            return list.count == lines.count
        }
        #expect(heardAll, "the session has one entry per action: \(outcomes.value)")
        #expect(outcomes.value == lines.indices.map { $0 % 2 == 1 ? "failed" : "applied" }, "\(outcomes.value)")
        let refused = try #require(refusal.withLock { $0 }, "no entry of the page is refused as undeclared")
        #expect(refused.hasPrefix(#"action.type is "undeclared", not "add"|"error"|"#), "\(refused)")

        process.interrupt()
        #expect(await eventually(timeout: .seconds(30)) { !process.isRunning })
        let adds = TestApps.failureKinds.count + 1
        let props = try String(contentsOf: printed, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(props.last == #"{"count":\#(adds),"keys":0}"#, "paced \(paced): \(props)")
        #expect(!props.contains { $0.contains("100") }, "a failed action showed: \(props)")
        let state = try String(contentsOf: stateFile, encoding: .utf8).trimmingCharacters(in: .newlines)
        #expect(state == #"{"count":\#(adds),"list":{}}"#, "\(state)")
    }
    /// Actions that arrive while the devtools travel are held (never lost): a run whose input ends then, and which is
    /// then interrupted, goes back to the present first — the held actions are reduced and in the state it ends with.
    @Test func actionsHeldWhileTravelingAreReducedWhenTheRunEnds() async throws {
        let folder = try CLI.copySample("counter")
        defer { try? FileManager.default.removeItem(at: folder) }
        let stateFile = folder.appendingPathComponent("state.json")
        let input = Pipe()
        let (process, banner) = try await DevtoolsTests.startServing(
            ["run", folder.path, "--actions", "-", "--format", "json", "--devtools", "0", "--state-out", stateFile.path],
            output: FileHandle.nullDevice, input: input)
        defer { if process.isRunning { process.interrupt() } }
        let line = try #require(banner.split(separator: "\n").first { $0.hasPrefix("devtools: ") }, "no devtools line: \(banner)")
        let match = try #require(line.wholeMatch(of: /devtools: http:\/\/127\.0\.0\.1:(\d+)\/\?token=([0-9a-f]{32})/))
        let port = try #require(UInt16(match.1)), token = String(match.2)
        @Sendable func held() async -> Int? {
            guard let answer = try? await offPool({ try RawHTTP.request("GET", "/api/session", port: port, token: token) }),
                  answer.status == 200,
                  let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any] else { return nil }
            return object["held"] as? Int
        }
        func post(_ target: String) async throws -> Int {
            try await offPool { try RawHTTP.request("POST", target, port: port, body: "", token: token) }.status
        }
        let writer = input.fileHandleForWriting
        try writer.write(contentsOf: Data(String(repeating: "{\"type\":\"increment\"}\n", count: 5).utf8))
        let five = await eventually(timeout: .seconds(60)) {
            guard let answer = try? await offPool({ try RawHTTP.request("GET", "/api/entries?limit=50", port: port, token: token) }),
                  let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
                  let list = object["entries"] as? [[String: Any]] else { return false }
            return list.count >= 5
        }
        #expect(five, "the five actions' entries within 60 s")
        #expect(try await post("/api/unlock") == 200)
        #expect(try await post("/api/jump?seq=2") == 200)
        try writer.write(contentsOf: Data(String(repeating: "{\"type\":\"increment\"}\n", count: 3).utf8))
        let heldThree = await eventually(timeout: .seconds(60)) { await held() == 3 }
        let heldNow = await held()
        #expect(heldThree, "three actions held while traveling: \(String(describing: heldNow))")
        try writer.close()
        process.interrupt()
        #expect(await eventually(timeout: .seconds(30)) { !process.isRunning })
        let state = try String(contentsOf: stateFile, encoding: .utf8)
        #expect(state.contains(#""count":8"#), "\(state)")
        // (0 when the run saw its input end before the interrupt, 130 when the interrupt came first: either way it
        // went back to the present.)
        #expect([0, 130].contains(process.terminationStatus), "\(process.terminationStatus)")
    }
}
