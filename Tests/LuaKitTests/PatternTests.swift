@testable import LuaKit
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

    /// Strips `chunk:line:` positions, which differ between the two implementations' call stacks.
    static func normalized(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.replacing(#/[a-z:.]+:\d+: /#, with: "")
        }.joined(separator: "\n")
    }

    @Test func matchesLuaOnEveryCombination() async throws {
        try await withVM { vm throws in
            let referenceFunctions = vm.referencePatternFunctions()
            let makeHarness = try vm.load(Self.harness, chunkName: "harness.lua")
            let getReference = try vm.load("local r = ...\nreturn r.find, r.match, r.gmatch, r.gsub", chunkName: "ref.lua")
            let references = try vm.callForReferences(getReference, arguments: [.reference(referenceFunctions)]).map { .reference($0!) as LuaArgument }
            let getSandboxed = try vm.load("return string.find, string.match, string.gmatch, string.gsub", chunkName: "sb.lua")
            let sandboxed = try vm.callForReferences(getSandboxed, arguments: []).map { .reference($0!) as LuaArgument }
            let escape = references[3]
            let reference = try #require(try vm.callForReferences(makeHarness, arguments: references + [escape]).first ?? nil)
            let sandbox = try #require(try vm.callForReferences(makeHarness, arguments: sandboxed + [escape]).first ?? nil)
            var compared = 0
            for subject in Self.subjects {
                for pattern in Self.patterns + Self.badPatterns {
                    let expected = try vm.call(reference, .string(subject), .string(pattern)).first?.string ?? ""
                    let actual = try vm.call(sandbox, .string(subject), .string(pattern)).first?.string ?? ""
                    #expect(Self.normalized(actual) == Self.normalized(expected), "subject \(String(reflecting: subject)), pattern \(String(reflecting: pattern))")
                    compared += 1
                }
            }
            #expect(compared == Self.subjects.count * (Self.patterns.count + Self.badPatterns.count))
        }
    }

    @Test func argumentErrorsBlameTheCaller() async throws {
        let error = try await withVM { vm throws in
            luaError { _ = try vm.run("local s = 'abc'\nlocal r = s:find({})", chunkName: "app.lua") }
        }
        #expect(error?.message == "bad argument #2 to 'find' (string expected, got table)")
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
