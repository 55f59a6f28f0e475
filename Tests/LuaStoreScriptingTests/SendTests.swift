import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// `await store.send(action)` and `for await props in store.props(as:)`: the async surface of a scripted store.
@Suite(.tags(.concurrency)) struct SendTests {
    static let app = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { count = 0, items = {} } end
        function app.reduce(state, action)
          if action.type == "add" then
            state.count = state.count + action.by
            state.items[#state.items + 1] = action.by
            if action.by > 100 then return nil, { luastore.log("big") } end
          elseif action.type == "fail" then
            state.count = -1
            error("no " .. action.why)
          end
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    struct Props: Decodable, Equatable { var count: Int }

    /// An applied action returns its journal entry — what it changed and its commands — once its props were
    /// delivered; a failing one returns its failure, numbered among the dispatches, and changed nothing.
    @Test func sendReturnsWhatBecameOfThatAction() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        defer { store.shutdown() }
        recorder.observe(store)
        let applied = await store.send(["type": "add", "by": 200])
        let entry = try #require(applied.entry, "\(applied)")
        #expect(entry.changes.map(\.path) == [["count"], ["items", 1]])
        #expect(entry.changes.map(\.value) == [200, 200])
        #expect(entry.commands.count == 1)
        #expect(recorder.props.value.last == ["count": 200], "the props of the state after it were delivered first")
        let failed = await store.send(["type": "fail", "why": "way"])
        let failure = try #require(failed.failure, "\(failed)")
        #expect(failure.error.message == "no way")
        #expect(failure.error.location == "app.lua:11")
        #expect(failure.dispatchIndex == 2)
        #expect(failure.action == ["type": "fail", "why": "way"])
        #expect(try await store.state()["count"] == 200)
    }

    /// Concurrent senders each get their own action's outcome, and every action is applied exactly once.
    @Test func concurrentSendersGetTheirOwnOutcomes() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let outcomes = await withTaskGroup(of: (Int, SendResult).self) { group in
            for by in 1...40 {
                group.addTask {
                    let action: LuaValue = by % 10 == 0 ? ["type": "fail", "why": "\(by)"] : ["type": "add", "by": LuaValue(by)]
                    return (by, await store.send(action))
                }
            }
            var all: [Int: SendResult] = [:]
            for await (by, outcome) in group { all[by] = outcome }
            return all
        }
        #expect(outcomes.count == 40)
        for (by, outcome) in outcomes {
            if by % 10 == 0 {
                #expect(outcome.failure?.error.message == "no \(by)", "\(by): \(outcome)")
            } else {
                let change = outcome.entry?.changes.first { $0.path == ["count"] }
                #expect(outcome.entry?.changes.last?.value == LuaValue(by), "\(by): \(outcome)")
                #expect(change != nil)
            }
        }
        let sequences = outcomes.values.compactMap { $0.entry?.sequence }
        #expect(Set(sequences).count == 36, "each applied action has its own entry")
        let expected = (1...40).filter { $0 % 10 != 0 }.reduce(0, +)
        #expect(try await store.state()["count"] == LuaValue(expected))
    }

    /// A submitted action keeps its place among the dispatches around it (from one thread): what was dispatched
    /// before it is reduced before it, what was dispatched after it, after — and, in a store that journals nothing
    /// else, each submitted action is answered with its own entry, what it changed included.
    @Test func submittedActionsKeepTheirPlaceAmongDispatches() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let answers = Protected<[Int: SendResult]>([:])
        for round in 0..<60 {
            store.dispatch(["type": "add", "by": LuaValue(3 * round + 1)])
            let by = 3 * round + 2
            store.submit(["type": "add", "by": LuaValue(by)]) { result in answers.withLock { $0[by] = result } }
            store.dispatch(["type": "add", "by": LuaValue(3 * round + 3)])
        }
        await store.barrier() // (every submitted action is answered on the store's thread before this turn)
        let state = try await store.state()
        #expect(state["items"] == .table(LuaTable(array: (1...180).map { LuaValue($0) })), "reduced in the order put in line")
        let answered = answers.withLock { $0 }
        #expect(answered.count == 60)
        for (by, result) in answered {
            let entry = try #require(result.entry, "\(by): \(result)")
            #expect(entry.changes.map(\.path) == [["count"], ["items", LuaKey.integer(Int64(by))]], "\(by)")
            #expect(entry.changes.last?.value == LuaValue(by), "\(by)")
        }
    }

    /// While the store stands at a past entry a sent action is held; once the store stopped, it is dropped.
    @Test func heldAndDropped() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        var options = Recorder().options
        options.historyEntries = 10
        let store = try await ScriptedStore(app: folder.url, options: options)
        _ = await store.send(["type": "add", "by": 1])
        _ = await store.send(["type": "add", "by": 2])
        try await store.jump(to: 1)
        guard case .held = await store.send(["type": "add", "by": 3]) else { Issue.record("not held"); return }
        await store.resume()
        #expect(try await store.state()["count"] == 6)
        store.shutdown()
        guard case .dropped = await store.send(["type": "add", "by": 4]) else { Issue.record("not dropped"); return }
    }

    /// The props as an `AsyncSequence`: the current ones, then each distinct new one; equal props are not
    /// delivered again; ending the loop ends the observation.
    @Test func propsAsAnAsyncSequence() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let stream = store.props(as: Props.self, buffering: .unbounded)
        let reader = Task {
            await withinDeadline {
                var seen: [Props] = []
                for await props in stream {
                    seen.append(props)
                    if props.count >= 3 { break }
                }
                return seen
            }
        }
        for by in [1, 0, 2] {
            _ = await store.send(["type": "add", "by": LuaValue(by)])
        }
        let seen = await reader.value
        #expect(seen == [Props(count: 0), Props(count: 1), Props(count: 3)])
        let raw = store.props(as: LuaValue.self)
        let current = await withinDeadline {
            var iterator = raw.makeAsyncIterator()
            return await iterator.next()
        }
        #expect(current == ["count": 3])
    }
}
