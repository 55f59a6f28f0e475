import Foundation

/// `luastore test`, as a user runs it on a folder of busted specs: the built `luastore` beside this program against
/// Debian's stock busted (`lua5.4 /usr/bin/busted`, the oracle its outcomes are compared with) running the same
/// folder, alternated.
extension Scenarios {
    /// The stock busted script, or nil (its rows are then left out, with a note).
    static var stockBusted: String? {
        ["/usr/bin/busted", "/usr/local/bin/busted"].first { FileManager.default.isReadableFile(atPath: $0) }
    }

    /// A spec of `tests` tests, each running the same mix of luassert's assertions (`assertionsPerTest` of them, all
    /// holding): equality and deep sameness of small tables, types, truthiness, errors caught and matched,
    /// patterns, nearness, uniqueness, negations, a spy's calls.
    static func specSource(tests: Int) -> (source: String, assertionsPerTest: Int) {
        let body = """
              local t = { id = i, name = "item " .. i, tags = { "a", "b" } }
              assert.are.equal(i, t.id)
              assert.are.same({ id = i, name = "item " .. i, tags = { "a", "b" } }, t)
              assert.are_not.equal(i, i + 1)
              assert.is_string(t.name)
              assert.is_table(t.tags)
              assert.truthy(t.tags[1])
              assert.is_nil(t.missing)
              assert.is_true(i > 0)
              assert.has_error(function() error("boom " .. i) end)
              assert.has_error(function() error({ code = i }) end, { code = i })
              assert.matches("item %d+", t.name)
              assert.near(i, i + 0.05, 0.1)
              assert.unique({ 1, 2, 3, i + 10 })
              local s = spy.new(function(x) return x end)
              s(i)
              assert.spy(s).was.called_with(i)
              assert.spy(s).was.called(1)
            """
        let assertionsPerTest = body.components(separatedBy: "assert.").count - 1
        var source = "describe(\"a spec of many assertions\", function()\n"
        for index in 1...tests {
            source += "  it(\"test \(index)\", function()\n    for i = 1, 10 do\n\(body)\n    end\n  end)\n"
        }
        source += "end)\n"
        return (source, assertionsPerTest * 10)
    }

    func specs() async throws -> [Scenario] {
        guard let luastore = luastoreBinary else { return [] }
        let tests = quick ? 50 : 500
        let rounds = quick ? 1 : 3
        let folder = workspace.appendingPathComponent("specs", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let (source, perTest) = Self.specSource(tests: tests)
        try Data(source.utf8).write(to: folder.appendingPathComponent("many_spec.lua"))
        let assertions = Double(tests * perTest)
        let ours = { Harness.milliseconds(try timeLuastore(luastore, ["test", folder.path])) }
        guard let stock = Self.stockLua, let busted = Self.stockBusted, sides == .both else {
            FileHandle.standardError.write(Data("bench: lua5.4 or busted is not installed (or one side runs); test.vs_busted_ratio is left out\n".utf8))
            let milliseconds = try await Harness.median(rounds: rounds) { try ours() }
            return [Scenario(name: "test.ns_per_assertion", value: milliseconds * 1e6 / assertions, unit: "ns", goal: "—", pass: nil)]
        }
        let theirs = {
            Harness.milliseconds(try Self.timeProcess(URL(fileURLWithPath: stock), [busted, "."], in: folder, named: "busted"))
        }
        let (luastoreMilliseconds, bustedMilliseconds, ratio) = try await Harness.alternate(rounds: rounds, ours, theirs)
        return [
            Scenario(name: "test.vs_busted_ratio", value: ratio, unit: "×", goal: "≤ 1.0", pass: ratio <= 1.0),
            Scenario(name: "test.ns_per_assertion", value: luastoreMilliseconds * 1e6 / assertions, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "test.busted_ns_per_assertion", value: bustedMilliseconds * 1e6 / assertions, unit: "ns", goal: "—", pass: nil),
        ]
    }
}
