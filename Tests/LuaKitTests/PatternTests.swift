@testable import LuaKit
import LuaStoreTestSupport
import Testing

/// The sandbox's pattern functions against Lua's own, call by call: same results, same errors.
@Suite struct PatternTests {
    static let subjects = [
        "", "hello world", "  padded  ", "key = value; other=2", "THE (quick) [brown] fox", "a,b,,c",
        "x = 10, y = -3.5e2", "ümlaut ☃ snow", "aaa", "f(a(b)c)d", "THE END", "line1\nline2\n",
    ]

    static let patterns = [
        "o", "l+", "l*", "l-", "o?", "%a+", "%d+", "%s*(.-)%s*$", "^%s*", "(%w+)%s*=%s*(%w+)", "%b()", "%b[]",
        "%f[%w]%w+", "%f[%W]", "()", "(h)(e)", "[%a_][%w_]*", "[^,]*", "[a-c]+", "[]]", "[^%s]+", ".", "$", "^",
        "(a)%1", "((a)(a))", "%u+", "%p", "%x+", "%c", "%-?%d+%.?%d*", "%.", "[%-]", "()a()", "a-b", "%g+", "^(%a+)",
        "(.)%1", "[%]]", "%S+$", "()ll()", "(%a*)", "x*$",
    ]

    static let badPatterns = ["%", "[a", "(", ")", "%b", "%f", "%fa", "(()", "%1", "(a)%2", "[%", "((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))"]

    static let harness = """
        local find, match, gmatch, gsub, escape = ...
        return function(s, p)
          local out = {}
          local function record(tag, ok, ...)
            local n = select('#', ...)
            local row = {tag, tostring(ok), n}
            for i = 1, n do row[#row + 1] = tostring((select(i, ...))) end
            out[#out + 1] = (escape(table.concat(row, '|'), '[\\128-\\255]', function(c) return '\\\\' .. c:byte() end))
          end
          record('find', pcall(find, s, p))
          record('find3', pcall(find, s, p, 3))
          record('find-2', pcall(find, s, p, -2))
          record('findplain', pcall(find, s, p, 1, true))
          record('match', pcall(match, s, p))
          record('match2', pcall(match, s, p, 2))
          record('gsub', pcall(gsub, s, p, '<%0>'))
          record('gsub1', pcall(gsub, s, p, '%1', 2))
          record('gsubt', pcall(gsub, s, p, {a = 'A', l = false, hello = 1}))
          record('gsubf', pcall(gsub, s, p, function(a, b) return b and (a .. '+' .. b) or nil end))
          local items = {}
          local ok, problem = pcall(function()
            for a, b in gmatch(s, p) do
              items[#items + 1] = tostring(a) .. ',' .. tostring(b)
              if #items > 50 then break end
            end
          end)
          record('gmatch', ok, table.concat(items, ';'), problem)
          return table.concat(out, '\\n')
        end
        """

    /// The harness (above) over Lua's own pattern functions and over the sandbox's.
    static func harnesses(_ vm: LuaVM) throws -> (reference: LuaReference, sandbox: LuaReference) {
        let referenceFunctions = vm.referencePatternFunctions()
        let makeHarness = try vm.load(harness, chunkName: "harness.lua")
        let getReference = try vm.load("local r = ...\nreturn r.find, r.match, r.gmatch, r.gsub", chunkName: "ref.lua")
        let references = try vm.callForReferences(getReference, arguments: [.reference(referenceFunctions)]).map { .reference($0!) as LuaArgument }
        let getSandboxed = try vm.load("return string.find, string.match, string.gmatch, string.gsub", chunkName: "sb.lua")
        let sandboxed = try vm.callForReferences(getSandboxed, arguments: []).map { .reference($0!) as LuaArgument }
        let escape = references[3]
        let reference = try #require(try vm.callForReferences(makeHarness, arguments: references + [escape]).first ?? nil)
        let sandbox = try #require(try vm.callForReferences(makeHarness, arguments: sandboxed + [escape]).first ?? nil)
        return (reference, sandbox)
    }

    /// Strips `chunk:line:` positions, which differ between the two implementations' call stacks.
    static func normalized(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.replacing(#/[a-z:.]+:\d+: /#, with: "")
        }.joined(separator: "\n")
    }

    @Test func matchesLuaOnEveryCombination() async throws {
        try await withVM { vm throws in
            let (reference, sandbox) = try Self.harnesses(vm)
            var found = 0, refused = 0
            for subject in Self.subjects {
                for pattern in Self.patterns + Self.badPatterns {
                    let expected = try vm.call(reference, .string(subject), .string(pattern)).first?.string ?? ""
                    let actual = try vm.call(sandbox, .string(subject), .string(pattern)).first?.string ?? ""
                    #expect(Self.normalized(actual) == Self.normalized(expected), "subject \(String(reflecting: subject)), pattern \(String(reflecting: pattern))")
                    if expected.hasPrefix("find|true|2|") { found += 1 }
                    if expected.hasPrefix("find|false|") { refused += 1 }
                }
            }
            // The table exercises both sides: calls that find something, and malformed patterns Lua refuses.
            #expect(found >= 100, "\(found) subject-pattern pairs found a match")
            #expect(refused >= Self.subjects.count * 8, "\(refused) pairs were refused")
        }
    }

    static let atoms = ["a", "b", ".", "%a", "%d", "%s", "%w", "%p", "[ab]", "[^a]", "[a-c]", "[%d_]", "x", "1", " ", "%%", "%."]
    static let quantifiers = ["", "", "", "*", "+", "-", "?"]

    static func randomPattern(_ generator: inout SplitMix) -> String {
        var pattern = Int.random(in: 0..<6, using: &generator) == 0 ? "^" : ""
        var open = 0
        for _ in 0..<Int.random(in: 1...6, using: &generator) {
            switch Int.random(in: 0..<12, using: &generator) {
            case 0 where open < 3:
                pattern += "("
                open += 1
            case 1 where open > 0:
                pattern += ")"
                open -= 1
            case 2: pattern += "()"
            case 3: pattern += "%b()"
            case 4: pattern += "%f[%w]"
            case 5 where pattern.contains("("): pattern += "%1"
            default:
                pattern += atoms.randomElement(using: &generator)! + quantifiers.randomElement(using: &generator)!
            }
        }
        if Int.random(in: 0..<6, using: &generator) == 0 { pattern += "$" }
        return pattern + String(repeating: ")", count: Int.random(in: 0..<3, using: &generator) == 0 ? 0 : open)
    }

    static func randomSubject(_ generator: inout SplitMix) -> String {
        let alphabet = Array("ab1x (_).%-")
        return String((0..<Int.random(in: 0...14, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func matchesLuaOnRandomPatterns(seed: UInt64) async throws {
        try await withVM { vm throws in
            let (reference, sandbox) = try Self.harnesses(vm)
            var generator = SplitMix(state: seed)
            for _ in 0..<400 {
                let pattern = Self.randomPattern(&generator)
                let subject = Self.randomSubject(&generator)
                let expected = try vm.call(reference, .string(subject), .string(pattern)).first?.string ?? ""
                let actual = try vm.call(sandbox, .string(subject), .string(pattern)).first?.string ?? ""
                #expect(Self.normalized(actual) == Self.normalized(expected),
                        "seed \(seed): subject \(String(reflecting: subject)), pattern \(String(reflecting: pattern))")
            }
        }
    }

    @Test func argumentErrorsBlameTheCaller() async throws {
        let error = try await withVM { vm throws in
            luaError { _ = try vm.run("local s = 'abc'\nlocal r = s:find({})", chunkName: "app.lua") }
        }
        #expect(error?.message == "bad argument #1 to 'find' (string expected, got table)") // as Lua counts a method's arguments
        #expect(error?.location == "app.lua:2")
    }

    @Test func malformedPatternsBlameTheCaller() async throws {
        let error = try await withVM { vm throws in
            luaError { _ = try vm.run("local s = 'abc'\n\nlocal r = s:match('[a')", chunkName: "app.lua") }
        }
        #expect(error?.message == "malformed pattern (missing ']')")
        #expect(error?.location == "app.lua:3")
    }
}

/// The deviations issue 12 found, each against Lua's own answer on this machine.
@Suite struct StringDeviationTests {
    @Test(arguments: [
        ("return ('a\\0b'):find('%z')", [LuaValue.integer(2), .integer(2)]),
        ("return ('\\0'):find('[%z\\1-\\31]')", [.integer(1), .integer(1)]),
        ("local n = 0 for c = 0, 255 do if string.char(c):find('%Z') then n = n + 1 end end return n", [.integer(255)]),
        ("return ('x\\0y'):find('%f[%z]')", [.integer(2), .integer(1)]),
        ("local n = 0 for _ in string.gmatch('11 21 31', '%w*', 10) do n = n + 1 end return n", [.integer(0)]),
        ("local n = 0 for _ in string.gmatch('11 21 31', '%w*', 9) do n = n + 1 end return n", [.integer(1)]),
        ("return (('a\\0b\\31'):gsub('[%z\\1-\\31]', function(c) return ('\\\\u%04x'):format(c:byte()) end))",
         [.string("a\\u0000b\\u001f")]),
        ("return pcall(tostring, setmetatable({}, { __tostring = function() return {} end }))",
         [.boolean(false), .string("'__tostring' must return a string")]),
        ("return tostring(setmetatable({}, { __tostring = function() return 42 end }))", [.string("42")]),
        ("return tostring(setmetatable({}, { __name = 'Point' }))", [.string("Point: 0x00000000000001")]),
    ])
    func theSandboxAnswersAsLua(source: String, expected: [LuaValue]) async throws {
        let result = try await withVM { vm in try vm.run(source, chunkName: "case.lua") }
        #expect(result == expected)
    }
}
