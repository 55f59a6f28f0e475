import Foundation
import LuaStoreTestSupport
import Testing
#if canImport(FoundationXML)
import FoundationXML
#endif

/// `luastore test` runs specs written for busted and luassert (`specs/spec/busted_spec.lua` passes whole;
/// `specs/spec/failing_spec.lua` fails assertion by assertion), filters them and reports them for tools.
@Suite struct SpecRunnerTests {
    static let folder = CLI.packageRoot.appendingPathComponent("Tests/luastoreTests/specs")

    /// Every block, hook, assertion, chain, spy, stub, mock and matcher, passing; each failure's text and line,
    /// exactly (`specs/expected.txt`).
    @Test func bustedSpecsRunAndFailuresReadAsLuassertWritesThem() async throws {
        let run = try await CLI.run(["test", Self.folder.path, "--time-budget-ms", "10000"])
        #expect(run.status == 1)
        let expected = try String(contentsOf: Self.folder.appendingPathComponent("expected.txt"), encoding: .utf8)
        #expect(run.output == expected, "\(run.output)")
        #expect(!run.output.contains("FAIL spec/busted_spec.lua"), "the busted-style spec passes whole")
        #expect(run.output.hasSuffix("13 passed, 10 failed, 2 errors, 1 pending\n"))
    }

    @Test func filterRunsOnlyTheTestsWhoseNamesMatch() async throws {
        let run = try await CLI.run(["test", Self.folder.path, "--time-budget-ms", "10000", "--filter", "^luassert spies"])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output == "1 passed, 0 failed\n")
        let failing = try await CLI.run(["test", Self.folder.path, "--time-budget-ms", "10000", "--filter", "failing e"])
        #expect(failing.outputLines.last == "0 passed, 2 failed")
        let malformed = try await CLI.run(["test", Self.folder.path, "--time-budget-ms", "10000", "--filter", "[a"])
        #expect(malformed.status == 2)
        #expect(malformed.errors == "luastore: --filter \"[a\": malformed pattern (missing ']')\n")
    }

    @Test func jsonIsBustedsShape() async throws {
        let run = try await CLI.run(["test", Self.folder.path, "--time-budget-ms", "10000", "--output", "json"])
        #expect(run.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
        #expect((object["successes"] as? [Any])?.count == 13)
        // (Each test's line, where its `it` is: read from the spec file's frame, however the call reached the runner.)
        let success = try #require((object["successes"] as? [[String: Any]])?.first)
        #expect(success["name"] as? String == "luassert keeps assert callable")
        #expect(success["line"] as? Int == 7)
        #expect((object["failures"] as? [Any])?.count == 10)
        // (As busted tells them apart: an unknown assertion and a runtime error are errors, not failed assertions.)
        let errors = try #require(object["errors"] as? [[String: Any]])
        #expect(errors.map { $0["name"] as? String } == ["failing unknown", "failing runtime error"])
        #expect(errors.last?["message"] as? String == "attempt to index a nil value (local 't')")
        let pending = try #require((object["pendings"] as? [[String: Any]])?.first)
        #expect(pending["name"] as? String == "busted blocks is not written yet")
        #expect(pending["file"] as? String == "spec/busted_spec.lua")
        #expect(pending["line"] as? Int == 100)
        let failure = try #require((object["failures"] as? [[String: Any]])?.first)
        #expect(failure["name"] as? String == "failing same")
        #expect(failure["line"] as? Int == 2)
        // (A table as luassert's formatter writes it: its identity, then a line per key, the key where it differs marked.)
        #expect((failure["message"] as? String)?.hasPrefix("Expected objects to be the same.\nPassed in:\n(table: 0x") == true)
        #expect((failure["message"] as? String)?.contains(") {\n *[1] = 2 }\nExpected:\n") == true, "\(failure)")
    }

    @Test func tapCountsEveryTest() async throws {
        let run = try await CLI.run(["test", Self.folder.path, "--time-budget-ms", "10000", "--output", "tap"])
        // (As busted writes TAP: the plan last, a pending test's name after `# SKIP`, a failure's place `file @ line`.)
        #expect(run.outputLines.first == "ok 1 - luassert keeps assert callable")
        #expect(run.outputLines.last == "1..26")
        #expect(run.outputLines.contains("ok 11 - # SKIP busted blocks is not written yet"))
        #expect(run.outputLines.filter { $0.hasPrefix("not ok ") }.count == 12)
        #expect(run.outputLines.contains("# spec/failing_spec.lua @ 3"))
    }

    @Test func junitIsWellFormedXML() async throws {
        let run = try await CLI.run(["test", Self.folder.path, "--time-budget-ms", "10000", "--output", "junit"])
        let document = try XMLDocument(data: Data(run.output.utf8))
        let root = try #require(document.rootElement())
        #expect(root.name == "testsuites")
        #expect(root.attribute(forName: "tests")?.stringValue == "26")
        #expect(root.attribute(forName: "failures")?.stringValue == "10")
        #expect(root.attribute(forName: "errors")?.stringValue == "2")
        #expect(root.attribute(forName: "skipped")?.stringValue == "1")
        let suites = root.elements(forName: "testsuite")
        #expect(suites.map { $0.attribute(forName: "name")?.stringValue } == ["spec/busted_spec.lua", "spec/failing_spec.lua"])
        let failures = try document.nodes(forXPath: "//failure")
        #expect(failures.count == 10)
        #expect(try document.nodes(forXPath: "//error").count == 2)
        #expect(failures.first?.stringValue?.hasPrefix("spec/failing_spec.lua:2: Expected objects to be the same.") == true)
    }
}

/// Tests are timed like tests: each (with its hooks) has 10 s unless `--time-budget-ms` says otherwise — a test
/// that takes half a second passes (an action's 200 ms is not a test's); one past its budget fails alone.
@Suite struct SpecBudgetTests {
    static let spec = """
        describe("timing", function()
          it("works for a while", function()
            local n = 0
            for i = 1, 100000000 do n = n + i end
            assert.is_true(n > 0)
          end)
          it("is quick", function() assert.are.equal(2, 1 + 1) end)
        end)
        """

    @Test func aSlowTestPassesAndOnePastItsBudgetFailsAlone() async throws {
        let app = try CLI.makeApp("""
            local app = {}
            function app.init() return {} end
            function app.reduce(state, action) end
            function app.props(state) return {} end
            return app
            """)
        defer { try? FileManager.default.removeItem(at: app) }
        try Data(Self.spec.utf8).write(to: app.appendingPathComponent("timing_spec.lua"))
        let defaults = try await CLI.run(["test", app.path])
        #expect(defaults.status == 0, "\(defaults.output)")
        #expect(defaults.outputLines.last == "2 passed, 0 failed", "\(defaults.output)")
        // (150 ms of CPU time, the wall clock's backstop five times that: loading the file fits it on a loaded
        // machine too; the loop needs about half a second.)
        let short = try await CLI.run(["test", app.path, "--time-budget-ms", "150"])
        #expect(short.status == 1)
        #expect(short.output.contains("time budget of 150 ms exceeded"), "\(short.output)")
        // (Under it, the spec's frames where the test was stopped: a `pcall` that re-raised it unwound them.)
        #expect(short.output.contains("stack traceback:\n  \ttiming_spec.lua:"), "\(short.output)")
        #expect(short.outputLines.last == "1 passed, 0 failed, 1 error", "\(short.output)")
    }

    /// A failure's own message — given after an assertion's arguments, or among `matches`' options — comes first,
    /// on a line of its own, then luassert's; a pending test's reason is shown: as busted prints them (outcomes are
    /// compared in `BustedDifferentialTests`, not words).
    @Test func aFailuresOwnMessageComesFirst() async throws {
        let app = try CLI.makeApp("return { init = function() return {} end, reduce = function() end, props = function() return {} end }")
        defer { try? FileManager.default.removeItem(at: app) }
        try Data("""
            describe("messages", function()
              it("equal", function() assert.are.equal(1, 2, "numbers differ") end)
              it("truthy", function() assert.is_truthy(nil, "should be set") end)
              it("matches", function() assert.matches("^x", "abc", 1, "starts with x") end)
              it("waits", function()
                pending("waiting for a fix")
              end)
            end)
            """.utf8).write(to: app.appendingPathComponent("messages_spec.lua"))
        let run = try await CLI.run(["test", app.path])
        #expect(run.status == 1)
        // (A test's `pending(reason)`: the reason, at the line of the call, as busted reports it.)
        #expect(run.outputLines.contains("PENDING messages_spec.lua:6: messages waits: waiting for a fix"), "\(run.output)")
        for (name, own, luassert) in [("equal", "numbers differ", "Expected objects to be equal."),
                                      ("truthy", "should be set", "Expected to be truthy, but value was:"),
                                      ("matches", "starts with x", "Expected strings to match.")] {
            #expect(run.output.contains("messages \(name): \(own)\n  \(luassert)"), "\(run.output)")
        }
    }

    /// What a spec prints goes out as busted writes it: its bytes as they are (not UTF-8 text too), not indented.
    @Test(.startsChildProcesses) func whatASpecPrintsIsWrittenAsItIs() async throws {
        let app = try CLI.makeApp("return { init = function() return {} end, reduce = function() end, props = function() return {} end }")
        defer { try? FileManager.default.removeItem(at: app) }
        try Data(#"describe("p", function() it("prints", function() print("a\255b") io.write("plain\n") end) end)"#.utf8)
            .write(to: app.appendingPathComponent("print_spec.lua"))
        let dumped = try await runChildProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", #""$0" test "$1" | od -An -tx1 -v"#, CLI.binary.path, app.path])
        let bytes = dumped.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(bytes.hasPrefix("61 ff 62 0a 70 6c 61 69 6e 0a"), "\(bytes)") // ("a", 0xFF, "b", a line; "plain", a line)
    }
}

/// A spec file is read as bytes, as busted (Lua) reads it: a string literal may hold bytes that are not UTF-8; and
/// a spec reads its fixtures as under busted, whatever folder `luastore test` was started in.
@Suite struct SpecFilesTests {
    @Test func aSpecReadsItsFixtures() async throws {
        let app = try CLI.makeApp("return { init = function() return {} end, reduce = function() end, props = function() return {} end }")
        let elsewhere = try CLI.makeApp("return {}")
        defer {
            try? FileManager.default.removeItem(at: app)
            try? FileManager.default.removeItem(at: elsewhere)
        }
        try FileManager.default.createDirectory(at: app.appendingPathComponent("spec/fixtures"), withIntermediateDirectories: true)
        try Data("a\nb\n".utf8).write(to: app.appendingPathComponent("spec/fixtures/two.txt"))
        try Data("""
            it("reads its fixtures", function()
              local lines = {}
              for line in io.lines("spec/fixtures/two.txt") do lines[#lines + 1] = line end
              assert.are.same({ "a", "b" }, lines)
              local file = assert(io.open("spec/fixtures/two.txt", "rb"))
              assert.are.equal("a\\nb\\n", file:read("a"))
              assert.is_true(file:close())
              assert.is_nil(io.open("spec/fixtures/new.txt", "w"))
            end)
            """.utf8).write(to: app.appendingPathComponent("spec/fixtures_spec.lua"))
        let run = try await runChildProcess(CLI.binary, ["test", app.path], directory: elsewhere, environment: CLI.environment)
        #expect(run.status == 0, "\(run.output) \(run.errors)")
        #expect(run.output.hasSuffix("1 passed, 0 failed\n"), "\(run.output)")
        #expect(!FileManager.default.fileExists(atPath: app.appendingPathComponent("spec/fixtures/new.txt").path))
    }

    /// An error raised in a module names it as stock Lua and busted do (`./lib/m.lua:3:`), and a matcher is called as
    /// luassert's are (`match.is_string()("x")`).
    @Test func modulesAreNamedAsUnderBustedAndMatchersCall() async throws {
        let app = try CLI.makeApp("return { init = function() return {} end, reduce = function() end, props = function() return {} end }")
        defer { try? FileManager.default.removeItem(at: app) }
        try FileManager.default.createDirectory(at: app.appendingPathComponent("lib"), withIntermediateDirectories: true)
        try Data("local M = {}\nfunction M.boom()\n  error('bad')\nend\nreturn M\n".utf8).write(to: app.appendingPathComponent("lib/m.lua"))
        try Data("""
            local match = require("luassert.match")
            it("calls matchers", function()
              assert.is_true(match.is_string()("x"))
              assert.is_false(match.Is_Number()("x"))
              assert.is_true(match.is_not.string()(1))
            end)
            it("names the module", function()
              local ok, message = pcall(require("lib.m").boom)
              assert.are.equal("./lib/m.lua:3: bad", message)
            end)
            """.utf8).write(to: app.appendingPathComponent("names_spec.lua"))
        let run = try await CLI.run(["test", app.path])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.outputLines.last == "2 passed, 0 failed", "\(run.output)")
    }

    @Test func aSpecIsReadAsBytes() async throws {
        let app = try CLI.makeApp("return { init = function() return {} end, reduce = function() end, props = function() return {} end }")
        defer { try? FileManager.default.removeItem(at: app) }
        try Data(#"it("holds bytes", function() assert.are.same({ 255, 254, 128 }, { ("#.utf8 + [0x22, 0xFF, 0xFE, 0x80, 0x22]
                 + #"):byte(1, -1) }) end)"#.utf8).write(to: app.appendingPathComponent("bytes_spec.lua"))
        let run = try await CLI.run(["test", app.path])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.outputLines.last == "1 passed, 0 failed", "\(run.output)")
    }
}

/// A `.busted` `lpath` is the project's: `lib/?.lua` is `./lib/?.lua` under the project's root, whatever folder
/// `luastore test` was started in (it read a file outside the project, one the working folder held).
@Suite struct BustedPathTests {
    @Test func anLpathWithoutDotSlashIsTheProjects() async throws {
        let project = try CLI.makeApp("return { init = function() return {} end, reduce = function() end, props = function() return {} end }")
        let elsewhere = try CLI.makeApp("return {}")
        defer {
            try? FileManager.default.removeItem(at: project)
            try? FileManager.default.removeItem(at: elsewhere)
        }
        for (folder, word) in [(project, "inside"), (elsewhere, "outside")] {
            try FileManager.default.createDirectory(at: folder.appendingPathComponent("lib"), withIntermediateDirectories: true)
            try Data("return '\(word)'".utf8).write(to: folder.appendingPathComponent("lib/where.lua"))
        }
        try Data("return { _all = { lpath = 'lib/?.lua' } }".utf8).write(to: project.appendingPathComponent(".busted"))
        try FileManager.default.createDirectory(at: project.appendingPathComponent("spec"), withIntermediateDirectories: true)
        try Data(#"it("loads the project's module", function() assert.are.equal("inside", require("where")) end)"#.utf8)
            .write(to: project.appendingPathComponent("spec/where_spec.lua"))
        let run = try await runChildProcess(CLI.binary, ["test", project.path], directory: elsewhere, environment: CLI.environment)
        #expect(run.status == 0, "\(run.output) \(run.errors)")
        #expect(run.output.hasSuffix("1 passed, 0 failed\n"), "\(run.output)")
    }
}

/// `require("luastore.store")`: a spec runs the app in a real store — what only a store refuses (a table in two
/// places, a metatable in the state, a proxy kept past its call, an action past its budget) fails there as it fails
/// in the store, the state stays as it was, and the props are the store's.
@Suite struct SpecStoreTests {
    static let app = """
        local app = {}
        local kept
        function app.init() return { count = 0, items = {} } end
        function app.reduce(state, action)
          if action.type == "add" then state.count = state.count + 1
          elseif action.type == "stamp" then state.at = os.date("%Y-%m-%d %H:%M", os.time()) .. " " .. (os.getenv("REGION") or "-")
          elseif action.type == "twice" then local t = { 1 }; state.items.a = t; state.items.b = t
          elseif action.type == "meta" then state.items.m = setmetatable({}, {})
          elseif action.type == "keep" then kept = state.items
          elseif action.type == "kept" then kept.x = 1
          elseif action.type == "spin" then state.count = 50; while true do end
          elseif action.type == "boom" then state.count = 99; error("boom") end
        end
        function app.props(state) return { label = "n=" .. state.count } end
        return app
        """

    static let spec = """
        local store = require("luastore.store")
        describe("the app in a store", function()
          it("refuses what the store refuses", function()
            local s <close> = store.open({ time_budget_ms = 300 })
            assert.is_true(s:dispatch({ type = "add" }))
            local ok, failure = s:dispatch({ type = "twice" })
            assert.is_false(ok)
            assert.are.equal("reduce", failure.stage)
            assert.matches("a table can be in one place of the state only", failure.message, 1, true)
            assert.is_false((s:dispatch({ type = "meta" })))
            assert.is_true(s:dispatch({ type = "keep" }))
            ok, failure = s:dispatch({ type = "kept" })
            assert.is_false(ok)
            assert.are.equal("app.lua:10", failure.location)
            ok, failure = s:dispatch({ type = "spin" })
            assert.matches("time budget of 300 ms exceeded", failure.message, 1, true)
            ok, failure = s:dispatch({ type = "boom" })
            assert.are.same({ false, "app.lua:12" }, { ok, failure.location })
            assert.are.same({ count = 1, items = {} }, s:state())
            assert.are.same({ label = "n=1" }, s:props())
          end)
          it("starts from a given state", function()
            local s <close> = store.open({ state = { count = 5, items = {} } })
            assert.is_true(s:dispatch({ type = "add" }))
            assert.are.equal(6, s:state().count)
          end)
          it("runs on a clock the spec sets", function()
            local s <close> = store.open()
            assert.is_true(s:dispatch({ type = "stamp" }))
            assert.are.equal("2000-01-01 00:00 -", s:state().at)
            local t <close> = store.open({ time = 1772357400, utc_offset = 3600, env = { REGION = "eu" } })
            assert.is_true(t:dispatch({ type = "stamp" }))
            assert.are.equal("2026-03-01 10:30 eu", t:state().at)
            t:set_time(0)
            assert.is_true(t:dispatch({ type = "stamp" }))
            assert.are.equal("1970-01-01 01:00 eu", t:state().at)
            assert.has_error(function() store.open({ utc_offset = 90000 }) end)
          end)
          it("is gone once closed", function()
            local s = store.open()
            s:close()
            assert.has_error(function() s:dispatch({ type = "add" }) end)
          end)
        end)
        """

    @Test func aSpecDrivesTheAppInARealStore() async throws {
        let app = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: app) }
        try Data(Self.spec.utf8).write(to: app.appendingPathComponent("store_spec.lua"))
        let run = try await CLI.run(["test", app.path])
        #expect(run.status == 0, "\(run.output) \(run.errors)")
        #expect(run.outputLines.last == "4 passed, 0 failed", "\(run.output)")
    }
}
