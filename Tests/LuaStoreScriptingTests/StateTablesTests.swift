import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// State tables are tables to every standard function and to libraries that walk tables: the same calls on the
/// state and on an equal plain table give the same answers — `next`, `pairs`, `rawget`, `rawlen`, `#`, `getmetatable`,
/// `table.*`, `select("#", table.unpack(t))`, a deep copy and a deep compare written in plain Lua, and Penlight's
/// `pretty.write`, `tablex.deepcopy` and `tablex.deepcompare` (Debian's, through the module path).
struct StateTablesTests {
    static let penlight = FileManager.default.fileExists(atPath: "/usr/share/lua/5.4/pl/pretty.lua")

    static let app = """
        local pretty = require("pl.pretty")
        local tablex = require("pl.tablex")
        local app = {}

        -- (Plain Lua, as libraries write it: `next`, `rawget` and `getmetatable`.)
        local function copy(t)
          if type(t) ~= "table" then return t end
          local out = {}
          local key, value = next(t)
          while key ~= nil do
            out[key] = copy(rawget(t, key))
            key, value = next(t, key)
          end
          return setmetatable(out, getmetatable(t))
        end

        local function probe(t)
          local keys = {}
          for key in pairs(t.habits) do keys[#keys + 1] = tostring(key) end
          table.sort(keys)
          local empty = {}
          local answers = {
            keys = table.concat(keys, ","),
            first = next(t.list) ~= nil and "some" or "none",
            emptyNext = next(t.none) == nil, nextAtEnd = select("#", next(t.none)),
            pairsGives = select("#", pairs(t.habits)),
            pairsIsNext = (function() local f, s, c = pairs(t.habits) return f == next and rawequal(s, t.habits) and c == nil end)(),
            rawlen = rawlen(t.list), length = #t.list, rawget = pretty.write(rawget(t.habits, "read"), ""),
            meta = tostring(getmetatable(t.habits)),
            concat = table.concat(t.list, "+"), unpacked = select("#", table.unpack(t.list)),
            pretty = pretty.write(t.habits, ""),
            deepcopy = pretty.write(tablex.deepcopy(t.habits), ""),
            copied = pretty.write(copy(t.habits), ""),
            same = tablex.deepcompare(t.habits, { read = { days = 3, tags = { "a", "b" } }, walk = { days = 1, tags = {} } }),
            walked = 0,
          }
          for _ in next, t.habits do answers.walked = answers.walked + 1 end
          return answers
        end

        local function fresh()
          return { habits = { read = { days = 3, tags = { "a", "b" } }, walk = { days = 1, tags = {} } },
                   list = { 10, 20, 30 }, none = {} }
        end

        function app.init() return { habits = fresh().habits, list = fresh().list, none = {}, onState = {}, onPlain = {} } end
        function app.reduce(state, action)
          if action.type == "probe" then
            local answers = probe(state)
            local plain = probe(fresh())
            for key, value in pairs(answers) do state.onState[key] = value end
            for key, value in pairs(plain) do state.onPlain[key] = value end
          end
        end
        function app.props(state)
          return { onState = state.onState, onPlain = state.onPlain, pretty = pretty.write(state.habits, "") }
        end
        return app
        """

    @Test(.enabled(if: penlight, "needs Debian's lua-penlight (scripts/bootstrap installs it)"))
    func libraryCallsOnTheStateAgreeWithAPlainTable() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.modulePath = LuaModulePath.defaultTemplates
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        let outcome = await store.send(["type": "probe"])
        #expect(outcome.failure == nil, "\(String(describing: outcome.failure))")
        let props = try await store.props()
        #expect(props["onState"] == props["onPlain"], "\(props)")
        #expect(props["onState"]["keys"] == "read,walk")
        #expect(props["onState"]["rawlen"] == 3)
        #expect(props["onState"]["meta"] == "nil")
        #expect(props["onState"]["walked"] == 2)
        #expect(props["onState"]["nextAtEnd"] == 1, "next at the end gives one value, as Lua's")
        #expect(props["onState"]["pairsGives"] == 3 && props["onState"]["pairsIsNext"] == true, "pairs gives next, the table, nil")
        #expect(props["onState"]["same"] == true)
        #expect(props["pretty"] == props["onPlain"]["pretty"], "props read the state as a table too")
        #expect(props["pretty"].string?.contains("days=3") == true, "\(props["pretty"])")
    }

    /// A list with holes placed in the state keeps the border Lua's constructor (or `table.pack`) gave it (`#` and
    /// `table.unpack` answer as stock `lua5.4` does for the same table: 3, 5 and 2 here), where the state's copy of
    /// it had one of its own (1, 3 and 0) — also with other keys beside the sequence, in a new state or stored by a
    /// reducer (the copy rehashed as those keys went in, and counted its sequence part anew: 1).
    @Test func aListWithHolesKeepsItsBorderInTheState() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init()
              return { h = { 1, nil, 3 }, g = { 1, 2, 3, nil, 5 }, k = { nil, 2 }, m = { 1, nil, 3, n = 3, m = 4 },
                       l = { nil, nil, 3 } }
            end
            function app.reduce(state, action)
              state.p = table.pack(1, nil, 3)                 -- (a table the reducer stores: claimed)
              state.q = { 1, nil, 3, nil, 5, label = "q", [2.5] = true }
              state.x = { 1, nil, nil, nil, 5 }                -- (more holes than entries: a short border is kept)
              state.y = { 1, 2, nil, nil, nil, nil, nil, 8 }
            end
            function app.props(state)
              local function border(t) return t and (#t .. "/" .. select("#", table.unpack(t))) or "none" end
              return { h = border(state.h), g = border(state.g), k = border(state.k), m = border(state.m),
                       p = border(state.p), q = border(state.q), l = border(state.l), x = border(state.x), y = border(state.y) }
            end
            return app
            """])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(try await store.props() == ["h": "3/3", "g": "5/5", "k": "2/2", "m": "3/3", "p": "none", "q": "none",
                                            "l": "3/3", "x": "none", "y": "none"])
        _ = await store.send(["type": "store"])
        #expect(try await store.props() == ["h": "3/3", "g": "5/5", "k": "2/2", "m": "3/3", "p": "3/3", "q": "5/5",
                                            "l": "3/3", "x": "5/5", "y": "8/8"],
                "as lua5.4 answers for the same tables (with other keys beside the sequence, with more holes than entries)")
    }

    /// A table a reducer makes and stores is the state's at once, as in Lua it is simply there: the same table read
    /// back (`items[i] == t`), its later writes — and its inner tables' — kept, a key that appears or goes away seen
    /// by `props`; an action that fails after storing a thousand of them leaves none, and the actions around it keep
    /// theirs; what cannot be data (a table in two places, one with a metatable, nesting past the state's depth, a
    /// NaN key) is refused at the script's line, as before such writes were made in C — a table in two places as
    /// the action commits, at the line of its reducer.
    @Test func tablesAReducerMakesAreTheStatesAtOnce() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { items = {}, flags = { old = true } } end
            function app.reduce(state, action)
              local items = state.items
              if action.type == "add" then
                for i = 1, action.count do
                  local tags = { "new" }
                  local item = { id = #items + 1, tags = tags }
                  items[#items + 1] = item
                  assert(items[#items] == item and item.tags == tags, "the table stored is the table read back")
                  item.done = false                      -- (a key that appears, through the script's own table)
                  tags[#tags + 1] = "kept"               -- (and through a table inside it)
                end
                state.flags.old = nil                    -- (a key that goes away)
                state.flags[action.count] = "added"
                if action.fail then error("failed after storing them") end
              elseif action.type == "twice" then
                local t = {}
                state.a, state.b = t, t
              elseif action.type == "meta" then
                state.m = setmetatable({}, {})
              elseif action.type == "metatable" then
                local mt = { __index = { x = 1 } }
                local object = setmetatable({}, mt)
                assert(getmetatable(mt) == nil and object.x == 1)
                state.mt = mt
              elseif action.type == "deep" then
                local t = {}
                for _ = 1, 200 do t = { t } end
                state.deep = t
              elseif action.type == "nan" then
                state.flags[0 / 0] = true
              end
            end
            function app.props(state)
              local last = state.items[#state.items]
              local flags = {}
              for key in pairs(state.flags) do flags[#flags + 1] = tostring(key) end
              table.sort(flags)
              return { count = #state.items, last = last and (last.id .. ":" .. tostring(last.done) .. ":" .. table.concat(last.tags, ",")) or "none",
                       flags = table.concat(flags, ","), a = state.a ~= nil }
            end
            return app
            """])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(await store.send(["type": "add", "count": 3]).failure == nil)
        #expect(try await store.props() == ["count": 3, "last": "3:false:new,kept", "flags": "3", "a": false])
        let failed = await store.send(["type": "add", "count": 1000, "fail": true]).failure
        #expect(failed.map(String.init(describing:))?.contains("app.lua:16: failed after storing them") == true, "\(String(describing: failed))")
        #expect(try await store.props() == ["count": 3, "last": "3:false:new,kept", "flags": "3", "a": false],
                "the failed action left nothing of its thousand items")
        #expect(await store.send(["type": "add", "count": 2]).failure == nil)
        #expect(try await store.props() == ["count": 5, "last": "5:false:new,kept", "flags": "2,3", "a": false])
        let refusals: [(String, String)] = [
            ("twice", "app.lua:3: after the action, one table is both at state.a and at state.b"), ("meta", "app.lua:21: state.m: a table with a metatable cannot be stored"),
            ("metatable", "app.lua:26: state.mt: a table that is another table's metatable cannot be stored in the state"),
            ("deep", "app.lua:30: state.deep"), ("nan", "app.lua:32:"),
        ]
        for (type, expected) in refusals {
            let failure = await store.send(["type": .string(type)]).failure
            #expect(failure.map(String.init(describing:))?.contains(expected) == true, "\(type): \(String(describing: failure))")
        }
        #expect(try await store.props() == ["count": 5, "last": "5:false:new,kept", "flags": "2,3", "a": false],
                "every refused write was undone")
    }

    /// A table stored inside itself and taken out again within the action is where it was, as in Lua — the action
    /// was refused as if the cycle had stayed ("a table cannot be stored inside itself"), and a write to the table
    /// after it is recorded at its own path; a cycle that stays is refused.
    @Test func aCycleUndoneWithinTheActionIsNoCycle() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { a = {}, n = 0 } end
            function app.reduce(s, action)
              s.n = s.n + 1
              if action.type == "undone" then s.a.me = s.a; s.a.me = nil; s.a.x = s.n
              elseif action.type == "rootUndone" then s.a.root = s; s.a.root = "gone"
              elseif action.type == "rootInItself" then s.me = s; s.fresh = { 1 }; s.me = nil
              elseif action.type == "stays" then s.a.me = s.a
              end
            end
            function app.props(s) return { n = s.n, x = s.a.x or "none", root = s.a.root or "none" } end
            return app
            """])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        defer { store.shutdown() }
        #expect(await store.send(["type": "undone"]).failure == nil)
        #expect(await store.send(["type": "rootUndone"]).failure == nil)
        #expect(try await store.props() == ["n": 2, "x": 1, "root": "gone"])
        #expect(try await store.state() == ["a": ["x": 1, "root": "gone"], "n": 2])
        // (The root inside itself for a moment: a table stored meanwhile is at level 2, not past the state's depth.)
        #expect(await store.send(["type": "rootInItself"]).failure == nil)
        #expect(try await store.state() == ["a": ["x": 1, "root": "gone"], "n": 3, "fresh": [1]])
        let stays = await store.send(["type": "stays"]).failure.map(String.init(describing:)) ?? "applied"
        #expect(stays.contains("app.lua:3: state.a.me: a table cannot be stored inside itself"), "\(stays)")
        #expect(try await store.state() == ["a": ["x": 1, "root": "gone"], "n": 3, "fresh": [1]])
    }

    /// A read-only table of the host's (a library, the string or files' metatable, all frozen in a store) serves as a
    /// metatable as the table it shows would in Lua: its fields are copied into the script's own (Lua reads a
    /// metatable raw, and the read-only view holds none: `__index` was not seen, nor `__tostring`).
    @Test func readOnlyTablesServeAsMetatables() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { answers = {} } end
            function app.reduce(state, action)
              local text = setmetatable({}, getmetatable(""))
              local file = setmetatable({}, getmetatable(io.stdout))
              local mine = getmetatable(text)
              mine.extra = true -- (the script's own copy: the string metatable is untouched)
              state.answers = {
                upper = text.upper == string.upper, name = getmetatable(file).__name,
                write = select(2, pcall(function() return file:write("x") end)),
                shared = getmetatable("").extra == nil,
              }
            end
            function app.props(state) return state.answers end
            return app
            """])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        let outcome = await store.send(["type": "probe"])
        #expect(outcome.failure == nil, "\(String(describing: outcome.failure))")
        let props = try await store.props()
        #expect(props["upper"] == true && props["name"] == "FILE*" && props["shared"] == true, "\(props)")
        #expect(props["write"] == "app.lua:10: calling 'write' on bad self (FILE* expected, got FILE*)", "\(props)")
    }

    /// `next(t, k)` on a state table takes a key cleared while the table is walked, as Lua's does (its dead key stays
    /// in the table): a helper that counts with `pairs`, an emptiness check, an inner loop between the steps — each
    /// raised "invalid key to 'next'", where Lua empties the table.
    @Test func nextTakesAKeyClearedWhileTheTableIsWalked() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { m = { a = 1, b = 2, c = 3, d = 4 }, list = { 1, 2, 3, 4, 5 }, log = "" } end
            local function count(t) local n = 0 for _ in pairs(t) do n = n + 1 end return n end
            function app.reduce(state, action)
              local log = {}
              for k in pairs(state.m) do state.m[k] = nil; log[#log + 1] = tostring(next(state.m) ~= nil) .. count(state.m) end
              state.list[3] = nil
              log[#log + 1] = tostring(next(state.list, 3))
              log[#log + 1] = tostring(pcall(next, state.list, "absent"))
              state.log = table.concat(log, " ")
            end
            function app.props(state) return { log = state.log, left = next(state.m) == nil } end
            return app
            """])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let outcome = await store.send(["type": "clear"])
        #expect(outcome.failure == nil, "\(String(describing: outcome.failure))")
        #expect(try await store.props() == ["log": "true3 true2 true1 false0 4 false", "left": true])
    }

    /// `debug.getinfo` in a reducer and in `props` sees the script's frames as a traceback shows them: the store's own
    /// (its runtime's Lua, the C around it) are not counted, and no function of the host's is handed out — `func`
    /// only for the script's own functions (a C function on the stack may be the store's, its state in its upvalues).
    @Test func getinfoWalksOnlyTheScriptsFrames() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            local function frames()
              local seen = {}
              for level = 1, 60 do
                local info = debug.getinfo(level, "Slnf")
                if info == nil then break end
                seen[#seen + 1] = info.what .. " " .. info.short_src .. ":" .. info.currentline .. " " .. tostring(info.name)
                  .. (info.func ~= nil and " f" or "")
              end
              return table.concat(seen, "|")
            end
            function app.init() return { trace = "" } end
            function app.reduce(state, action)
              state.trace = frames()
            end
            function app.props(state) return { trace = state.trace, here = frames() } end
            return app
            """])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(await store.send(["type": "look"]).failure == nil)
        let props = try await store.props()
        #expect(props["trace"] == "Lua app.lua:5 frames f|Lua app.lua:14 nil f", "\(props)")
        #expect(props["here"] == "Lua app.lua:5 frames f|Lua app.lua:16 nil f", "\(props)")
    }

    /// What stays refused on a state table is named: `rawset` (it would write past the journal), and a metatable.
    @Test func rawsetAndSetmetatableOnTheStateAreRefusedNamed() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { items = {} } end
            function app.reduce(state, action)
              if action.type == "raw" then rawset(state.items, "x", 1)
              elseif action.type == "meta" then setmetatable(state.items, {})
              elseif action.type == "asmeta" then state.items.n = setmetatable({}, state.items).x
              elseif action.type == "insert" then
                table.insert(state.items, 0/0)
              elseif action.type == "trace" then
                state.items.trace = select(2, xpcall(function() state.items.f = print end, debug.traceback))
              end
            end
            function app.props(state) return { n = #state.items } end
            return app
            """])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        let raw = await store.send(["type": "raw"]).failure
        #expect(raw?.error.message.hasPrefix("rawset: this table can be changed only by assignment") == true, "\(String(describing: raw))")
        #expect(raw?.error.location == "app.lua:4")
        let meta = await store.send(["type": "meta"]).failure
        #expect(meta?.error.message == "cannot change a protected metatable", "\(String(describing: meta))")
        // A state table as a metatable (Lua would read its fields raw, and find none): refused, named.
        let asMeta = await store.send(["type": "asmeta"]).failure
        #expect(asMeta?.error.message.hasPrefix("setmetatable: this table cannot be a metatable") == true, "\(String(describing: asMeta))")
        #expect(asMeta?.error.location == "app.lua:6")
        // A refused write a C function made for the script is placed at the script's line.
        let inserted = await store.send(["type": "insert"]).failure
        #expect(inserted?.error.message.contains("NaN cannot be stored in the state") == true, "\(String(describing: inserted))")
        #expect(inserted?.error.location == "app.lua:8")
        #expect(try await store.state() == ["items": [:]])
        // A traceback shows the script's frames, none of the store's own.
        #expect(await store.send(["type": "trace"]).failure == nil)
        let trace = try await store.state()["items"]["trace"].string ?? ""
        #expect(trace.contains("app.lua:10:") && !trace.contains("host:") && !trace.contains("in field 'run'"), "\(trace)")
    }
}
