import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTesting
import LuaStoreTestSupport
import Testing

/// `ScriptedTestStore`: each check passes when the test states what happened, and fails — with the text
/// checked — on a missing assertion, a wrong value, a command or a received action the test did not state.
@Suite(.tags(.concurrency)) struct ScriptedTestStoreTests {
    static let app = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { todos = {}, loading = false } end
        function app.reduce(state, action)
          if action.type == "add" then
            state.todos[#state.todos + 1] = { title = action.title, done = false }
          elseif action.type == "toggle" then
            local todo = state.todos[action.index]
            todo.done = not todo.done
          elseif action.type == "fetch" then
            state.loading = true
            return nil, { luastore.http({ url = "http://127.0.0.1:9/todos", id = "todos", success = "fetched", failure = "fetchFailed" }) }
          elseif action.type == "fetched" then
            state.loading = false
            for _, title in ipairs(action.json) do state.todos[#state.todos + 1] = { title = title, done = false } end
          elseif action.type == "fail" then
            error("refused " .. action.why)
          end
        end
        function app.props(state) return { count = #state.todos } end
        return app
        """

    /// A folder holding the app, removed when the test ends.
    static func makeApp() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("test-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try app.write(to: folder.appendingPathComponent("app.lua"), atomically: true, encoding: .utf8)
        return folder
    }

    /// The stand-in for the app's one request: the todos a server would send.
    static let server: [String: @Sendable (ScriptEffect) async throws -> [LuaValue]] = [
        "http": { effect in
            #expect(effect.httpRequest.url == "http://127.0.0.1:9/todos")
            return [effect.httpResult(.success(URLResponseValue(status: 200, json: .array([.string("Walk"), .string("Read")]))))]
        },
    ]

    @Test func statedStepsPass() async throws {
        let folder = try Self.makeApp()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try await ScriptedTestStore(app: folder, effects: Self.server)
        let title = "Buy milk"
        try await store.send(["type": "add", "title": "\(title)"]) {
            $0["todos"][1] = ["title": "Buy milk", "done": false]
        }
        try await store.send(["type": "toggle", "index": 1]) { $0["todos"][1]["done"] = true }
        try await store.send(["type": "fetch"], commands: [[
            "url": "http://127.0.0.1:9/todos", "id": "todos", "success": "fetched", "failure": "fetchFailed", "kind": "http",
            "method": "GET", "headers": [:],
        ]]) { $0["loading"] = true }
        // (A bound no loaded machine reaches: the action comes as soon as the effect's task runs.)
        try await store.receive(["type": "fetched", "id": "todos", "status": 200, "headers": [:], "body": "", "json": ["Walk", "Read"]],
                                timeout: .seconds(60)) {
            $0["loading"] = false
            $0["todos"][2] = ["title": "Walk", "done": false]
            $0["todos"][3] = ["title": "Read", "done": false]
        }
        let failure = try await store.sendFailing(["type": "fail", "why": "this"])
        #expect(failure.error.message == "refused this")
        try await store.finish(timeout: .seconds(60))
        #expect(store.state["todos"][3]["title"] == "Read")
    }

    @Test func aWrongOrMissingAssertionFailsWithTheDifference() async throws {
        let folder = try Self.makeApp()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try await ScriptedTestStore(app: folder, effects: Self.server)
        let wrong = await #expect(throws: TestStoreFailure.self) {
            try await store.send(["type": "add", "title": "Buy milk"]) { $0["todos"][1] = ["title": "Buy bread", "done": false] }
        }
        #expect(wrong?.message == """
            send {title = "Buy milk", type = "add"}: the state is not what the test says (− expected, + actual):
            − state.todos[1].title = "Buy bread"
            + state.todos[1].title = "Buy milk"
            """)
        #expect(wrong?.place.hasPrefix("LuaStoreTestingTests/ScriptedTestStoreTests.swift:") == true, "\(String(describing: wrong))")
        let missing = await #expect(throws: TestStoreFailure.self) { try await store.send(["type": "toggle", "index": 1]) }
        #expect(missing?.message == """
            send {index = 1, type = "toggle"}: the state is not what the test says (− expected, + actual):
            − state.todos[1].done = false
            + state.todos[1].done = true
            """)
    }

    @Test func unstatedCommandsAndReceivedActionsFail() async throws {
        let folder = try Self.makeApp()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try await ScriptedTestStore(app: folder, effects: Self.server)
        let commands = await #expect(throws: TestStoreFailure.self) { try await store.send(["type": "fetch"]) { $0["loading"] = true } }
        #expect(commands?.message.hasPrefix("send {type = \"fetch\"}: the action returned commands the test has not stated (pass commands:):\n+ {") == true,
                "\(String(describing: commands))")
        let unreceived = await #expect(throws: TestStoreFailure.self) {
            _ = await store.store.waitUntilIdle(timeout: .seconds(60))
            try await store.finish(timeout: .seconds(60))
        }
        #expect(unreceived?.message.hasPrefix("finish: the effects sent actions the test has not received:\n  {") == true,
                "\(String(describing: unreceived))")
        let unexpected = await #expect(throws: TestStoreFailure.self) { try await store.receive(["type": "other"]) }
        #expect(unexpected?.message.hasPrefix("receive: expected {type = \"other\"}, but the effects sent {") == true)
    }

    @Test func nonExhaustiveChecksOnlyWhatIsStated() async throws {
        let folder = try Self.makeApp()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try await ScriptedTestStore(app: folder, exhaustivity: .off, effects: Self.server)
        try await store.send(["type": "add", "title": "Buy milk"]) // nothing stated: nothing checked
        try await store.send(["type": "fetch"]) { $0["loading"] = true } // commands unstated
        // (A bound no loaded machine reaches: the action comes as soon as the effect's task runs.)
        try await store.receive(["type": "fetched", "id": "todos", "status": 200, "headers": [:], "body": "", "json": ["Walk", "Read"]],
                                timeout: .seconds(60)) {
            $0["todos"][3]["title"] = "Read" // only this is checked
        }
        let wrong = await #expect(throws: TestStoreFailure.self) {
            try await store.send(["type": "toggle", "index": 2]) { $0["todos"][2]["done"] = false }
        }
        #expect(wrong?.message == """
            send {index = 2, type = "toggle"}: the state is not what the test says (− expected, + actual):
            − state.todos[2].done = false
            + state.todos[2].done = true
            """)
        try await store.finish(timeout: .seconds(60))
    }
    /// The test store's clock stands still at a known time (2000-01-01 UTC by default, or the one given) until the
    /// test moves it: a reducer that reads `os.time()` is tested as any other.
    @Test func theClockStandsStillUntilTheTestMovesIt() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("test-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try """
            local app = {}
            function app.init() return { created = os.time() } end
            function app.reduce(state, action) state.seen = os.date("!%Y-%m-%d %H:%M", os.time()) end
            function app.props(state) return {} end
            return app
            """.write(to: folder.appendingPathComponent("app.lua"), atomically: true, encoding: .utf8)
        let standing = try await ScriptedTestStore(app: folder)
        #expect(standing.state["created"] == 946_684_800)
        try await standing.send(["type": "look"]) { $0["seen"] = "2000-01-01 00:00" }
        standing.advance(by: 90 * 60)
        try await standing.send(["type": "look"]) { $0["seen"] = "2000-01-01 01:30" }
        standing.now = Date(timeIntervalSince1970: 1_772_357_400)
        try await standing.send(["type": "look"]) { $0["seen"] = "2026-03-01 09:30" }
        let given = try await ScriptedTestStore(app: folder, now: Date(timeIntervalSince1970: 86_400))
        #expect(given.state["created"] == 86_400)
    }
}
