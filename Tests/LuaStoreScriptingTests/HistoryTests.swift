import Foundation
import LuaKit
import LuaStoreCore
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Time travel on a scripted store: jump, resume, rewind and the state at any kept entry — with a command in
/// flight, actions held while traveling, and subscriptions diffed again after a rewind.
@Suite struct HistoryTests {
    static let app = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action)
          if action.type == "increment" then state.count = state.count + 1
          elseif action.type == "later" then return nil, { luastore.delay(1.5, { type = "done" }) }
          elseif action.type == "done" then state.done = true
          elseif action.type == "poll" then state.polling = true
          elseif action.type == "tick" then state.ticks = (state.ticks or 0) + 1
          end
        end
        function app.props(state) return { count = state.count, done = state.done or false } end
        function app.subscriptions(state)
          if state.polling then return { poll = luastore.timer(30, { type = "tick" }) } end
          return {}
        end
        return app
        """

    @Test(.tags(.concurrency)) func jumpHoldsActionsResumeReplaysThemAndRewindGoesOnFromThePast() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let recorder = Recorder()
        var options = recorder.options
        options.historyEntries = 100
        options.notification = .everyAction
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        recorder.observe(store)
        for _ in 1...5 { store.dispatch(["type": "increment"]) }
        store.dispatch(["type": "later"]) // 6: a command in flight (1.5 s)
        await store.barrier()
        #expect(try await store.props()["count"] == 5)
        let (kept, at) = await store.history()
        #expect(Array(kept.prefix(6)) == [1, 2, 3, 4, 5, 6] && kept.count <= 7, "\(kept)")
        #expect(at == kept.last)

        try await store.jump(to: 2)
        await store.barrier()
        #expect(recorder.props.withLock { $0.last?["count"] } == 2, "observers get that point's props")
        // (A machine stalled past the delay before the jump has "done" in already, as entry 7: then only the
        // increment is held. From the jump on, whatever arrives is held.)
        let early = await store.history().kept.count == 7
        store.dispatch(["type": "increment"]) // held
        let held = await eventually(timeout: .seconds(30)) { await store.travelStatus().held == (early ? 1 : 2) }
        #expect(held, "the delay's \"done\" arrives: held too")
        #expect(try await store.props() == ["count": 2, "done": false])
        #expect(try await store.state(at: 4)["count"] == 4)
        #expect(try await store.state()["count"] == 2, "the state at another entry leaves the store where it is")

        await store.resume()
        await store.barrier()
        let resumed = try await store.props()
        #expect(resumed == ["count": 6, "done": true], "the present, then the held actions in order: \(resumed)")

        store.dispatch(["type": "poll"])
        await store.barrier()
        #expect(await store.root.runningSubscriptions().keys.sorted() == ["poll"])
        let poll = (await store.history()).kept.last!
        try await store.rewind(to: 3)
        await store.barrier()
        #expect(try await store.props() == ["count": 3, "done": false])
        #expect((await store.history()).kept == [1, 2, 3])
        #expect(poll > 3)
        try await Task.sleep(for: .milliseconds(50))
        #expect(await store.root.runningSubscriptions().isEmpty, "subscriptions diffed again from the past state")
        store.dispatch(["type": "increment"])
        await store.barrier()
        #expect(try await store.props()["count"] == 4)
        #expect((await store.history()).kept.count == 4)
        await #expect(throws: ScriptFailure.self) { try await store.jump(to: 2_000) }
    }

    /// Going back 1,000 entries costs what they changed, not the state's size: the same Lua work at 1,000 and
    /// at 20,000 items (to within 10 %: a jump also empties the proxy caches, which hold up to 512 proxies more or
    /// less depending on where the store cut its runs of actions; a walk of the state would cost 20 times more).
    /// An action held while the store is at a past entry keeps the number of its dispatch when `resume()`
    /// applies it: a failure reports it as the n-th dispatch, as the journal numbers it, not once per time it
    /// went through the store.
    /// The app in a store keeping `historyEntries`.
    static func open(historyEntries: Int) async throws -> (AppFolder, ScriptedStore) {
        let folder = try AppFolder(["app.lua": Self.app])
        var options = Recorder().options
        options.historyEntries = historyEntries
        do {
            return (folder, try await ScriptedStore(app: folder.url, options: options))
        } catch {
            folder.remove()
            throw error
        }
    }

    /// `waitUntilIdle` waits for held actions too: while time travel holds an action the store is not idle (the
    /// wait runs out and answers false); once `resume()` reduced it, it is.
    @Test func waitingUntilIdleWaitsForHeldActions() async throws {
        let (folder, store) = try await Self.open(historyEntries: 10)
        defer { folder.remove(); store.shutdown() }
        let first = try #require(await store.send(["type": "increment"]).entry?.sequence)
        _ = await store.send(["type": "increment"])
        try await store.jump(to: first)
        store.dispatch(["type": "increment"])
        #expect(await store.waitUntilIdle(timeout: .milliseconds(50)) == false, "an action is held")
        #expect(await store.travelStatus().held == 1)
        await store.resume()
        #expect(await store.waitUntilIdle(timeout: .seconds(30)))
        #expect(try await store.state()["count"] == 3)
    }

    @Test func heldActionsKeepTheirDispatchIndex() async throws {
        let folder = try AppFolder(["app.lua": Self.app.replacingOccurrences(
            of: "elseif action.type == \"done\"", with: "elseif action.type == \"boom\" then error(\"boom\")\n  elseif action.type == \"done\"")])
        defer { folder.remove() }
        let recorder = Recorder()
        var options = recorder.options
        options.historyEntries = 100
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        for _ in 0..<4 { store.dispatch(["type": "increment"]) }
        #expect(await store.waitUntilIdle(timeout: .seconds(30)))
        try await store.jump(to: 2)
        store.dispatch(["type": "boom"])
        await store.barrier()
        await store.resume()
        store.dispatch(["type": "boom"])
        #expect(await store.waitUntilIdle(timeout: .seconds(30)))
        #expect(await eventually { recorder.failures.value.count == 2 })
        #expect(recorder.failures.value.map(\.dispatchIndex) == [5, 6])
        #expect(try await store.props() == ["count": 4, "done": false])
    }

    /// Right after `resume()` and a dispatch, `waitUntilIdle` waits for the held action and the new one.
    @Test(.tags(.concurrency)) func waitUntilIdleAfterResumeWaitsForHeldActions() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        var options = Recorder().options
        options.historyEntries = 100
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        store.dispatch(["type": "increment"])
        #expect(await store.waitUntilIdle(timeout: .seconds(30)))
        var expected: Int64 = 1
        for _ in 0..<40 {
            try await store.jump(to: 1)
            store.dispatch(["type": "increment"])
            await store.resume()
            store.dispatch(["type": "increment"])
            expected += 2
            #expect(await store.waitUntilIdle(timeout: .seconds(30)))
            let count = try await store.state()["count"].integer
            #expect(count == expected)
            if count != expected { break }
        }
    }

    @Test func jumpingBackCostsWhatChangedNotTheStateSize() async throws {
        func instructions(items: Int) async throws -> Int {
            let folder = try AppFolder(["app.lua": """
                local app = {}
                function app.init()
                  local items = {}
                  for i = 1, \(items) do items[i] = { done = false } end
                  return { items = items }
                end
                function app.reduce(state, action) local item = state.items[action.id]; item.done = not item.done end
                function app.props(state) return { n = #state.items } end
                return app
                """])
            defer { folder.remove() }
            var options = Recorder().options
            options.limits.timeBudget = .seconds(20)
            options.historyEntries = 2_000
            let store = try await ScriptedStore(app: folder.url, options: options)
            defer { store.shutdown() }
            for index in 0..<1_000 { store.dispatch(["type": "toggle", "id": .integer(Int64(index * 37 % items + 1))]) }
            await store.barrier()
            let counted = await withCheckedContinuation { continuation in
                store.thread.async {
                    let work = try? store.engine.vm.countingInstructions { () throws(ScriptFailure) in try store.engine.jump(to: 1) }
                    continuation.resume(returning: work?.instructions ?? -1)
                }
            }
            #expect(try await store.state(at: 1000)["items"][.integer(Int64(999 * 37 % items + 1))]["done"] == true)
            return counted
        }
        let small = try await instructions(items: 1_000)
        let large = try await instructions(items: 20_000)
        #expect(small > 0)
        #expect(abs(small - large) * 10 <= small, "\(small) vs \(large) instructions")
    }

    /// The history keeps its bounds: the newest entries, at most `historyEntries`, within about `historyBytes`
    /// (the newest always stays); a jump to a dropped entry says which are kept.
    @Test func theHistoryKeepsItsBounds() async throws {
        let (folder, store) = try await Self.open(historyEntries: 5)
        defer { folder.remove(); store.shutdown() }
        for _ in 1...8 { store.dispatch(["type": "increment"]) }
        await store.barrier()
        #expect((await store.history()).kept == [4, 5, 6, 7, 8])
        try await store.jump(to: 4)
        #expect(try await store.props()["count"] == 4)
        await store.resume()
        do {
            try await store.jump(to: 3)
            Issue.record("entry 3 was dropped")
        } catch {
            #expect(error.error.message == "journal entry 3 is not in the history: entries from 4 on are kept")
        }

        // Each increment is one change: an entry of 128 estimated bytes; 300 bytes hold two.
        var options = Recorder().options
        options.historyEntries = 100
        options.historyBytes = 300
        let small = try await ScriptedStore(app: folder.url, options: options)
        defer { small.shutdown() }
        for _ in 1...6 { small.dispatch(["type": "increment"]) }
        await small.barrier()
        #expect((await small.history()).kept == [5, 6])
        try await small.jump(to: 5)
        #expect(try await small.state()["count"] == 5)
    }

    /// Every kept point is exactly the state the journal says, whichever way the barrier read the changes (short
    /// journals in C, long ones in Lua), in runs or one at a time: moves, removals that shift a list, writes
    /// that put a value back, failures; checked by going to each point in a shuffled order, then back.
    @Test func everyKeptPointIsTheStateTheJournalSays() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { items = {}, n = 0, nested = { a = { b = 1 } } } end
            function app.reduce(state, action)
              local kind, i = action.type, action.i
              if kind == "add" then state.items[#state.items + 1] = { v = action.v, tags = {} }
              elseif kind == "bump" then local item = state.items[i]; if item then item.v = item.v + 1; item.v = item.v + 1 end
              elseif kind == "remove" then table.remove(state.items, i)
              elseif kind == "same" then state.n = state.n + 1; state.n = state.n - 1
              elseif kind == "swap" then local a = state.nested.a; state.nested.a = { b = action.v }; state.nested.c = a
              elseif kind == "tag" then local item = state.items[i]; if item then item.tags[#item.tags + 1] = action.v end
              elseif kind == "many" then for k = 1, 40 do state.n = state.n + k end
              elseif kind == "fail" then state.n = 99; error("no")
              end
            end
            function app.props(state) return { n = state.n } end
            return app
            """])
        defer { folder.remove() }
        let heard = Protected<[JournalEntry]>([])
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.historyEntries = 1_000
        options.journal = { entry in heard.withLock { $0.append(entry) } }
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        var random = SplitMix(state: 7)
        let kinds = ["add", "add", "bump", "remove", "same", "swap", "tag", "many", "fail"]
        func action() -> LuaValue {
            ["type": .string(kinds[Int(random.next() % UInt64(kinds.count))]), "i": .integer(Int64(random.next() % 6 + 1)),
             "v": .integer(Int64(random.next() % 100))]
        }
        var states: [UInt64: LuaValue] = [:]
        var state = try await store.state()
        for _ in 0..<60 { // one at a time
            store.dispatch(action())
            await store.barrier()
        }
        for _ in 0..<4 { // in runs
            for _ in 0..<30 { store.dispatch(action()) }
            await store.barrier()
        }
        for entry in heard.withLock({ $0 }) {
            for change in entry.changes { JournalTests.apply(change, to: &state) }
            states[entry.sequence] = state
        }
        #expect(states.count == 180)
        #expect(try await store.state() == state, "now")
        var order = Array(states.keys)
        for index in order.indices.reversed() { order.swapAt(index, Int(random.next() % UInt64(index + 1))) }
        for sequence in order.prefix(60) {
            do {
                let at = try await store.state(at: sequence)
                #expect(at == states[sequence], "entry \(sequence)")
            } catch {
                Issue.record("entry \(sequence): \(error)")
                break
            }
        }
        try await store.jump(to: order[0])
        #expect(try await store.state() == states[order[0]])
        await store.resume()
        #expect(try await store.state() == state)
    }
}
