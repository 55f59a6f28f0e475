import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// State is data (the barrier's refusals and the one-place rule) and the session journal (each action's
/// changes, exact; the recording's lossless values).
@Suite struct JournalTests {
    /// An engine over `app.lua` (a reducer dispatching on `action.type` to the functions in `cases`), on a
    /// thread of its own; `body` runs there (the test awaits it: no thread of the cooperative pool is held).
    func withEngine(_ cases: String, initial: String = "{ list = {}, map = {}, count = 0 }",
                    budget: Duration = .seconds(5), _ body: @escaping @Sendable (ScriptEngine) throws -> Void) async throws {
        let folder = try AppFolder(["app.lua": """
            local app, cases = {}, {}
            \(cases)
            function app.init() return \(initial) end
            function app.reduce(state, action) return cases[action.type](state, action) end
            function app.props(state) return {} end
            return app
            """])
        defer { folder.remove() }
        let thread = LuaThread(name: "journal-test")
        let url = folder.url
        var limits = LuaLimits()
        limits.timeBudget = budget // (a 20,000-item init on a loaded machine is not what these tests time)
        let result: Result<Void, any Error> = await withCheckedContinuation { [limits] continuation in
            thread.async {
                continuation.resume(returning: Result {
                    let engine = try ScriptEngine(folder: url, thread: thread, limits: limits, log: { _ in }, report: { _ in })
                    try body(engine)
                })
            }
        }
        try result.get()
    }

    /// The failure of `action`, after checking that it left the state exactly as it was.
    static func refusal(_ engine: ScriptEngine, _ action: LuaValue) throws -> LuaError? {
        let before = try engine.state()
        var failure: LuaError?
        do {
            _ = try engine.reduce(action)
        } catch {
            failure = error as? LuaError ?? (error as? ScriptFailure)?.error
        }
        #expect(try engine.state() == before, "rolled back: \(action)")
        return failure
    }

    @Test func valuesThatAreNotDataAreRefusedAtTheWrite() async throws {
        try await withEngine("""
            cases.fn = function(state) state.count = 1; state.callback = function() end end
            cases.nan = function(state) state.count = 0/0 end
            cases.inf = function(state) state.count = math.huge end
            cases.ninf = function(state) state.map.low = -math.huge end
            cases.nested = function(state) state.list[1] = { title = "a", tags = { print } } end
            cases.tablekey = function(state) state.map[{}] = true end
            cases.infkey = function(state) state.map[math.huge] = 1 end
            cases.meta = function(state) state.map.m = setmetatable({}, {}) end
            cases.twice = function(state) local t = {}; state.map.pair = { t, t } end
            cases.ok = function(state) state.map[true] = "yes"; state.map[5] = 1.5; state.map[2.5] = {}; state.count = 0; state.count = -0.0 end
            """) { engine in
            let expected: [(String, String, Int)] = [
                ("fn", "state.callback: a function cannot be stored in the state", 2),
                ("nan", "state.count: NaN cannot be stored in the state", 3),
                ("inf", "state.count: inf cannot be stored in the state", 4),
                ("ninf", "state.map.low: -inf cannot be stored in the state", 5),
                ("nested", "state.list[1].tags[1]: a function cannot be stored in the state", 6),
                ("tablekey", "state.map: a table cannot be a key in the state", 7),
                ("infkey", "state.map: inf cannot be a key in the state", 8),
                ("meta", "state.map.m: a table with a metatable cannot be stored in the state", 9),
                ("twice", "state.map.pair[2]: the same table is in two places of the value stored", 10),
            ]
            for (type, message, line) in expected {
                let failure = try Self.refusal(engine, ["type": .string(type)])
                #expect(failure?.message.hasPrefix(message) == true, "\(type): \(failure?.message ?? "no failure")")
                #expect(failure?.location == "app.lua:\(line)", "\(type)")
            }
            #expect(try Self.refusal(engine, ["type": "fn"])?.message.hasSuffix("(the state holds only data: UTF-8 strings, booleans, finite numbers and tables of those)") == true)
            _ = try engine.reduce(["type": "ok"])
            let state = try engine.state()
            #expect(state["map"][.boolean(true)] == "yes")
            #expect(state["map"][5] == .number(1.5))
            #expect(state["map"][.number(2.5)] == .table(LuaTable()))
            #expect(state["count"] == .number(-0.0) && state["count"].number?.sign == .minus, "Lua stores -0.0 over 0: \(state["count"])")
        }
    }

    @Test func aTableIsInOnePlaceOnlyAndMovesAreFine() async throws {
        try await withEngine("""
            cases.fill = function(state) for i = 1, 5 do state.list[i] = { id = i } end end
            cases.alias = function(state) state.map.first = state.list[1] end
            cases.self = function(state) state.map.me = state.map end
            cases.root = function(state) state.map.root = state end
            cases.raw = function(state) local t = { n = 1 }; state.map.a = t; state.map.b = t end
            cases.cycle = function(state) local a = state.map; state.map = nil; a.again = a; state.other = a end
            cases.twice = function(state) local t = state.list[1]; state.list[1] = nil; state.map.a = t; state.map.b = t end
            cases.copyover = function(state) state.list[2] = state.list[1] end
            cases.intoself = function(state) state.list[1] = state.list end
            cases.intochild = function(state) state.list[1].inner = { x = 1 }; state.list[1].inner = state.list end
            cases.shiftback = function(state)
              local list = state.list
              table.insert(list, 1, table.remove(list)); table.insert(list, table.remove(list, 1)) -- (back as they were)
            end
            cases.remove = function(state) table.remove(state.list, 2); table.insert(state.list, 1, { id = 0 }) end
            cases.sort = function(state) table.sort(state.list, function(a, b) return a.id > b.id end) end
            cases.filter = function(state)
              local kept = {}
              for _, item in ipairs(state.list) do if item.id % 2 == 1 then kept[#kept + 1] = item end end
              state.list = kept
            end
            cases.move = function(state) state.map.first = state.list[1]; state.list[1] = state.list[#state.list]; state.list[#state.list] = nil end
            cases.fresh = function(state) return { list = state.list, map = state.map, count = state.count + 1 } end
            """) { engine in
            _ = try engine.reduce(["type": "fill"])
            for (type, message) in [
                ("alias", "after the action, one table is both at state.map.first and at state.list[1]"),
                ("self", "state.map.me: a table cannot be stored inside itself"),
                ("root", "state.map.root: a table cannot be stored inside itself"),
                ("raw", "after the action, one table is both at state.map.b and at state.map.a"),
                ("cycle", "after the action, one table is both at state.other and at state.other.again"),
                ("twice", "after the action, one table is both at state.map.b and at state.map.a"),
                ("copyover", "after the action, one table is both at state.list[2] and at state.list[1]"),
                ("intoself", "state.list[1]: a table cannot be stored inside itself"),
                ("intochild", "state.list[1].inner: a table cannot be stored inside itself"),
            ] {
                let failure = try Self.refusal(engine, ["type": .string(type)])
                #expect(failure?.message.hasPrefix(message) == true, "\(type): \(failure?.message ?? "no failure")")
            }
            for type in ["shiftback", "remove", "sort", "filter", "move", "fresh"] {
                _ = try engine.reduce(["type": .string(type)])
            }
            let state = try engine.state()
            #expect(state["list"] == [["id": 1], ["id": 3]], "\(state)")
            #expect(state["map"]["first"] == ["id": 5])
            #expect(state["count"] == 1)
        }
    }

    /// Sets `value` at `path` in `state` (the whole state for an empty path).
    static func apply(_ change: StateChange, to state: inout LuaValue) {
        func set(_ value: inout LuaValue, _ path: ArraySlice<LuaKey>) {
            guard let key = path.first else {
                value = change.value ?? .nil
                return
            }
            guard var table = value.table else { Issue.record("no table at \(change.path)"); return }
            var inner = table[key]
            set(&inner, path.dropFirst())
            table[key] = inner
            value = .table(table)
        }
        set(&state, change.path[...])
    }

    /// A random program of table operations, chosen by each action's seed: inserts, removes, sorts and moves of
    /// tables, writes of scalars, keys that appear and go, and (when the action says so) a failure at the end.
    static let editProgram = #"""
            local function pick(t)
              local keys = {}
              for k in pairs(t) do keys[#keys + 1] = k end
              table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
              return keys[math.random(1, math.max(1, #keys))]
            end
            cases.edit = function(state, action)
              math.randomseed(action.seed)
              for step = 1, action.steps do
                local kind = math.random(1, action.grow and 13 or 12)
                local list = state.list
                if kind == 1 then table.insert(list, { n = step, tags = { "t" .. step } })
                elseif kind == 2 and #list > 0 then table.remove(list, math.random(1, #list))
                elseif kind == 3 and #list > 0 then list[math.random(1, #list)].n = step * 10
                elseif kind == 4 then state.map["k" .. math.random(1, 6)] = math.random(1, 3) == 1 and nil or { v = step }
                elseif kind == 5 then
                  local key = pick(state.map)
                  if key ~= nil and type(state.map[key]) == "table" then state.map[key].v = -step end
                elseif kind == 6 and #list > 1 then table.sort(list, function(a, b) return a.n > b.n end)
                elseif kind == 7 then state.count = state.count + 0.5
                elseif kind == 8 and #list > 0 then table.insert(list[math.random(1, #list)].tags, "x" .. step)
                elseif kind == 9 then
                  local moved = state.list
                  state.list = nil
                  state.nested = { list = moved }
                  state.list = state.nested.list
                  state.nested.list = nil
                elseif kind == 10 then state.map[math.random(1, 3)] = step % 2 == 0
                elseif kind == 11 then state.map[step % 2 == 0] = { step }
                elseif kind == 12 and action.fail and step >= action.failFrom then error("fails on purpose")
                elseif kind == 13 then table.insert(list, 1, { n = step, tags = {} }) -- (shifts every item: a move each)
                end
              end
            end
            """#

    /// Runs `rounds` generated actions of up to `steps` steps each through `editProgram`: after every action, the
    /// previous state with the action's changes applied is the real state, and a failing action has no changes
    /// and left the state as it was.
    func checkEditsAgainstTheState(seed: UInt64, rounds: Int, steps: UInt64, long: Bool = false) async throws {
        try await withEngine(Self.editProgram, budget: .seconds(120)) { engine in
            engine.changeListeners { $0.journal = { _ in } }
            var heard: [JournalEntry] = []
            let streamed = Protected<[JournalEntry]>([])
            engine.changeListeners { $0.journal = { entry in streamed.withLock { $0.append(entry) } } }
            var generator = SplitMix(state: seed)
            var previous = try engine.state()
            for round in 0..<rounds {
                let fail = long ? round % 3 == 2 : generator.next() % 7 == 0
                let count = Int64(generator.next() % steps + 1)
                let action: LuaValue = ["type": "edit", "seed": .integer(Int64(generator.next() % 1_000_000)),
                                        "steps": .integer(count), "fail": .boolean(fail),
                                        "failFrom": .integer(long ? count / 2 : 0), "grow": .boolean(long)]
                _ = try? engine.reduce(action)
                heard = streamed.withLock { $0 }
                let entry = try #require(heard.last)
                #expect(entry.sequence == UInt64(round + 1))
                #expect(entry.action == action)
                let now = try engine.state()
                if entry.failure != nil {
                    #expect(entry.changes.isEmpty)
                    #expect(now == previous)
                } else {
                    var applied = previous
                    for change in entry.changes { Self.apply(change, to: &applied) }
                    #expect(applied == now, "seed \(seed), round \(round): \(entry.changes)")
                }
                previous = now
            }
            #expect(heard.count == rounds)
            #expect(heard.contains { $0.failure != nil } && heard.contains { !$0.changes.isEmpty })
            if long { #expect(heard.contains { $0.changes.count > 200 }, "some transactions were long: \(heard.map(\.changes.count))") }
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func applyingEachEntrysChangesGivesTheRealState(seed: UInt64) async throws {
        try await checkEditsAgainstTheState(seed: seed, rounds: 60, steps: 30)
    }

    /// The same for long transactions (up to 2,500 steps, inserting at the front of a growing list of tables:
    /// thousands of writes and moves, past the length from which the journal keeps each place once), every third
    /// failing halfway or later: what each action changed, and what a failing one undid, stay exact.
    @Test(arguments: [21, 22] as [UInt64])
    func longTransactionsStayExact(seed: UInt64) async throws {
        try await checkEditsAgainstTheState(seed: seed, rounds: 10, steps: 2_500, long: true)
    }

    /// A transaction may write as often as Lua lets it: a field written a million times, and a list of 2,000
    /// numbers or of 2,000 tables drained with `table.remove(list, 1)` (two million shifting writes, or moves),
    /// are applied (the journal kept every write, and ran out of memory), and undone exactly when the action
    /// fails at its end.
    @Test func aTransactionMayWriteAsOftenAsLuaLetsIt() async throws {
        try await withEngine("""
            cases.fill = function(state)
              for i = 1, 2000 do state.list[i] = i; state.map[i] = { id = i } end
            end
            cases.spin = function(state, action)
              for _ = 1, 1000000 do state.count = state.count + 1 end
              if action.fail then error("fails after spinning") end
            end
            cases.drain = function(state, action)
              local sum = 0
              while #state.list > 0 do sum = sum + table.remove(state.list, 1) end
              while #state.map > 0 do sum = sum + table.remove(state.map, 1).id end
              state.count = sum
              if action.fail then error("fails after draining") end
            end
            """, budget: .seconds(120)) { engine in
            _ = try engine.reduce(["type": "fill"])
            let filled = try engine.state()
            #expect(try Self.refusal(engine, ["type": "spin", "fail": true])?.message.hasSuffix("fails after spinning") == true)
            #expect(try Self.refusal(engine, ["type": "drain", "fail": true])?.message.hasSuffix("fails after draining") == true)
            #expect(try engine.state() == filled)
            _ = try engine.reduce(["type": "spin"])
            #expect(try engine.state()["count"] == 1_000_000)
            _ = try engine.reduce(["type": "drain"])
            let drained = try engine.state()
            #expect(drained["count"] == .integer(2 * (2000 * 2001 / 2)))
            #expect(drained["list"] == .table(LuaTable()) && drained["map"] == .table(LuaTable()))
        }
    }

    /// Actions that only write strings, booleans and numbers over ones (the barrier keeps those writes as it makes
    /// them and writes their changes without reading the journal back): a key written again, or put back as it
    /// was, counts once or not at all; an integer written as a float (and 0.0 as -0.0) is a change; long strings
    /// made anew with the same text are not; `t[1.0]` is `t[1]`; deep paths are named in full; past 16 writes the
    /// journal is read back as before. Applying each entry's changes gives the real state, for single actions and
    /// for runs of them.
    @Test(arguments: [11, 12, 13, 14] as [UInt64])
    func scalarWritesAreJournaledExactly(seed: UInt64) async throws {
        try await withEngine(#"""
            cases.scalars = function(state, action)
              math.randomseed(action.seed)
              for step = 1, action.steps do
                local item = state.list[math.random(1, 6) + 0.0] -- (`t[2.0]` is `t[2]`, in paths too)
                local kind = math.random(1, 10)
                if kind == 1 then item.n = math.random(0, 4)
                elseif kind == 2 then item.n = item.n + 0.0
                elseif kind == 3 then item.n = math.tointeger(item.n) or item.n
                elseif kind == 4 then item.s = string.rep("long text ", 5) .. math.random(1, 2)
                elseif kind == 5 then local old = item.f; item.f = step + 0.25; item.f = old
                elseif kind == 6 then item.deep.x.y = math.random(1, 3)
                elseif kind == 7 then state.map[1.0] = math.random(1, 2) == 1
                elseif kind == 8 then state.count = (1 / state.count > 0) and -0.0 or 0.0
                elseif kind == 9 then state.map.k = "é" .. math.random(1, 3)
                else item.f = item.f * 2; item.f = item.f / 2 + 1 end
              end
            end
            cases.bytes = function(state) state.list[2].s = "\255\254 not utf-8" end
            """#, initial: """
            (function()
              local list = {}
              for i = 1, 6 do list[i] = { n = i, s = "s", f = 0.5, deep = { x = { y = 0 } } } end
              return { list = list, map = { [1] = true, k = "é" }, count = 0.0 }
            end)()
            """) { engine in
            let streamed = Protected<[JournalEntry]>([])
            engine.changeListeners { $0.journal = { entry in streamed.withLock { $0.append(entry) } } }
            var generator = SplitMix(state: seed)
            var previous = try engine.state()
            func action() -> LuaValue {
                ["type": "scalars", "seed": .integer(Int64(generator.next() % 1_000_000)), "steps": .integer(Int64(generator.next() % 20 + 1))]
            }
            for round in 0..<80 {
                let actions = round % 2 == 0 ? [action()] : [action(), action(), action()]
                let before = streamed.withLock { $0.count }
                if actions.count == 1 { _ = try engine.reduce(actions[0]) } else { _ = engine.reduce(run: actions[...]) }
                let entries = streamed.withLock { Array($0[before...]) }
                #expect(entries.count == actions.count)
                var applied = previous
                for entry in entries {
                    #expect(entry.failure == nil)
                    for change in entry.changes { Self.apply(change, to: &applied) }
                    // As written: a key read as `2.0` is named as the state holds it, `2`.
                    guard let encoded = entry.encodedChanges else { continue }
                    for change in try RecordingJSON.decode(text: String(decoding: encoded, as: UTF8.self)[...]).table?.array ?? [] {
                        #expect(change.table?.array.first?.table?.array.allSatisfy { key in if case .number = key { false } else { true } } == true, "\(change)")
                    }
                }
                let now = try engine.state()
                #expect(applied == now, "seed \(seed), round \(round): \(entries.map(\.changes))")
                previous = now
            }
            let all = streamed.withLock { $0 }
            #expect(all.contains { $0.changes.isEmpty } && all.contains { $0.changes.count > 3 })
            // A string JSON cannot hold, written over a string: refused at the write (undone, in words).
            let failure = try Self.refusal(engine, ["type": "bytes"])
            #expect(failure?.message.contains("a string that is not UTF-8 text") == true, "\(String(describing: failure))")
            #expect(streamed.withLock { $0.last?.failure } != nil)
        }
    }

    /// Changes name paths from the root, are never nested in one another, and cost what changed: a toggle in a
    /// 20,000-item list is two changes.
    @Test func aToggleIsTwoChangesWhateverTheStateSize() async throws {
        try await withEngine("""
            cases.toggle = function(state, action) local item = state.list[action.id]; item.done = not item.done; state.count = state.count + 1 end
            cases.replace = function(state) state.list[3] = { done = true }; state.list[3].extra = 1 end
            cases.whole = function(state) return { count = 0, list = state.list, map = {} } end
            """, initial: "(function() local list = {} for i = 1, 20000 do list[i] = { done = false } end return { list = list, count = 0, map = {} } end)()") { engine in
            let entries = Protected<[JournalEntry]>([])
            engine.changeListeners { $0.journal = { entry in entries.withLock { $0.append(entry) } } }
            _ = try engine.reduce(["type": "toggle", "id": 17_000])
            _ = try engine.reduce(["type": "replace"])
            _ = try engine.reduce(["type": "whole"])
            let heard = entries.withLock { $0 }
            #expect(heard[0].changes == [
                StateChange(path: ["list", 17_000, "done"], value: true), StateChange(path: ["count"], value: 1),
            ])
            #expect(heard[1].changes == [StateChange(path: ["list", 3], value: ["done": true, "extra": 1])])
            #expect(heard[2].changes.map(\.path) == [[]], "a new state table is one change: the whole state")
        }
    }

    /// The barrier writes each change as a recording's JSON (`json.c`); read back, every kind of value the state
    /// may hold is what the state holds — the same as converting the state itself — with paths from the cache
    /// (the same tables changed again), after a move (the cache is not trusted), and for a string that is not
    /// UTF-8 (left to Swift, which refuses it). The recording line carries the same JSON, and Swift's encoder of
    /// the format writes the very bytes the barrier wrote (golden bytes: neither may drift from the other).
    @Test func theBarriersJSONHoldsEveryValueExactly() async throws {
        try await withEngine(#"""
            cases.set = function(state, action)
              local map = state.map
              map.int, map.float, map.third, map.neg0, map.big = action.n, action.n + 0.5, 1 / 3, -0.0, 1.5e300
              map.text = "quote \" backslash \\ newline \n tab \t nul \0 \u{1F} é 🙂 " .. action.n
              map[true], map[2.5], map[-7] = "yes", "half", action.n
              state.list[action.n] = action.n * 2
            end
            cases.nest = function(state, action)
              state.map.nested = { empty = {}, list = { 1, 2, { deep = { x = action.n } } }, holes = { [1] = 1, [3] = 3 },
                                   ["$map"] = 1, keys = { [false] = "f", [0.25] = "q", k = "v" } }
            end
            cases.move = function(state) local nested = state.map.nested; state.map.nested = nil; state.list.moved = nested end
            cases.deep = function(state) local n = state.list.moved or state.map.nested; n.list[3].deep.x = "again" .. state.count; state.count = state.count + 1 end
            cases.bytes = function(state) state.map.raw = "\255\254 not utf-8" end
            """#) { engine in
            let entries = Protected<[JournalEntry]>([])
            engine.changeListeners { $0.journal = { entry in entries.withLock { $0.append(entry) } } }
            var previous = try engine.state()
            let actions: [LuaValue] = [
                ["type": "set", "n": 1], ["type": "set", "n": 2], ["type": "nest", "n": 3], ["type": "deep"],
                ["type": "move"], ["type": "deep"],
            ]
            for action in actions {
                _ = try engine.reduce(action)
                let entry = try #require(entries.withLock { $0.last })
                let changes = entry.changes
                #expect(changes.count == entry.changeCount)
                var applied = previous
                for change in changes { Self.apply(change, to: &applied) }
                let now = try engine.state()
                #expect(applied == now, "\(action): the changes give the state")
                previous = now
                let line = try RecordingLine.entry(entry, after: entry.time)
                let parsed = try RecordingJSON.Value(parsing: line[...])
                #expect(try RecordingLine.changes(from: #require(parsed["changes"])) == changes, "\(action): the line")
                // The two encoders of the format write the same bytes: the barrier's (json.c) and Swift's
                // (RecordingJSON) — replay compares a recording's text with the barrier's without reading either.
                let barrier = try #require(entry.encodedChanges, "\(action): the barrier wrote the changes")
                var swift: [UInt8] = []
                try RecordingLine.append(changes, to: &swift)
                #expect(String(decoding: barrier, as: UTF8.self) == String(decoding: swift, as: UTF8.self), "\(action)")
            }
            let floats = try #require(entries.withLock { $0[0] }.changes.first { $0.path == ["map", "neg0"] }?.value)
            #expect(floats.number?.sign == .minus, "-0.0 keeps its sign")
            // Neither JSON nor Swift could hold it: the state refuses it at the write, the action is undone and
            // fails in words, and its entry says so.
            let failure = try Self.refusal(engine, ["type": "bytes"])
            #expect(failure?.message.contains("a string that is not UTF-8 text") == true, "\(String(describing: failure))")
            #expect(entries.withLock { $0.last?.failure } != nil)
        }
    }

    /// Runs of queued actions (one crossing into the VM for many) journal each action as single dispatches do:
    /// one entry per action in order, failures included, each one's changes exact.
    @Test func runsOfActionsAreJournaledActionByAction() async throws {
        let folder = try AppFolder(["app.lua": """
            local luastore = require("luastore")
            local app = {}
            function app.init() return { count = 0, items = {} } end
            function app.reduce(state, action)
              if action.type == "add" then state.items[#state.items + 1] = { n = action.n }; state.count = state.count + 1
              elseif action.type == "fail" then state.count = -1; error("no")
              elseif action.type == "log" then state.count = state.count + 10; return nil, { luastore.log("hi") }
              elseif action.type == "drop" then table.remove(state.items, 1)
              end
            end
            function app.props(state) return { count = state.count } end
            return app
            """])
        defer { folder.remove() }
        let recorder = Recorder()
        var options = recorder.options
        options.limits.timeBudget = .seconds(2) // a loaded machine must not turn an action into a timeout
        let entries = Protected<[JournalEntry]>([])
        options.journal = { entry in entries.withLock { $0.append(entry) } }
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        let start = try await store.journalStart()
        var actions: [LuaValue] = []
        for index in 1...300 {
            switch index % 10 {
            case 3: actions.append(["type": "fail"])
            case 5: actions.append(["type": "log"])
            case 7: actions.append(["type": "drop"])
            case 9: actions.append(["type": .integer(9)]) // refused: no string type
            default: actions.append(["type": "add", "n": .integer(Int64(index))])
            }
        }
        for action in actions { store.dispatch(action) }
        await store.barrier()
        let heard = entries.withLock { $0 }
        #expect(heard.map(\.sequence) == Array(1...300).map(UInt64.init))
        #expect(heard.map { $0.action ?? .nil } == actions)
        var state = start.state
        for entry in heard {
            let expectFailure = entry.action?["type"] == "fail" || entry.action?["type"] == 9
            #expect((entry.failure != nil) == expectFailure, "\(entry.sequence): \(entry.action ?? .nil) \(entry.failure.map { "\($0)" } ?? "applied")")
            for change in entry.changes { Self.apply(change, to: &state) }
        }
        #expect(state == (try await store.state()))
        let crossings = await withCheckedContinuation { continuation in
            store.thread.async { continuation.resume(returning: store.engine.runs.crossings) }
        }
        #expect(crossings < 200, "runs crossed into the VM once for many actions: \(crossings) crossings")
    }
}
