import Foundation
import LuaStoreTestSupport
import Testing

/// What the `luastore` reference (docs/cli.md) promises about JSON output, specs, settling and hosts, through the built
/// binary.
@Suite struct ReadmePromisesTests {
    /// A temporary app folder with `files` (paths relative to it), removed by the caller.
    func makeApp(_ files: [String: String]) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-promises-\(UUID().uuidString)")
        for (path, text) in files {
            let url = folder.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
        }
        return folder
    }

    static let numbersApp = """
        local app = {}
        function app.init() return { mode = "ok" } end
        function app.reduce(state, action) state.mode = action.type end
        function app.props(state)
          if state.mode == "nan" then return { value = 0/0 } end
          if state.mode == "cycle" then local t = {} t.self = t return { nested = t } end
          return { half = 1.5, big = 1e300, tiny = 2.5e-7, whole = 3.0, int = 7, neg = -0.25, list = { 1, 2.5 } }
        end
        return app
        """

    /// Integers print as integers, other numbers with a fraction or an exponent; NaN and cycles are errors naming
    /// the path, and the run goes on.
    @Test func jsonPrintsNumbersExactlyAndNamesWhatItCannotPrint() async throws {
        let app = try makeApp(["app.lua": Self.numbersApp])
        defer { try? FileManager.default.removeItem(at: app) }
        let run = try await CLI.run(["run", app.path, "--format", "json"], input: "{\"type\":\"nan\"}\n{\"type\":\"cycle\"}\n")
        #expect(run.status == 1)
        #expect(run.outputLines == [#"{"big":1e+300,"half":1.5,"int":7,"list":[1,2.5],"neg":-0.25,"tiny":2.5e-07,"whole":3.0}"#])
        let errors = run.errors.split(separator: "\n").map(String.init)
        #expect(errors.count == 2)
        #expect(errors.first?.hasPrefix("luastore: props cannot be written as JSON: props.value: ") == true, "\(errors)")
        #expect(errors.first?.hasSuffix("nan cannot be represented in JSON") == true, "\(errors)")
        #expect(errors.last == "luastore: props failed: app.lua:4: props.nested.self: the table contains itself (a cycle)")
    }

    static let matchersSpec = """
        local app = require("app")
        describe("matchers", function()
          it("passes contain", function() expect({ 1, 2, 3 }).to.contain(2) end)
          it("passes fail", function() expect(function() error("boom") end).to.fail("boom") end)
          it("passes to_not", function() expect(1).to_not.be(2) end)
          it("passes be_truthy", function() expect(0).to.be_truthy() end)
          it("passes be_falsy", function() expect(nil).to.be_falsy() end)
          it("fails contain", function() expect({ 1, 2 }).to.contain(5) end)
          it("fails fail", function() expect(function() end).to.fail() end)
          it("fails fail with text", function() expect(function() error("other") end).to.fail("boom") end)
          it("fails to_not", function() expect(app.init()).to_not.equal({ mode = "ok" }) end)
          it("fails be_truthy", function() expect(false).to.be_truthy() end)
          it("fails be_falsy", function() expect("x").to.be_falsy() end)
        end)
        """

    /// Specs in `spec/` run too; each matcher passes and fails with a message naming the file and line.
    @Test func specsInTheSpecFolderRunWithEveryMatcher() async throws {
        let app = try makeApp(["app.lua": Self.numbersApp, "spec/matchers_spec.lua": Self.matchersSpec])
        defer { try? FileManager.default.removeItem(at: app) }
        let run = try await CLI.run(["test", app.path])
        #expect(run.status == 1)
        #expect(run.outputLines == [
            "FAIL spec/matchers_spec.lua:8: matchers fails contain: expected {1, 2} to contain 5",
            "FAIL spec/matchers_spec.lua:9: matchers fails fail: expected the function to fail",
            "FAIL spec/matchers_spec.lua:10: matchers fails fail with text: expected the function to fail with \"boom\"",
            "FAIL spec/matchers_spec.lua:11: matchers fails to_not: not expected {mode = \"ok\"}, got {mode = \"ok\"}",
            "FAIL spec/matchers_spec.lua:12: matchers fails be_truthy: expected a truthy value, got false",
            "FAIL spec/matchers_spec.lua:13: matchers fails be_falsy: expected a falsy value, got \"x\"",
            "5 passed, 6 failed",
        ])
    }

    static let lateApp = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { late = false } end
        function app.reduce(state, action)
          if action.type == "later" then return nil, { luastore.delay(action.seconds, { type = "late" }) } end
          if action.type == "late" then state.late = true end
        end
        function app.props(state) return { late = state.late } end
        return app
        """

    /// After the last action the run waits for commands in flight, at most `--settle-timeout` seconds. (The delay
    /// it must not wait for is long — 120 s — so that the bound on the whole run, half of it, holds on a machine the
    /// rest of the suite and busy loops keep busy: such a run once took 28 s from start to finish.)
    @Test(arguments: [(0.3, 10.0, true), (120.0, 0.3, false)])
    func theRunSettlesWithinItsTimeout(delay: Double, timeout: Double, applied: Bool) async throws {
        let app = try makeApp(["app.lua": Self.lateApp])
        defer { try? FileManager.default.removeItem(at: app) }
        let state = app.appendingPathComponent("state.json")
        let clock = ContinuousClock()
        let start = clock.now
        let startDate = Date()
        let run = try await CLI.run(
            ["run", app.path, "--format", "json", "--settle-timeout", "\(timeout)", "--state-out", state.path],
            input: "{\"type\":\"later\",\"seconds\":\(delay)}\n")
        let elapsed = clock.now - start
        #expect(run.status == 0, "\(run.errors)")
        #expect(try String(contentsOf: state, encoding: .utf8) == "{\"late\":\(applied)}\n")
        if applied {
            #expect(run.outputLines == [#"{"late":false}"#, #"{"late":true}"#])
        } else {
            #expect(run.outputLines == [#"{"late":false}"#])
            #expect(run.errors.contains("commands still in flight after 0.3 s were cancelled"), "\(run.errors)")
            let written = (try? FileManager.default.attributesOfItem(atPath: state.path)[.modificationDate] as? Date).map { $0.timeIntervalSince(startDate) }
            #expect(elapsed < .seconds(60), "it did not wait for the 120 s delay (its state was written \(written.map { "\($0) s" } ?? "never") after the start)")
        }
    }

    static let hostApp = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { result = "none" } end
        function app.reduce(state, action)
          if action.type == "fetch" then
            return nil, { luastore.http { url = action.url, success = "done", failure = "failed", timeout = 0.5 } }
          end
          if action.type == "done" then state.result = "done" end
          if action.type == "failed" then state.result = action.reason end
        end
        function app.props(state) return { result = state.result } end
        return app
        """

    /// HTTP effects reach loopback only, unless `--allow-host` names the host. (A non-routable address: with the
    /// host allowed, the request is attempted and fails on the network, not on the policy.)
    @Test func allowHostOpensAHostToHTTPEffects() async throws {
        let app = try makeApp(["app.lua": Self.hostApp])
        defer { try? FileManager.default.removeItem(at: app) }
        let input = "{\"type\":\"fetch\",\"url\":\"http://10.255.255.1:9/\"}\n"
        let refused = try await CLI.run(["run", app.path, "--format", "json"], input: input)
        #expect(refused.outputLines == [#"{"result":"none"}"#, #"{"result":"refusedHost"}"#])
        let allowed = try await CLI.run(["run", app.path, "--format", "json", "--allow-host", "10.255.255.1"], input: input)
        #expect(allowed.outputLines.count == 2)
        #expect(allowed.outputLines.first == #"{"result":"none"}"#)
        #expect(allowed.outputLines.last != #"{"result":"refusedHost"}"#, "\(allowed.outputLines)")
        #expect(allowed.outputLines.last?.contains("none") == false)
    }
}
