import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Budgets count CPU time, and the calls that build a whole state have one of their own
/// (`LuaLimits.stateBuildingTimeBudget`, 2 s): an app whose `init` builds 100,000 items loads with the default
/// limits (200 ms per action) — beside two busy loops too, where it failed 5 times in 5 when the budget was 200 ms
/// of the wall clock (`suite-under-load` runs it so; busy threads of its own here starved the rest of the suite);
/// its actions keep the action budget.
@Suite struct StateBuildingBudgetTests {
    static let app = """
        local app = {}
        function app.init()
          local items = {}
          for i = 1, 100000 do items[i] = { id = i, title = "item " .. i, done = false } end
          return { items = items }
        end
        function app.reduce(state, action)
          if action.type == "toggle" then state.items[action.id].done = not state.items[action.id].done end
          if action.type == "spin" then while true do end end
        end
        function app.props(state) return { count = #state.items } end
        return app
        """

    @Test func aBigInitLoadsWithTheDefaultBudgets() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.limits = LuaLimits()
        #expect(options.limits.timeBudget == .milliseconds(200))
        #expect(options.limits.stateBuildingTimeBudget == .seconds(2))
        let loaded = try await ScriptedStore(app: folder.url, options: options)
        defer { loaded.shutdown() }
        #expect(try await loaded.props() == ["count": 100_000])
        #expect(await loaded.send(["type": "toggle", "id": 7]).failure == nil)
        // An endless action spends its whole budget, not the state's (an app of its own, a small one: one big
        // load in this test is enough to hold against a loaded machine).
        let small = try AppFolder(["app.lua": Self.app.replacingOccurrences(of: "for i = 1, 100000 do", with: "for i = 1, 10 do")])
        defer { small.remove() }
        options.limits.timeBudget = .milliseconds(50)
        let store = try await ScriptedStore(app: small.url, options: options)
        defer { store.shutdown() }
        let spin = await store.send(["type": "spin"])
        #expect(spin.failure?.error.message.contains("time budget of 50 ms exceeded") == true, "actions keep theirs")
    }
}
