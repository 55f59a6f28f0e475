import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// `readsonly(f, n)` (bytecode.c): whether a function's bytecode provably only reads its `n`-th parameter's fields —
/// what lets a mounted store give a plugin the dispatched action instead of a copy. Checked against what the
/// functions do when they run: an action `copydata` shares with a function (given its answer) never changes.
struct ReadsOnlyTests {
    /// Statements that only read the action `a` (writing the slice `s` and locals freely).
    static let reads = [
        #"s.x = a.type"#,
        #"if a.type == "add" then s.n = (s.n or 0) + 1 end"#,
        #"s.len = #a"#,
        #"local k = "by" s.v = a[k]"#,
        #"if a.flag then s.f = true end"#,
        #"if not a.flag then s.f = false end"#,
        #"s.first = a[1]"#,
        #"local m = s.map or {} m[a.type or "?"] = true s.map = m"#,
        #"if a.by and a.by > 3 then s.big = true end"#,
        #"for i = 1, 2 do s.i = a.by end"#,
        #"s.both = (a.note or "") .. ":" .. tostring(a.by)"#,
        #"if a == nil then s.none = true end"#,
        #"if a.by ~= 4 then s.odd = 1 end"#,
        #"table.insert(s.list, a.note)"#,
        #"s.copy = { a.type, a.by, note = a.note }"#,
        #"local function sum(x, y) return x + y end s.sum = sum(a.by, 1)"#,
        #"s.bigger = a.by >= 3 and a.by < 100"#,
        #"local t = s.list s[#t + 1] = a[2]"#,
    ]

    /// Statements that change the action (or its metatable), each every time it runs.
    static let writes = [
        #"a.type = "forged""#,
        #"a[1] = "x""#,
        #"rawset(a, "z", 1)"#,
        #"local b = a b.z = 2"#,
        #"local function f(x) x.z = 3 end f(a)"#,
        #"local f = function() a.z = 4 end f()"#,
        #"table.insert(a, 5)"#,
        #"s.saved = a s.saved.z = 6"#,
        #"setmetatable(a, {})"#,
        #"local x = a or {} x.z = 7"#,
        #"local t = { a } t[1].z = 8"#,
        #"local t = { x = a } t.x.z = 9"#,
        #"local mt = { __index = function(t, k) k.z = 11 end } local p = setmetatable({}, mt) local _ = p[a]"#,
        #"select(1, a).z = 12"#,
        #"(function(...) local x = ... x.z = 13 end)(a)"#,
        #"coroutine.wrap(function(x) x.z = 14 end)(a)"#,
        #"pcall(function() a.z = 15 end)"#,
        #"s.later = function() a.z = 16 end s.later()"#,
        #"a.type = a.type .. "!""#,
        #"local mt = { __eq = function(x, y) y.z = 17 return false end } local o = setmetatable({}, mt) if o == a then end"#,
        #"local mt = { __add = function(x, y) y.z = 18 return 0 end } local o = setmetatable({}, mt) local _ = o + a"#,
        #"local mt = { __concat = function(x, y) y.z = 19 return "" end } local o = setmetatable({}, mt) local _ = o .. a"#,
        #"local mt = { __lt = function(x, y) y.z = 20 return false end } local o = setmetatable({}, mt) local _ = o < a"#,
        #"local u = a local v = u v.z = 21"#,
        #"for k, v in pairs({ a }) do v.z = 22 end"#,
    ]

    /// Statements the bytecode cannot tell from reads — they change a table reached through a field — which the
    /// list of fields read keeps from sharing a nested action.
    static let nestedWrites = [
        #"local m = a.meta if m then m.seen = true end"#,
        #"local m = a.meta table.insert(m, "x")"#,
        #"s.meta = a.meta s.meta.tag = "forged""#,
    ]

    /// A Lua function `sorted(list)`: a list of keys as one string, sorted and joined by commas (anything else as it is).
    static let sorted = """
        local function sorted(list)
          if type(list) ~= "table" then return list end
          local names = {}
          for i, key in ipairs(list) do names[i] = tostring(key) end
          table.sort(names)
          return table.concat(names, ",")
        end

        """

    /// Runs `body` (the function's statements) as `function(s, a)` on a fresh action holding a nested table, in a
    /// trusted chunk: the judgement (`readsonly` ≠ false), whether `copydata` would share the action given that
    /// answer, and whether the action or its nested table changed.
    static func judge(_ body: String, in vm: LuaVM) throws -> (readOnly: Bool, shared: Bool, changed: Bool) {
        let chunk = try vm.loadTrusted("""
            local f = function(s, a) \(body) end
            local answer = readsonly(f, 2)
            local meta = { tag = "t" }
            local a = { type = "add", by = 4, flag = true, note = "n", meta = meta, "one", "two" }
            local shared = copydata(a, answer) == a
            local before, metaBefore = {}, { tag = "t" }
            for k, v in pairs(a) do before[k] = v end
            local s = { list = {} }
            pcall(f, s, a)
            if type(s.later) == "function" then pcall(s.later) end
            local changed = getmetatable(a) ~= nil or getmetatable(meta) ~= nil
            for k, v in pairs(a) do if before[k] ~= v then changed = true end end
            for k, v in pairs(before) do if a[k] ~= v then changed = true end end
            for k, v in pairs(meta) do if metaBefore[k] ~= v then changed = true end end
            for k, v in pairs(metaBefore) do if meta[k] ~= v then changed = true end end
            return answer ~= false, shared, changed
            """, chunkName: "judge")
        let answer = try vm.call(chunk)
        return (answer[0] == true, answer[1] == true, answer[2] == true)
    }

    /// Each listed statement alone: the reads are judged read-only (else sharing would never happen), the writes
    /// are not, and each does what its list says when it runs (the lists are right about the statements).
    @Test func eachReadIsReadOnlyAndEachWriteIsNot() async throws {
        try await withVM { vm throws in
            for statement in Self.reads {
                let judged = try Self.judge(statement, in: vm)
                #expect(judged.readOnly, "\(statement)")
                #expect(!judged.changed, "\(statement)")
            }
            for statement in Self.writes {
                let judged = try Self.judge(statement, in: vm)
                #expect(!judged.readOnly, "\(statement)")
                #expect(judged.changed, "\(statement)")
            }
            for statement in Self.nestedWrites {
                let judged = try Self.judge(statement, in: vm)
                #expect(judged.readOnly && !judged.shared, "\(statement)")
                #expect(judged.changed, "\(statement)")
            }
        }
    }

    /// Generated functions (seeded): 1–6 statements drawn from the three lists, in any order, some inside branches
    /// and loops. An action that `copydata` would share with a function never changed when it ran; a function
    /// without a write to its argument is judged read-only; one holding a write is not.
    @Test func generatedFunctionsJudgedReadOnlyNeverChangeTheirAction() async throws {
        var generator = SplitMix(state: 0x5EED_0B7E)
        try await withVM { vm throws in
            for _ in 0..<400 {
                var statements: [String] = []
                var writes = false
                for _ in 0..<Int.random(in: 1...6, using: &generator) {
                    var statement: String
                    switch Int.random(in: 0..<8, using: &generator) {
                    case 0, 1:
                        statement = Self.writes.randomElement(using: &generator)!
                        writes = true
                    case 2:
                        statement = Self.nestedWrites.randomElement(using: &generator)!
                    default:
                        statement = Self.reads.randomElement(using: &generator)!
                    }
                    switch Int.random(in: 0..<4, using: &generator) {
                    case 0: statement = "if a.flag then \(statement) end"
                    case 1: statement = "for _ = 1, 1 do \(statement) end"
                    case 2: statement = "do \(statement) end"
                    default: break
                    }
                    statements.append(statement)
                }
                let body = statements.joined(separator: "\n")
                let judged = try Self.judge(body, in: vm)
                if judged.shared { #expect(!judged.changed, "\(body)") }
                #expect(judged.readOnly == !writes, "\(body)")
            }
        }
    }

    /// A function that reads its argument's fields by constant keys only is answered with the list of those keys
    /// (the fields whose values decide whether it may share the table); one reading a field by a key that is a
    /// value, with `true`. `copydata(v, answer)` shares `v` exactly when nothing the function can reach is a table.
    @Test func theFieldsReadAreNamed() async throws {
        try await withVM { vm throws in
            let chunk = try vm.loadTrusted(Self.sorted + """
                local byName = readsonly(function(s, a) if a.type == "add" then s.n = a.by + a[2] end return #a end, 2)
                local byValue = readsonly(function(s, a) local k = s.key return a[k] end, 2)
                local nothing = readsonly(function(s) return s end, 2)
                local nested, flat, withMeta = { type = "add", meta = { tag = "t" } }, { type = "add" }, setmetatable({}, {})
                return sorted(byName), byValue, sorted(nothing),
                       copydata(nested, { "type" }) == nested, copydata(nested, { "type", "meta" }) == nested,
                       copydata(nested, true) == nested, copydata(flat, true) == flat,
                       copydata(withMeta, { "type" }) == withMeta
                """, chunkName: "named")
            #expect(try vm.call(chunk) == ["2,by,type", true, "", true, false, false, true, false])
        }
    }

    /// `readsonly(f, 1, true)`: a reader of the state's root that a run hands the root itself (reads.c,
    /// `run_by_keys`) — the same named fields of its argument read on every run; a branch (`if`, `and`, `or`, a
    /// loop), a length, a copy, a call with it, a key that is a value, a nested function that captures it, a
    /// method call, a write: each refused (`false`).
    @Test func onlyNamedFieldReadsAreFieldsOnly() async throws {
        try await withVM { vm throws in
            let chunk = try vm.loadTrusted(Self.sorted + """
                local function fields(f) return sorted(readsonly(f, 1, true)) end
                return fields(function(s) return { a = s.a, b = s[2] } end),
                       fields(function(s) return s.flag, #tostring(s.y), { x = s.x } end),
                       fields(function(s) if s.flag then return s.x end return s.y end),
                       fields(function(s) return { title = s.title or "" } end),
                       fields(function(s) for i = 1, 2 do local _ = s.x end end),
                       fields(function(s) return #s end),
                       fields(function(s) local t = s return t.a end),
                       fields(function(s) return tostring(s) end),
                       fields(function(s, k) return s[k] end),
                       fields(function(s) return function() return s.a end end),
                       fields(function(s) s.a = 1 end),
                       fields(function(s) return s:get() end)
                """, chunkName: "fields")
            #expect(try vm.call(chunk) == ["2,a", "flag,x,y", false, false, false, false, false, false, false, false, false, false])
        }
    }

    /// What cannot be proved is not: C functions, an argument reached through `...`, a parameter past the last one
    /// (`readsonly(f, 3)` of a two-parameter function never names it: read-only), values that are not functions, a
    /// function that hands its argument to another (`error`, `pairs`) though that one happens not to write it.
    @Test func whatCannotBeProvedIsNotReadOnly() async throws {
        try await withVM { vm throws in
            let chunk = try vm.loadTrusted("""
                local function readsonly(f, n) return _G.readsonly(f, n) ~= false end
                return readsonly(print, 1), readsonly(function(...) end, 1), readsonly(function(s, ...) local a = ... end, 2),
                       readsonly(function(s, a) end, 3), readsonly(function(s, a, ...) end, 3), readsonly({}, 1), readsonly(nil, 1),
                       readsonly(function(s, a) return a.type end, 2), readsonly(function(s, a) return a end, 2),
                       readsonly(function(s, a) error(a) end, 2), readsonly(function(s, a) for k in pairs(a) do end end, 2)
                """, chunkName: "cases")
            #expect(try vm.call(chunk) == [false, false, false, true, false, false, false, true, false, false, false])
        }
    }
}
