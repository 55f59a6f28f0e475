import Foundation
import LuaStoreTestSupport
import Testing

/// Bad input is reported with where it came from, and nothing else is lost.
@Suite struct FailureTests {
    static let fragile = """
    local app = {}
    function app.init() return { count = 0 } end
    function app.reduce(state, action)
      if action.type == "increment" then state.count = state.count + 1 end
      if action.type == "explode" then state.count = 99; error("exploded") end
    end
    function app.props(state) return { count = state.count } end
    return app
    """

    @Test func malformedLinesAndFailingReducersExitOneAndLoseNothing() async throws {
        let app = try CLI.makeApp(Self.fragile)
        defer { try? FileManager.default.removeItem(at: app) }
        let stateOut = app.appendingPathComponent("state.json")
        let input = """
        {"type":"increment"}
        {"type":
        {"type":"explode"}
        ["increment"]
        {"count":1}
        {"type":"increment"}

        """
        let run = try await CLI.run(["run", app.path, "--format", "json", "--state-out", stateOut.path], input: input)
        #expect(run.status == 1)
        #expect(run.outputLines == [#"{"count":0}"#, #"{"count":1}"#, #"{"count":2}"#])
        let errors = run.errors.split(separator: "\n").map(String.init)
        #expect(errors == [
            "luastore: line 2: not valid JSON: a value was expected at column 9",
            "luastore: reduce failed: app.lua:5: exploded (line 3)",
            "luastore: line 4: an action must be a JSON object, not a JSON array",
            "luastore: line 5: an action needs a string \"type\"",
        ])
        #expect(try String(contentsOf: stateOut, encoding: .utf8) == "{\"count\":2}\n")
    }

    /// `--time-budget-ms`: an action that needs longer than the budget is stopped, naming the budget; with a
    /// larger budget it runs (for `run` and `replay` alike); a budget that is not a positive number is a usage error.
    /// `LUASTORE_TIME_BUDGET_MS` is the default, the option wins, and a variable that is not a budget is refused.
    /// An `init` has the budget of the calls that build a state (2 s), and an endless one is stopped there.
    @Test func theTimeBudgetIsTheUsers() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return { n = 0 } end
            function app.reduce(state, action)
              local n = 0
              for i = 1, 100000000 do n = n + i % 7 end
              state.n = n
            end
            function app.props(state) return { n = state.n } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let work = #"{"type":"work"}"# + "\n"
        let stopped = try await CLI.run(["run", app.path, "--actions", "-", "--format", "json", "--time-budget-ms", "300"], input: work)
        #expect(stopped.status == 1)
        // (On a loaded machine the stop may come a line earlier or later; the budget is what is named.)
        #expect(stopped.errors.contains("time budget of 300 ms exceeded"), "\(stopped.errors)")
        // The script's traceback follows: where the loop ran, and how the reducer got there.
        #expect(stopped.errors.contains("stack traceback:\n\tapp.lua:"), "\(stopped.errors)")
        #expect(stopped.errors.contains("in function <app.lua:3>"), "\(stopped.errors)")
        let ran = try await CLI.run(["run", app.path, "--actions", "-", "--format", "json", "--time-budget-ms", "60000"], input: work)
        #expect(ran.status == 0, "\(ran.errors)")
        #expect(ran.outputLines.last?.hasPrefix(#"{"n":"#) == true && ran.outputLines.last != #"{"n":0}"#, "\(ran.output)")
        let endless = try CLI.makeApp("""
            local app = {}
            function app.init() while true do end end
            function app.reduce(state, action) end
            function app.props(state) return {} end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: endless) }
        let endlessInit = try await CLI.run(["run", endless.path, "--actions", "-", "--format", "json", "--time-budget-ms", "300"], input: "")
        #expect(endlessInit.status == 2)
        #expect(endlessInit.errors.contains("time budget of 2000 ms exceeded (init)"), "\(endlessInit.errors)")
        let usage = try await CLI.run(["replay", app.path, "x.jsonl", "--time-budget-ms", "0"])
        #expect(usage.status == 2)
        #expect(usage.errors.contains("--time-budget-ms must be a number of milliseconds above 0 and at most 1000000000000"))
        // (A budget no `Duration` holds, or whose nanoseconds no counter holds, is refused: it crashed the tool.)
        for huge in ["1e13", "1e300", "inf"] {
            for command in [["run", app.path, "--actions", "-"], ["replay", app.path, "x.jsonl"], ["test", app.path]] {
                let refused = try await CLI.run(command + ["--time-budget-ms", huge], input: "")
                #expect(refused.status == 2, "\(command) \(huge): \(refused.errors)")
                #expect(refused.errors.contains("--time-budget-ms must be a number of milliseconds above 0"), "\(refused.errors)")
            }
        }
        // LUASTORE_TIME_BUDGET_MS sets the default (the tests run the binary with a large one); the option wins.
        let fromVariable = try await CLI.run(["run", app.path, "--actions", "-", "--format", "json"], input: work,
                                             extraEnvironment: ["LUASTORE_TIME_BUDGET_MS": "300"])
        #expect(fromVariable.status == 1)
        #expect(fromVariable.errors.contains("time budget of 300 ms exceeded"), "\(fromVariable.errors)")
        let optionWins = try await CLI.run(["run", app.path, "--actions", "-", "--format", "json", "--time-budget-ms", "60000"], input: work,
                                           extraEnvironment: ["LUASTORE_TIME_BUDGET_MS": "300"])
        #expect(optionWins.status == 0, "\(optionWins.errors)")
        for command in [["run", app.path], ["replay", app.path, "x.jsonl"], ["test", app.path]] {
            let refused = try await CLI.run(command, extraEnvironment: ["LUASTORE_TIME_BUDGET_MS": "soon"])
            #expect(refused.status == 2)
            #expect(refused.errors.contains(#"LUASTORE_TIME_BUDGET_MS must be a number of milliseconds above 0 and at most 1000000000000 (it is "soon")"#), "\(refused.errors)")
        }
    }

    @Test func unloadableAppsAndUsageErrorsExitTwo() async throws {
        let broken = try CLI.makeApp("return {")
        defer { try? FileManager.default.removeItem(at: broken) }
        let run = try await CLI.run(["run", broken.path, "--format", "json"], input: "")
        #expect(run.status == 2)
        #expect(run.errors.contains("app.lua:1: unexpected symbol near <eof>"))
        #expect(try await CLI.run(["run"]).status == 2)
        #expect(try await CLI.run(["run", "samples/counter", "--format", "xml"]).status == 2)
        #expect(try await CLI.run(["frobnicate"]).status == 2)
    }

    @Test func unrepresentablePropsNameThePath() async throws {
        let app = try CLI.makeApp("""
        local app = {}
        function app.init() return {} end
        function app.reduce() end
        function app.props() return { handler = print } end
        return app
        """)
        defer { try? FileManager.default.removeItem(at: app) }
        let run = try await CLI.run(["run", app.path, "--format", "json"], input: "")
        #expect(run.status == 1)
        #expect(run.errors.contains("props failed: app.lua:4: props.handler: a function cannot be converted"), "\(run.errors)")
    }

    @Test func checkValidatesWithoutRunning() async throws {
        #expect(try await CLI.run(["check", "samples/todos"]).status == 0)
        let broken = try CLI.makeApp("local app = {}\nfunction app.init() return {} end\nfunction app.reduce() end\nfunction app.props(s) return s.missing.x end\nreturn app")
        defer { try? FileManager.default.removeItem(at: broken) }
        let run = try await CLI.run(["check", broken.path])
        #expect(run.status == 1)
        #expect(run.errors.contains("app.lua:4: attempt to index a nil value (field 'missing')"))
    }

    /// `check` lists the globals read inside functions that nothing in their namespace sets — each with its file and
    /// line, in the app and in a plugin it mounts, each linted on its own — and exits 1; `--globals` names the ones
    /// something else sets. Globals set at the top level, in a function, or through `_G` count as set.
    @Test func checkListsGlobalsNothingSets() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            total = 0
            function helper(n) return n + total end
            local function setLater() _G.later = 1 end
            function app.init() return { n = 0 } end
            function app.reduce(state, action)
              state.n = helper(state.n) + totl
            end
            function app.props(state) return { n = state.n, seen = later, printed = type(print), ext = externalThing, at = os.time() } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let run = try await CLI.run(["check", app.path])
        #expect(!run.errors.contains("'os'"), "a store's scripts have os (its recorded clock): \(run.errors)")
        #expect(run.status == 1)
        #expect(run.errors.contains("app.lua:7: global 'totl' is read but nothing sets it (a typo? Lua reads it as nil)"), "\(run.errors)")
        #expect(run.errors.contains("app.lua:9: global 'externalThing' is read but nothing sets it"), "\(run.errors)")
        #expect(!run.errors.contains("'later'") && !run.errors.contains("'total'") && !run.errors.contains("'print'"), "\(run.errors)")
        let known = try await CLI.run(["check", app.path, "--globals", "totl, externalThing"])
        #expect(known.status == 0, "\(known.errors)")

        // A plugin is its own namespace: a name only the app sets is unset there.
        let plugin = app.appendingPathComponent("plugins/p")
        try FileManager.default.createDirectory(at: plugin, withIntermediateDirectories: true)
        try Data(#"{"name": "p", "version": "1.0.0", "luastore": "^1.0"}"#.utf8).write(to: plugin.appendingPathComponent("luastore.json"))
        try Data("return { init = function() return {} end, reduce = function(slice) slice.t = total end }".utf8)
            .write(to: plugin.appendingPathComponent("app.lua"))
        try Data(#"{"name": "app", "version": "1.0.0", "luastore": "^1.0", "mounts": {"p": "plugins/p"}}"#.utf8)
            .write(to: app.appendingPathComponent("luastore.json"))
        let mounted = try await CLI.run(["check", app.path, "--globals", "totl,externalThing"])
        #expect(mounted.status == 1)
        #expect(mounted.errors.contains("plugins/p/app.lua:1: global 'total' is read but nothing sets it"), "\(mounted.errors)")
    }

    /// A spec, its helpers and the modules they require share one global table, as under busted (a helper's
    /// `_G.mock` is seen by the module that reads it); `arg` holds the runner's command line.
    @Test func specsShareTheirGlobalsAsUnderBusted() async throws {
        let app = try CLI.makeApp("return { init = function() return {} end, reduce = function() end, props = function() return {} end }")
        defer { try? FileManager.default.removeItem(at: app) }
        try Data("_G.mock = { answer = 42 }\nfunction helper() return 'helped' end\nreturn true".utf8)
            .write(to: app.appendingPathComponent("spec_helper.lua"))
        try Data("return { read = function() return mock and mock.answer end }".utf8).write(to: app.appendingPathComponent("reader.lua"))
        try Data("""
            require("spec_helper")
            describe("globals", function()
              it("are shared", function()
                assert.are.equal(42, require("reader").read())
                assert.are.equal("helped", helper())
                assert.is_nil(nobodySetThis)
              end)
              it("has arg", function()
                assert.are.equal("test", arg[1])
                assert.is_string(arg[0])
              end)
            end)
            """.utf8).write(to: app.appendingPathComponent("globals_spec.lua"))
        let run = try await CLI.run(["test", app.path])
        #expect(run.status == 0, "\(run.output)\n\(run.errors)")
        #expect(run.outputLines.last == "2 passed, 0 failed", "\(run.output)")
    }

    @Test func specsReportFailuresByFileAndLine() async throws {
        let app = try CLI.makeApp(Self.fragile)
        defer { try? FileManager.default.removeItem(at: app) }
        try Data("""
        local app = require("app")
        describe("fragile", function()
          it("counts", function()
            local state = app.init()
            app.reduce(state, { type = "increment" })
            expect(state.count).to.be(2)
          end)
          it("passes", function() expect(app.props(app.init())).to.equal({ count = 0 }) end)
          it("explodes", function() app.reduce(app.init(), { type = "explode" }) end)
        end)
        """.utf8).write(to: app.appendingPathComponent("fragile_spec.lua"))
        let run = try await CLI.run(["test", app.path])
        #expect(run.status == 1)
        #expect(run.outputLines == [
            "FAIL fragile_spec.lua:6: fragile counts: expected exactly 2, got 1",
            "ERROR ./app.lua:5: fragile explodes: exploded", // (the module named as busted names it)
            "1 passed, 1 failed, 1 error",
        ])
        // In busted's JSON an error raised in a module names the module's file and its line together.
        let json = try await CLI.run(["test", app.path, "--output", "json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        let error = try #require((object["errors"] as? [[String: Any]])?.first)
        #expect(error["file"] as? String == "./app.lua")
        #expect(error["line"] as? Int == 5)
        let failure = try #require((object["failures"] as? [[String: Any]])?.first)
        #expect(failure["file"] as? String == "fragile_spec.lua")
        #expect(failure["line"] as? Int == 6)
        for sample in ["counter", "todos", "stopwatch", "search"] {
            let specs = try await CLI.run(["test", "samples/\(sample)"])
            #expect(specs.status == 0, "\(sample): \(specs.output)")
            #expect(specs.outputLines.last?.hasSuffix(" passed, 0 failed") == true)
        }
    }

    /// `luastore.save` and `load` failures are sentences that name the key and the file or folder, and the run
    /// exits 1; a data folder that does not exist yet is made.
    @Test func storageFailuresAreWords() async throws {
        let app = try CLI.makeApp("""
            local luastore = require("luastore")
            local app = {}
            function app.init() return { loaded = "no" } end
            function app.reduce(state, action)
              if action.type == "save" then return nil, { luastore.save("todos", { 1, 2 }) } end
              if action.type == "load" then return nil, { luastore.load("todos", "loaded") } end
              if action.type == "loaded" then state.loaded = action.value == nil and "nothing" or #action.value end
            end
            function app.props(state) return { loaded = state.loaded } end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        let file = app.appendingPathComponent("not-a-folder")
        try Data("x".utf8).write(to: file)
        let toAFile = try await CLI.run(["run", app.path, "--data", file.path], input: #"{"type":"save"}"#)
        #expect(toAFile.status == 1)
        #expect(toAFile.errors == "luastore: save \"todos\" failed: the data folder \(file.path) is a file, not a folder (action {\"type\":\"save\"})\n")

        let far = app.appendingPathComponent("missing/data").path
        let tooFar = try await CLI.run(["run", app.path, "--data", far], input: #"{"type":"save"}"#)
        #expect(tooFar.errors.contains("save \"todos\" failed: the data folder \(far) does not exist, nor the folder it would be in"), "\(tooFar.errors)")

        let data = app.appendingPathComponent("data")
        let saved = try await CLI.run(["run", app.path, "--data", data.path], input: #"{"type":"save"}"#)
        #expect(saved.status == 0, "\(saved.errors)")
        let loaded = try await CLI.run(["run", app.path, "--data", data.path, "--format", "json"], input: #"{"type":"load"}"#)
        #expect(loaded.outputLines.last == #"{"loaded":2}"#, "\(loaded.errors)")

        try Data("{".utf8).write(to: data.appendingPathComponent("todos.json"))
        let corrupt = try await CLI.run(["run", app.path, "--data", data.path], input: #"{"type":"load"}"#)
        #expect(corrupt.status == 1)
        #expect(corrupt.errors.contains("load \"todos\" failed: \(data.path)/todos.json is not valid JSON"), "\(corrupt.errors)")

        // A key's file that is a symbolic link (an app folder can bring one) is neither read nor replaced: the file
        // it leads to, outside, stays as it was.
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("outside-\(UUID().uuidString).json")
        try Data(#"{"secret":1}"#.utf8).write(to: outside)
        defer { try? FileManager.default.removeItem(at: outside) }
        try FileManager.default.removeItem(at: data.appendingPathComponent("todos.json"))
        try FileManager.default.createSymbolicLink(atPath: data.appendingPathComponent("todos.json").path, withDestinationPath: outside.path)
        for kind in ["save", "load"] {
            let linked = try await CLI.run(["run", app.path, "--data", data.path, "--format", "json"], input: #"{"type":"\#(kind)"}"#)
            #expect(linked.status == 1)
            #expect(linked.errors.contains("\(kind) \"todos\" failed: \(data.path)/todos.json is a symbolic link: a store saves and loads only files of its own"),
                    "\(linked.errors)")
            #expect(!linked.output.contains("secret"))
        }
        #expect(try String(contentsOf: outside, encoding: .utf8) == #"{"secret":1}"#)

        // Nor is the default data folder followed when it is a link: the run is refused before anything runs.
        try FileManager.default.createSymbolicLink(atPath: app.appendingPathComponent(".data").path,
                                                   withDestinationPath: FileManager.default.temporaryDirectory.path)
        let linkedFolder = try await CLI.run(["run", app.path], input: #"{"type":"save"}"#)
        #expect(linkedFolder.status == 2)
        #expect(linkedFolder.errors.contains("the data folder \(app.path)/.data is a symbolic link"), "\(linkedFolder.errors)")
        #expect(!FileManager.default.fileExists(atPath: FileManager.default.temporaryDirectory.appendingPathComponent("todos.json").path))
    }
}
