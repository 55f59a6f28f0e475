import Foundation
import LuaStoreTestSupport
import Testing

/// Debian's stock interpreter and busted's runner, where they are installed.
let realBusted: (lua: String, busted: String)? = {
    let lua = ["/usr/bin/lua5.4", "/usr/local/bin/lua5.4"].first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let lua, FileManager.default.fileExists(atPath: "/usr/bin/busted") else { return nil }
    return (lua, "/usr/bin/busted")
}()

/// `luastore test` reports a spec file as real busted does: Debian's busted 2.1.1 on stock `lua5.4` runs the
/// fixture `busted/features_spec.lua` (every busted and luassert feature the runner claims, passing, failing,
/// erring and pending), and each test's outcome and name must be the same, in the same order.
@Suite(.enabled(if: realBusted != nil, "needs Debian's lua-busted and lua5.4 (scripts/bootstrap installs them)"))
struct BustedDifferentialTests {
    /// Each TAP result line as (passed, name); a skipped (pending) test's name is left out, since busted prints
    /// `pending`'s message there instead.
    static func outcomes(_ tap: String, skip: Regex<Substring>) -> [String] {
        tap.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("ok ") || line.hasPrefix("not ok ") else { return nil }
            if line.contains(skip) { return "pending" }
            let name = line.split(separator: " - ", maxSplits: 1).last.map(String.init) ?? ""
            return (line.hasPrefix("ok ") ? "passed: " : "failed: ") + name
        }
    }

    @Test func specOutcomesAreBustedsTestByTest() async throws {
        let folder = CLI.packageRoot.appendingPathComponent("Tests/luastoreTests/busted")
        let (lua, busted) = try #require(realBusted)
        let real = try await runChildProcess(URL(fileURLWithPath: lua), [busted, "-o", "TAP", "features_spec.lua"], directory: folder)
        let ours = try await CLI.run(["test", folder.path, "--output", "tap"])
        let expected = Self.outcomes(real.output, skip: #/ - # SKIP /#)
        let reported = Self.outcomes(ours.output, skip: #/ # SKIP /#)
        #expect(expected.count >= 15, "\(real.output) \(real.errors)")
        #expect(reported == expected)
        // The TAP itself, as busted writes it: every result line and every failure's place, the same.
        func framing(_ tap: String) -> [String] {
            tap.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") || $0.contains(" @ ") }
        }
        #expect(framing(ours.output) == framing(real.output))
        #expect(real.status == ours.status, "both exit with the failures' status")

        // Failures (assertions) and errors (anything else) apart, counted as busted counts them.
        let summary = try await runChildProcess(URL(fileURLWithPath: lua), [busted, "-o", "plainTerminal", "features_spec.lua"], directory: folder)
        func count(_ word: String) -> Int? {
            summary.output.firstMatch(of: try! Regex<(Substring, Substring)>("(\\d+) \(word)"))
                .flatMap { Int($0.output.1) }
        }
        let json = try await CLI.run(["test", folder.path, "--output", "json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        #expect(count("success") == (object["successes"] as? [Any])?.count, "\(summary.output)")
        #expect(count("failure") == (object["failures"] as? [Any])?.count, "\(summary.output)")
        #expect(count("error") == (object["errors"] as? [Any])?.count, "\(summary.output)")
        #expect(count("pending") == (object["pendings"] as? [Any])?.count, "\(summary.output)")
    }

    /// A project as busted finds it: `.busted`'s ROOT, pattern, exclude-pattern and lpath; blocks whose bodies run
    /// when reached (seeing the hooks of the tests before them) or fail (an error of their own); a spec file's
    /// plain globals. The fixture `busted-project/` runs under both, compared test by test.
    @Test func aBustedProjectRunsAsUnderBusted() async throws {
        let folder = CLI.packageRoot.appendingPathComponent("Tests/luastoreTests/busted-project")
        let (lua, busted) = try #require(realBusted)
        let real = try await runChildProcess(URL(fileURLWithPath: lua), [busted, "-o", "TAP"], directory: folder)
        let ours = try await CLI.run(["test", folder.path, "--output", "tap"])
        let expected = Self.outcomes(real.output, skip: #/ - # SKIP /#)
        #expect(expected.count == 14, "\(real.output) \(real.errors)")
        #expect(Self.outcomes(ours.output, skip: #/ # SKIP /#) == expected)
        #expect(real.status == ours.status)
        // Byte for byte (identities aside): failures' places and messages, values as luassert shows them.
        func normalized(_ text: String) -> String { text.replacing(#/0x[0-9a-f]+/#, with: "0x") }
        #expect(normalized(ours.output) == normalized(real.output))
    }

    /// Failing assertions say what luassert 1.9.0 says, word for word (identities aside): every assertion's own
    /// words, custom messages (a table shown as a value, `false` too), spies' counts and argument lists
    /// (`(values list) (…)`, matchers as `(matcher) is.match(…)`), what was caught or not. The fixture
    /// `busted-messages/` runs under both.
    @Test func failureMessagesAreLuassertsWordForWord() async throws {
        let folder = CLI.packageRoot.appendingPathComponent("Tests/luastoreTests/busted-messages")
        let (lua, busted) = try #require(realBusted)
        let real = try await runChildProcess(URL(fileURLWithPath: lua), [busted, "-o", "TAP"], directory: folder)
        let ours = try await CLI.run(["test", folder.path, "--output", "tap"])
        #expect(Self.outcomes(real.output, skip: #/ - # SKIP /#).filter { $0.hasPrefix("failed") }.count == 40, "\(real.output) \(real.errors)")
        func normalized(_ text: String) -> [String] { text.replacing(#/0x[0-9a-f]+/#, with: "0x").split(separator: "\n").map(String.init) }
        let expected = normalized(real.output), reported = normalized(ours.output)
        for (index, (line, luassert)) in zip(reported, expected).enumerated() where line != luassert {
            Issue.record("line \(index + 1): \(line.debugDescription), luassert: \(luassert.debugDescription)")
            break
        }
        #expect(reported.count == expected.count)
        #expect(real.status == ours.status)
    }

    /// Errors that are not assertions — a number, nil, a table, a string raised at level 0, one raised in a helper
    /// or a before_each, a runtime error, a table holding itself — are reported as busted reports them: placed at the
    /// line that raised them (not at the test's), a table written as Penlight's `pretty.write` writes it. The spec
    /// file `busted-errors/` runs under both; the TAP is the same byte for byte.
    @Test func errorsArePlacedAndWrittenAsBustedDoes() async throws {
        let folder = CLI.packageRoot.appendingPathComponent("Tests/luastoreTests/busted-errors")
        let (lua, busted) = try #require(realBusted)
        let real = try await runChildProcess(URL(fileURLWithPath: lua), [busted, "-o", "TAP"], directory: folder)
        let ours = try await CLI.run(["test", folder.path, "--output", "tap"])
        #expect(real.output.contains("not ok 11 - hooks before_each"), "\(real.output) \(real.errors)")
        #expect(ours.output == real.output)
        #expect(ours.status == real.status)
    }

    /// TAP goes out as busted writes it, a result as each test ends: what a test prints comes before its line and
    /// after the line of the test before it.
    @Test func tapInterleavesWithWhatTestsPrint() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-tap-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("spec"), withIntermediateDirectories: true)
        try Data("""
            describe("printing", function()
              it("a", function() print("in a") end)
              it("b", function() print("in b"); assert.equal(1, 2) end)
              it("c", function() print("in c") end)
              describe("with hooks", function()
                after_each(function() print("after each") end)
                it("d", function() print("in d") end)
                it("e", function() print("in e"); error("boom") end)
              end)
            end)
            """.utf8).write(to: folder.appendingPathComponent("spec/print_spec.lua"))
        let (lua, busted) = try #require(realBusted)
        let real = try await runChildProcess(URL(fileURLWithPath: lua), [busted, "-o", "TAP"], directory: folder)
        let ours = try await CLI.run(["test", folder.path, "--output", "tap"])
        #expect(ours.output == real.output)
        #expect(Array(ours.outputLines.prefix(3)) == ["in a", "ok 1 - printing a", "in b"], "\(ours.output)")
        // (A test's result comes before what its after_each hooks print, as busted tells a test's end before them.)
        let d = try #require(ours.outputLines.firstIndex(of: "in d"))
        #expect(Array(ours.outputLines[d...(d + 2)]) == ["in d", "ok 4 - printing with hooks d", "after each"], "\(ours.output)")
    }

    /// A `.busted` that is not what busted takes is refused, naming the file and what was wrong.
    @Test func aBadBustedFileIsNamed() async throws {
        let folder = try CLI.makeApp("return {}").standardizedFileURL
        defer { try? FileManager.default.removeItem(at: folder) }
        for (text, message) in [("return { default = { ROOT = 3 } }", ".busted: 'default.ROOT' must be a string or a list of strings (got number)"),
                                ("return 1", ".busted: must return a table of tasks (got number)"),
                                ("return {", ".busted: .busted:1: unexpected symbol near <eof>"),
                                ("return { default = { ROOT = { 'nowhere' } } }", ".busted: ROOT 'nowhere' does not exist in \(folder.standardizedFileURL.path)"),
                                ("return { default = { helper = 'nowhere.lua' } }",
                                 ".busted: 'default.helper' \"nowhere.lua\" is not a file of the project folder \(folder.standardizedFileURL.path)"),
                                ("return { default = { helper = 3 } }", ".busted: 'default.helper' must be a string (got number)"),
                                ("return { default = { ROOT = { '..' } } }",
                                 ".busted: ROOT '..' leads outside the project folder \(folder.standardizedFileURL.path): specs are read from it only")] {
            try text.write(to: folder.appendingPathComponent(".busted"), atomically: true, encoding: .utf8)
            let run = try await CLI.run(["test", folder.path])
            #expect(run.status == 2)
            #expect(run.errors.contains(message), "\(run.errors)")
        }
    }
}
