import Foundation
import LuaKit
import LuaStoreConcurrency
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Whole states a function returns — `init`'s, a reducer's new state — are placed at once when they are all new
/// data (`B.placefresh`), and by the walk every stored table goes through otherwise: the two ways agree on the
/// state they make, on what they refuse and on the tables the maker kept.
extension JournalTests {
    static let wholeStateCases = """
        local kept
        local function make(n)
          local items = {}
          for i = 1, n do items[i] = { id = i, title = "item " .. i, done = false, tags = { "t" .. i, i % 2 == 0 } } end
          items[n + 2] = { id = "after a hole" }
          return { items = items, count = n, map = { [true] = "yes", [1.5] = -0.0, [7] = 2^53, ["ünï"] = { {}, { x = 1 } } } }
        end
        cases.whole = function(state, action) kept = make(action.n) return kept end
        cases.written = function(state, action) for key, value in pairs(make(action.n)) do state[key] = value end end
        cases.clear = function(state) for key in pairs(state) do state[key] = nil end end
        cases.pokeKept = function(state) kept.items[2].done = true end
        cases.readKept = function(state) state.count = #kept.items end
        cases.toggle = function(state, action) local item = state.items[action.id]; item.done = not item.done end
        cases.alias = function(state) state.map.first = state.items[1] end
        cases.fn = function(state) return { count = 1, deep = { { print } } } end
        cases.twice = function(state) local t = {} return { list = { t, t } } end
        cases.meta = function(state) return { list = { setmetatable({}, {}) } } end
        cases.bytes = function(state) return { list = { ["\\255"] = 1 } } end
        cases.inf = function(state) return { list = { 1, math.huge } } end
        cases.deep = function(state)
          local top = {}
          local t = top
          for _ = 1, 200 do t.next = {} t = t.next end
          return top
        end
        cases.mixed = function(state) return { items = state.items, fresh = { n = 1 }, count = 0 } end
        """

    /// A state a reducer returns whole is the state its maker built — the same, value for value, as the one
    /// stored key by key through the barrier — at a size where the proxy caches are renewed (1,000 items) and one
    /// where they are not (3); what the maker kept of it is refused in a later call, the write rolled back.
    @Test(arguments: [3, 1_000]) func aWholeNewStateIsTheStateItsMakerBuilt(items: Int) async throws {
        try await withEngine(Self.wholeStateCases) { engine in
            _ = try engine.reduce(["type": "clear"])
            _ = try engine.reduce(["type": "written", "n": .integer(Int64(items))])
            let written = try engine.state()
            _ = try engine.reduce(["type": "clear"])
            _ = try engine.reduce(["type": "whole", "n": .integer(Int64(items))])
            let whole = try engine.state()
            #expect(whole == written)
            #expect(whole["items"].table?.count == items + 1)
            #expect(whole["items"][.integer(Int64(items + 2))]["id"] == "after a hole")
            #expect(whole["map"][.number(1.5)].number?.sign == .minus)
            #expect(whole["map"]["ünï"][2]["x"] == 1)
            for type in ["pokeKept", "readKept"] {
                let failure = try Self.refusal(engine, ["type": .string(type)])
                #expect(failure?.message.hasPrefix("a state table kept from an earlier call was used") == true, "\(type): \(String(describing: failure))")
                #expect(failure?.location == "app.lua:\(type == "pokeKept" ? 12 : 13)", "\(type)")
            }
            // The tables of the placed state are reached, recorded and journaled as any other.
            let heard = Protected<[JournalEntry]>([])
            engine.changeListeners { $0.journal = { entry in heard.withLock { $0.append(entry) } } }
            _ = try engine.reduce(["type": "toggle", "id": 2])
            #expect(heard.value.last?.changes.map(\.path) == [["items", 2, "done"]])
            let alias = try Self.refusal(engine, ["type": "alias"])
            #expect(alias?.message.contains("a table can be in one place of the state only") == true, "\(alias?.message ?? "no failure")")
        }
    }

    /// What a write is refused for, a returned state is refused for, naming the place and the reducer's line;
    /// the state stays as it was. A returned state that moves tables of the state is placed as before.
    @Test func aReturnedStateIsRefusedForWhatAWriteIsRefusedFor() async throws {
        try await withEngine(Self.wholeStateCases) { engine in
            _ = try engine.reduce(["type": "whole", "n": 3])
            let expected: [(String, String)] = [
                ("fn", "state.deep[1][1]: a function cannot be stored in the state"),
                ("twice", "state.list[2]: the same table is in two places of the value stored"),
                ("meta", "state.list[1]: a table with a metatable cannot be stored in the state"),
                ("bytes", "state.list: a key that is not UTF-8 text (\"\\255\") cannot be in the state"),
                ("inf", "state.list[2]: inf cannot be stored in the state"),
                ("deep", "tables in the state nest at most 200 levels deep (this would be level 201"),
            ]
            for (type, message) in expected {
                let failure = try Self.refusal(engine, ["type": .string(type)])
                #expect(failure?.message.contains(message) == true, "\(type): \(failure?.message ?? "no failure")")
                #expect(failure?.message.hasPrefix("the state reduce returned: ") == true, "\(type): \(failure?.message ?? "no failure")")
            }
            let before = try engine.state()
            _ = try engine.reduce(["type": "mixed"])
            let mixed = try engine.state()
            #expect(mixed["items"] == before["items"])
            #expect(mixed["fresh"] == ["n": 1])
            #expect(mixed["count"] == 0)
        }
    }
}
