import Foundation
import LuaStoreTestSupport
import Testing

/// Apps that do what they should not, run through the built binary: each is refused or reported in words naming
/// the script's file and line, and nothing else is lost or changed.
@Suite struct HostileAppTests {
    /// Props that fail on one state are that state's failure: every later state still gets its props.
    @Test func propsFailingOnTheInitialStateDoNotSilenceLaterStates() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action) if action.type == "increment" then state.count = state.count + 1 end end
            function app.props(state)
              if state.count == 0 or state.count == 2 then error("no props at " .. state.count) end
              return { count = state.count }
            end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let run = try await CLI.run(["run", app.path, "--format", "json"], input: String(repeating: "{\"type\":\"increment\"}\n", count: 3))
        #expect(run.status == 1)
        #expect(run.outputLines == [#"{"count":1}"#, #"{"count":3}"#])
        #expect(run.errors.contains("props failed: app.lua:5: no props at 0"), "\(run.errors)")
        #expect(run.errors.contains("props failed: app.lua:5: no props at 2"), "\(run.errors)")
    }

    /// A state may nest tables 200 levels deep, as deep as it converts: a write that would go deeper is refused
    /// at the script's line, naming the depth, and the state stays one that saves, records and replays.
    @Test func aStateTooDeepToSaveIsRefusedAtTheWrite() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { root = {} } end
            function app.reduce(state, action)
              local t = state.root
              while t.next do t = t.next end
              t.next = {}
            end
            function app.props(state) return {} end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let stateOut = app.appendingPathComponent("state.json").path
        let recording = app.appendingPathComponent("session.jsonl").path
        let run = try await CLI.run(["run", app.path, "--format", "json", "--state-out", stateOut, "--record", recording],
                                    input: String(repeating: "{\"type\":\"deepen\"}\n", count: 200))
        #expect(run.status == 1)
        let errors = run.errors.split(separator: "\n")
        #expect(errors.count == 2, "\(run.errors.prefix(2000))")
        #expect(errors.first?.hasPrefix("luastore: reduce failed: app.lua:6: state.root.next.next") == true)
        #expect(errors.first?.contains("more keys)…") == true)
        #expect(errors.first?.hasSuffix("tables in the state nest at most 200 levels deep (this would be level 201; what is deeper could not be saved, recorded or shown) (line 199)") == true)
        let state = try String(contentsOfFile: stateOut, encoding: .utf8)
        #expect(state.components(separatedBy: "{").count - 1 == 200)
        let replay = try await CLI.run(["replay", app.path, recording])
        #expect(replay.status == 0, "\(replay.errors)")
        #expect(replay.output == "replayed 200 actions: every change matches the recording\n")
    }

    /// Values far too deep to convert — stored, returned as commands or props — and Lua's own refusals are the
    /// script's failures in words, never a stack overflow reported at the host's files.
    @Test func errorsAScriptCausesNameTheScript() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            local function chain(n) local top = {} local t = top for i = 1, n do local x = {} t.next = x t = x end return top end
            function app.init() return { count = 0 } end
            function app.reduce(state, action)
              state.count = state.count + 1
              if action.type == "store" then state.deep = chain(200000) end
              if action.type == "command" then return nil, { chain(200000) } end
              if action.type == "metatable" then setmetatable(state, {}) end
              if action.type == "rawset" then rawset(state, "x", 1) end
            end
            function app.props(state)
              if state.count == 1 then return { deep = chain(200000) } end
              return { count = state.count }
            end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let input = ["store", "command", "metatable", "rawset", "props"].map { "{\"type\":\"\($0)\"}\n" }.joined()
        let run = try await CLI.run(["run", app.path, "--format", "json", "--time-budget-ms", "20000"], input: input)
        #expect(run.status == 1)
        #expect(!run.errors.contains("host:"), "\(run.errors)")
        #expect(!run.errors.contains("stack overflow"), "\(run.errors)")
        let errors = run.errors.split(separator: "\n").map(String.init)
        #expect(errors.count == 5, "\(errors)")
        #expect(errors.first { $0.contains("(line 1)") }?.contains("reduce failed: app.lua:6: state.deep.next") == true)
        #expect(errors.contains("luastore: reduce failed: the commands: tables nested deeper than 200 levels (line 2)"))
        #expect(errors.contains("luastore: reduce failed: app.lua:8: cannot change a protected metatable (line 3)"))
        #expect(errors.contains { $0.hasPrefix("luastore: reduce failed: app.lua:9: rawset:") && $0.hasSuffix("(line 4)") })
        #expect(errors.contains { $0.hasPrefix("luastore: props failed: ") && $0.contains("tables nested deeper than 200 levels") })
    }

    /// A save or load command made by hand (not by `luastore.save`) is checked as strictly: a key that would lead
    /// out of the storage folder is refused at the script's line, and nothing is written or read outside it.
    @Test func handMadeStorageCommandsCannotLeaveTheDataFolder() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { n = 0 } end
            function app.reduce(state, action)
              state.n = state.n + 1
              if action.type == "save" then return nil, { { kind = "save", key = "../escaped", value = { a = 1 } } } end
              if action.type == "load" then return nil, { { kind = "load", key = "../../etc/x", success = "loaded" } } end
            end
            function app.props(state) return { n = state.n } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let run = try await CLI.run(["run", app.path, "--format", "json"], input: "{\"type\":\"save\"}\n{\"type\":\"load\"}\n")
        #expect(run.status == 1)
        // (At the line of the reducer that returned them: the command is checked once it has returned.)
        #expect(run.errors.contains("reduce failed: app.lua:3: command #1 (save): field 'key' may hold only letters, digits, '_' and '-' (line 1)"), "\(run.errors)")
        #expect(run.errors.contains("app.lua:3: command #1 (load): field 'key' may hold only letters, digits, '_' and '-' (line 2)"), "\(run.errors)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: app.path) == ["app.lua"])
        #expect(!FileManager.default.fileExists(atPath: app.deletingLastPathComponent().appendingPathComponent("escaped.json").path))
    }

    /// Coroutines in reducers: one that runs within the action may change the state through it (journaled and
    /// rolled back like any write); a reducer cannot yield out of its call; a coroutine is not data and cannot be
    /// stored in the state; an endless loop in one stops at the budget.
    @Test func coroutinesInReducersStayWithinTheirAction() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action)
              if action.type == "steps" then
                local step = coroutine.wrap(function() for i = 1, 3 do state.count = state.count + i; coroutine.yield() end end)
                step(); step(); step()
              elseif action.type == "yield" then coroutine.yield()
              elseif action.type == "store" then state.co = coroutine.create(function() end)
              elseif action.type == "spin" then coroutine.wrap(function() while true do end end)()
              end
            end
            function app.props(state) return { count = state.count } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let input = ["steps", "yield", "store", "spin", "steps"].map { "{\"type\":\"\($0)\"}\n" }.joined()
        let run = try await CLI.run(["run", app.path, "--format", "json", "--time-budget-ms", "1000"], input: input)
        #expect(run.status == 1)
        #expect(run.outputLines == [#"{"count":0}"#, #"{"count":6}"#, #"{"count":12}"#])
        let errors = run.errors.split(separator: "\n").map(String.init)
        #expect(errors.contains("luastore: reduce failed: app.lua:7: attempt to yield from outside a coroutine (line 2)"), "\(errors)")
        #expect(errors.contains("luastore: reduce failed: app.lua:8: state.co: a thread cannot be stored in the state (the state holds only data: UTF-8 strings, booleans, finite numbers and tables of those) (line 3)"), "\(errors)")
        #expect(errors.contains("luastore: reduce failed: app.lua:9: time budget of 1000 ms exceeded (line 4)"), "\(errors)")
    }

    /// A store keeps weak tables strong: a weak cache the reducer fills keeps its entries through collections, so
    /// the outcome never depends on when the collector ran — three runs and the replay of a recording agree; a
    /// finalizer never runs; a weak table is no more data the state can hold than any table with a metatable.
    @Test func weakTablesInAStoreAreKeptStrong() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            local cache = setmetatable({}, { __mode = "v" })
            local finalized = 0
            function app.init() return { misses = 0, finalized = 0 } end
            function app.reduce(state, action)
              if action.type == "look" then
                if cache.entry == nil then cache.entry = {}; state.misses = state.misses + 1 end
                setmetatable({}, { __gc = function() finalized = finalized + 1 end })
                local garbage = {}
                for i = 1, 2000 do garbage[i] = { i } end
                collectgarbage()
                state.finalized = finalized
              elseif action.type == "store" then
                state.weak = setmetatable({}, { __mode = "k" })
              end
            end
            function app.props(state) return { misses = state.misses, finalized = state.finalized } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let input = String(repeating: "{\"type\":\"look\"}\n", count: 20) + "{\"type\":\"store\"}\n"
        var outputs: [String] = []
        for index in 0..<3 {
            let recording = app.appendingPathComponent("session\(index).jsonl").path
            let run = try await CLI.run(["run", app.path, "--format", "json", "--record", recording], input: input)
            #expect(run.status == 1)
            #expect(run.errors.contains("app.lua:14: state.weak: a table with a metatable cannot be stored in the state"), "\(run.errors)")
            outputs.append(run.output)
            let replay = try await CLI.run(["replay", app.path, recording])
            #expect(replay.status == 0, "\(replay.errors)")
        }
        #expect(outputs[0].split(separator: "\n").last == #"{"finalized":0,"misses":1}"#)
        #expect(Set(outputs).count == 1)
    }

    /// A state table kept in an upvalue — a proxy the reducer received, or a table it stored — is refused in every
    /// later call, naming the line, whether or not it is still in the state: the kept table can neither read the
    /// state outside read tracking nor change it behind the journal (before, a stored table kept in an upvalue
    /// changed the state with no change recorded, and a kept proxy worked or failed depending on when the caches
    /// were emptied, so a session diverged from its replay). Three runs and their replays agree.
    @Test func tablesKeptPastTheirCallAreRefused() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            local kept, mine
            function app.init() return { items = { { n = 1 }, { n = 2 } }, log = {} } end
            function app.reduce(state, action)
              if action.type == "keep" then kept = state.items[1]
              elseif action.type == "place" then mine = { n = 1 }; state.mine = mine; mine.n = 2
              elseif action.type == "drop" then table.remove(state.items, 1)
              elseif action.type == "poke" then kept.n = kept.n + 100
              elseif action.type == "pokeMine" then mine.n = mine.n + 100
              elseif action.type == "log" then state.log[#state.log + 1] = #state.items
              end
            end
            function app.props(state) return { items = state.items, mine = state.mine, log = state.log } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let input = ["keep", "poke", "place", "pokeMine", "log", "drop", "poke", "log"]
            .map { "{\"type\":\"\($0)\"}\n" }.joined()
        var outputs: [String] = []
        for index in 0..<3 {
            let recording = app.appendingPathComponent("session\(index).jsonl").path
            let run = try await CLI.run(["run", app.path, "--format", "json", "--record", recording], input: input)
            #expect(run.status == 1)
            let errors = run.errors.split(separator: "\n").map(String.init)
            #expect(errors.count == 3, "\(errors)")
            #expect(errors.first == "luastore: reduce failed: app.lua:8: a state table kept from an earlier call was used: state tables (those a function received, and those it stored) can be used only during that call (line 2)")
            #expect(errors.dropFirst().first?.hasPrefix("luastore: reduce failed: app.lua:9: a state table kept") == true)
            #expect(errors.last?.hasSuffix("(line 7)") == true)
            outputs.append(run.output)
            let replay = try await CLI.run(["replay", app.path, recording])
            #expect(replay.status == 0, "\(replay.errors)")
            #expect(replay.output == "replayed 8 actions: every change matches the recording\n")
        }
        #expect(outputs[0].split(separator: "\n").last == #"{"items":[{"n":2}],"log":[2,1],"mine":{"n":2}}"#)
        #expect(Set(outputs).count == 1)
    }

    /// The bypass of the weak-table rule (issue 31, item 9): a `__mode` assigned into a metatable after
    /// `setmetatable` is refused at the assignment, naming the line, so the cache stays strong and three runs and
    /// their replays agree; the metatable's hidden guard is invisible (`getmetatable(mt)` is nil), ordinary
    /// fields are written as before, and classes (a metatable with a metatable of its own) work unchanged.
    @Test func aModeAssignedIntoAMetatableLaterIsRefused() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            local mt = {}
            local cache = setmetatable({}, mt)
            local Animal = {}; Animal.__index = Animal
            local Dog = setmetatable({}, { __index = Animal }); Dog.__index = Dog
            function Animal:name() return self.n end
            function app.init() return { entries = 0, guard = tostring(getmetatable(mt)) } end
            function app.reduce(state, action)
              if action.type == "weaken" then mt.__mode = "k"
              elseif action.type == "fill" then
                for i = 1, 200 do cache[{}] = i end
                mt.__index = function() return 0 end
                collectgarbage()
                local n = 0
                for _ in pairs(cache) do n = n + 1 end
                state.entries, state.missing = n, cache.absent
              elseif action.type == "classes" then
                state.name = setmetatable({ n = "rex" }, Dog):name()
              end
            end
            function app.props(state) return state end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let input = ["weaken", "fill", "fill", "classes"].map { "{\"type\":\"\($0)\"}\n" }.joined()
        var outputs: [String] = []
        for index in 0..<3 {
            let recording = app.appendingPathComponent("session\(index).jsonl").path
            let run = try await CLI.run(["run", app.path, "--format", "json", "--record", recording], input: input)
            #expect(run.status == 1)
            #expect(run.errors == "luastore: reduce failed: app.lua:9: '__mode' cannot be assigned into a metatable here (weak tables are kept strong: LuaLimits.weakTables) (line 1)\n")
            outputs.append(run.output)
            let replay = try await CLI.run(["replay", app.path, recording])
            #expect(replay.status == 0, "\(replay.errors)")
        }
        #expect(outputs[0].split(separator: "\n").map(String.init) == [
            #"{"entries":0,"guard":"nil"}"#,
            #"{"entries":200,"guard":"nil","missing":0}"#,
            #"{"entries":400,"guard":"nil","missing":0}"#,
            #"{"entries":400,"guard":"nil","missing":0,"name":"rex"}"#,
        ])
        #expect(Set(outputs).count == 1)
    }
}
