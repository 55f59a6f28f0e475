import LuaKit
import LuaStoreTestSupport
import Testing

/// Lua values crossing into Swift and back: raw access, limits, paths of bad values.
@Suite struct ValueConversionTests {
    /// Swift values go into `LuaValue` literals by interpolation or through `LuaValue(_:)`.
    @Test func swiftValuesGoIntoLiterals() {
        let title = "Buy milk", count = 3, price = 2.5, done = true
        let action: LuaValue = ["type": "add", "title": "\(title)", "count": LuaValue(count), "price": LuaValue(price)]
        #expect(action == ["type": "add", "title": "Buy milk", "count": 3, "price": 2.5])
        #expect(LuaValue(title) == .string("Buy milk"))
        #expect(LuaValue(Int64(7)) == .integer(7))
        #expect(LuaValue(done) == true)
        #expect(LuaValue([LuaValue(1), "two"]) == [1, "two"])
        #expect(LuaValue(["a": 1, "gone": nil]) == ["a": 1])
        #expect("\(count) items" as LuaValue == .string("3 items"))
        // (Keys interpolate too: a subscript reads a computed key as a literal one.)
        let state: LuaValue = ["items": ["c3": "third"]]
        #expect(state["items"]["c\(count)"] == "third")
        #expect("c\(count)" as LuaKey == .string("c3"))
    }

    /// Lua's strings are bytes: two spellings of "é" (one code point, or "e" and a combining accent), which
    /// Swift's `String` holds equal as Unicode, are different values and different keys, as Lua has them — kept
    /// apart through a table read from Lua and written back (few fields or many), in equality, hashing, lookups and
    /// literals.
    @Test func stringsAreTheirBytes() async throws {
        let composed = "\u{E9}", decomposed = "e\u{301}"
        #expect(composed == decomposed, "(Swift's own equality, as Unicode)")
        #expect(LuaValue.string(composed) != .string(decomposed))
        #expect(LuaKey.string(composed) != .string(decomposed))
        #expect(Set([LuaKey.string(composed), .string(decomposed)]).count == 2)
        let literal: LuaValue = [composed: 1, decomposed: 2]
        #expect(literal.table?.count == 2)
        #expect(literal[.string(decomposed)] == 2)
        #expect(literal != [composed: 1, composed + "": 2] as LuaValue)
        var many = LuaTable(fields: [.string(composed): 1, .string(decomposed): 2])
        #expect(many.count == 2)
        many[.string(decomposed)] = 3
        #expect(many[.string(composed)] == 1 && many[.string(decomposed)] == 3)
        let (fromLua, backInLua) = try await withVM { vm throws -> (LuaValue, [LuaValue]) in
            let made = try vm.run("""
                local few = { ["\u{E9}"] = 1, ["e\u{301}"] = 2 }
                local many = { ["\u{E9}"] = 1, ["e\u{301}"] = 2 }
                for i = 1, 10 do many["k" .. i] = i end
                return { few = few, many = many }
                """, chunkName: "keys.lua")
            let value = try #require(made.first)
            let count = try vm.load("""
                local t = ...
                local function count(u) local n = 0 for _ in pairs(u) do n = n + 1 end return n end
                return count(t.few), count(t.many), t.few["\u{E9}"], t.few["e\u{301}"], t.many["e\u{301}"]
                """, chunkName: "count.lua")
            return (value, try vm.call(count, value))
        }
        #expect(fromLua["few"].table?.count == 2)
        #expect(fromLua["many"].table?.count == 12)
        #expect(backInLua == [2, 12, 1, 2, 2])
    }

    /// Tables are equal when their entries are, whichever order their fields are listed in and however they are
    /// kept (a few pairs, as literals and converted props are, or a dictionary).
    @Test func tablesAreEqualByTheirEntriesAlone() {
        let table: LuaValue = ["a": 1, "b": "two", "c": [true]]
        #expect(table == ["a": 1, "b": "two", "c": [true]])
        #expect(table == ["c": [true], "a": 1, "b": "two"])
        #expect(table == .table(LuaTable(fields: ["b": "two", "c": [true], "a": 1])))
        #expect(table.hashValue == LuaValue(["c": [true], "a": 1, "b": "two"]).hashValue)
        #expect(table != ["a": 1, "b": "two", "c": [false]])
        #expect(table != ["a": 1, "b": "two", "d": [true]])
        #expect(table != ["a": 1, "c": [true], "d": "two"])
        #expect(table != ["a": 1, "b": "two"])
        #expect(table != ["a": 1, "b": "two", "c": [true], "d": nil, "e": 5])
    }

    /// A few string-keyed fields of booleans, numbers and strings (props, most actions) are read in one go and kept
    /// as pairs; more fields, other keys or a table inside go the general way; a limit is kept either way.
    @Test func flatTablesConvertAsEveryTableDoes() async throws {
        let (flat, wide, mixed, empty) = try await withVM { vm throws in
            let results = try vm.run("""
                local wide = {}
                for i = 1, 9 do wide["k" .. i] = i end
                return { s = "text", i = 3, f = 2.5, whole = 2.0, yes = true, no = false }, wide,
                  { 10, 20, name = "n", nested = { x = 1 } }, {}
                """, chunkName: "flat.lua")
            return (results[0], results[1], results[2], results[3])
        }
        #expect(flat == ["s": "text", "i": 3, "f": 2.5, "whole": .number(2.0), "yes": true, "no": false])
        #expect(flat["whole"] == .number(2.0) && flat["whole"] != .integer(2), "a float stays a float")
        #expect(flat.table?.stringPairs?.count == 6, "kept as pairs")
        #expect(wide.table?.stringPairs == nil && wide.table?.fieldCount == 9)
        #expect(wide["k9"] == 9)
        #expect(mixed == .table(LuaTable(array: [10, 20], fields: ["name": "n", "nested": ["x": 1]])))
        #expect(empty == .table(LuaTable()))

        var limits = LuaLimits()
        limits.conversionElements = 5
        let error = try await withVM(limits: limits) { vm throws in
            luaError { _ = try vm.run("return { a = 1, b = 2, c = 3, d = 4, e = 5 }", chunkName: "five.lua") }
        }
        #expect(error?.message == "more than 5 values to convert")
        #expect(error?.path?.hasPrefix("result.") == true, "\(String(describing: error?.path))")
    }

    @Test func valuesRoundTrip() async throws {
        let value: LuaValue = [
            "title": "Buy milk", "done": false, "count": 3, "ratio": 0.5,
            "tags": ["a", "b"], "nested": ["deep": ["deeper": [1, 2, 3]]], "empty": .table(LuaTable()),
        ]
        try await withVM { vm throws in
            let identity = try vm.load("return ...", chunkName: "id.lua")
            #expect(try vm.call(identity, value) == [value])
            #expect(try vm.call(identity, 1, 2.5, "x", true, nil) == [1, 2.5, "x", true, nil])
        }
    }

    /// Short strings (at most 15 bytes) are pushed from the VM's cache of those pushed lately: strings of every
    /// short length, non-ASCII ones, two spellings of "é", the empty string and far more strings than the cache has
    /// slots (many share a slot) arrive in Lua as their bytes, as keys and as values, again and again — and longer
    /// strings beside them too.
    @Test func shortStringsPushedAgainAreTheirBytes() async throws {
        var strings = (0...15).map { String(repeating: "x", count: $0) } + ["\u{E9}", "e\u{301}", "ünï", "日本", "a\u{0}b"]
        strings += (0..<300).map { "k\($0)" } + ["a string of more than fifteen bytes", String(repeating: "é", count: 8)]
        let table = LuaValue.table(LuaTable(fields: Dictionary(uniqueKeysWithValues: strings.map { (LuaKey.string($0), LuaValue.string($0 + "|")) })))
        try await withVM { vm throws in
            let check = try vm.load("""
                local t, list = ...
                for i = 1, #list do
                  local s = list[i]
                  if t[s] ~= s .. "|" then return "the value of " .. string.format("%q", s) .. " is " .. tostring(t[s]) end
                end
                local n = 0
                for k, v in pairs(t) do n = n + 1 end
                return n
                """, chunkName: "short.lua")
            let list = LuaValue.table(LuaTable(array: strings.map { .string($0) }))
            for _ in 0..<3 {
                #expect(try vm.call(check, table, list) == [.integer(Int64(strings.count))])
                #expect(try vm.call(try vm.load("return ...", chunkName: "id.lua"), list) == [list])
            }
        }
    }

    /// A table of a few string-keyed fields (an action's) whose keys and string values are short is pushed in one
    /// call (`clua_push_small_fields`): each field arrives as Lua has it — integers as integers, floats (NaN, -0.0)
    /// as floats, booleans, short strings as their bytes (non-ASCII, two spellings of "é", the empty key) — and a
    /// table with one long string or a nested table is pushed field by field, the same.
    @Test func fewShortFieldsArriveAsLuaHasThem() async throws {
        try await withVM { vm throws in
            let numbers = try vm.load("""
                local t, n = ...
                local seen = 0
                for k, v in pairs(t) do seen = seen + 1 end
                return seen == n, math.type(t.by), math.type(t.ratio), t.ratio ~= t.ratio, 1 / t.zero, t.flag, t.off, t["日本"]
                """, chunkName: "numbers.lua")
            let strings = try vm.load("""
                local t = ...
                return t[""], #t["e\u{301}"], t["e\u{301}"] == "\u{E9}", t.big, t.type
                """, chunkName: "strings.lua")
            let identity = try vm.load("return ...", chunkName: "id.lua")
            let first: [(String, LuaValue)] = [
                ("by", 1), ("ratio", .number(.nan)), ("zero", .number(-0.0)), ("flag", true), ("off", false), ("日本", "ünï"),
            ]
            let second: [(String, LuaValue)] = [("", "e"), ("e\u{301}", "\u{E9}"), ("big", .integer(.max)), ("type", "add")]
            for extra in [nil, ("long", LuaValue.string("a string of more than fifteen bytes")), ("nested", ["x": 1])] as [(String, LuaValue)?] {
                let more = extra.map { [$0] } ?? []
                let one = LuaValue.table(LuaTable(stringFields: first + more)), two = LuaValue.table(LuaTable(stringFields: second + more))
                #expect(one.table?.stringPairs != nil && two.table?.stringPairs != nil, "a few fields, kept as pairs")
                #expect(try vm.call(numbers, one, .integer(Int64(first.count + more.count))) == [
                    true, "integer", "float", true, .number(-.infinity), true, false, "ünï",
                ], "\(String(describing: extra))")
                #expect(try vm.call(strings, two) == ["e", 2, true, .integer(.max), "add"], "\(String(describing: extra))")
                #expect(try vm.call(identity, two) == [two])
            }
        }
    }

    @Test func tablesSplitIntoSequenceAndFields() async throws {
        let result = try await withVM { vm throws in
            try vm.run("return {10, 20, 30, [5] = 50, x = 'y', [2.5] = 'f', [true] = 1}", chunkName: "t.lua")
        }
        let table = try #require(result.first?.table)
        #expect(table.array == [10, 20, 30])
        #expect(table.fields == [.integer(5): 50, "x": "y", .number(2.5): "f", .boolean(true): 1])
    }

    @Test func conversionRunsNoMetamethods() async throws {
        let error = try await withVM { vm throws in
            luaError { _ = try vm.run("return {f = print}", chunkName: "f.lua") }
        }
        #expect(error?.kind == .conversion)
        #expect(error?.path == "result.f")
        try await withVM { vm throws in
            let chunk = try vm.load("""
                return setmetatable({a = 1}, {
                  __index = function() error('index ran') end,
                  __pairs = function() error('pairs ran') end,
                  __len = function() error('len ran') end,
                })
                """, chunkName: "meta.lua")
            #expect(try vm.call(chunk) == [["a": 1]])
        }
    }

    @Test func cyclesAreRefusedWithThePath() async throws {
        let error = try await withVM { vm throws in
            luaError { _ = try vm.run("local s = {todos = {{}, {}, {title = {}}}}\ns.todos[3].title.back = s\nreturn s", chunkName: "c.lua") }
        }
        #expect(error?.kind == .conversion)
        #expect(error?.path == "result.todos[3].title.back")
        #expect(error?.message == "the table contains itself (a cycle)")
    }

    @Test func sharedSubtablesAreNotCycles() async throws {
        let result = try await withVM { vm throws in
            try vm.run("local shared = {1}\nreturn {a = shared, b = shared}", chunkName: "s.lua")
        }
        #expect(result == [["a": [1], "b": [1]]])
    }

    @Test func deepTablesAreRefused() async throws {
        var limits = LuaLimits()
        limits.timeBudget = .seconds(20)
        let error = try await withVM(limits: limits) { vm throws in
            luaError { _ = try vm.run("local t = {}\nfor i = 1, 100000 do t = {t} end\nreturn t", chunkName: "d.lua") }
        }
        #expect(error?.kind == .conversion)
        #expect(error?.message == "tables nested deeper than 200 levels")
        #expect(error?.path?.hasPrefix("result[1][1][1]") == true)
    }

    @Test func hugeTablesAreRefused() async throws {
        var limits = LuaLimits()
        limits.conversionElements = 1000
        let error = try await withVM(limits: limits) { vm throws in
            luaError { _ = try vm.run("local t = {}\nfor i = 1, 5000 do t[i] = i end\nreturn {items = t}", chunkName: "h.lua") }
        }
        #expect(error?.message == "more than 1000 values to convert")
        #expect(error?.path == "result.items[999]")
    }

    @Test(arguments: [
        ("return {name = 'ok\\255'}", "result.name", "the string is not valid UTF-8"),
        ("return {['bad\\255key'] = 1}", "result", "the string is not valid UTF-8"),
        ("return {1, 2, print}", "result[3]", "a function cannot be converted (only nil, booleans, numbers, strings and tables can)"),
        ("return {[{}] = 1}", "result", "a table key of type table cannot be converted"),
        ("return 1, {x = {y = print}}", "result2.x.y", "a function cannot be converted (only nil, booleans, numbers, strings and tables can)"),
        ("return {['first name'] = print}", "result[\"first name\"]", "a function cannot be converted (only nil, booleans, numbers, strings and tables can)"),
    ])
    func badValuesAreNamedByPath(source: String, path: String, message: String) async throws {
        let error = try await withVM { vm throws in luaError { _ = try vm.run(source, chunkName: "b.lua") } }
        #expect(error?.kind == .conversion)
        #expect(error?.path == path)
        #expect(error?.message == message)
    }

    @Test func pushingRespectsDepthAndMemory() async throws {
        var deep: LuaValue = 1
        for _ in 0..<300 { deep = [deep] }
        var limits = LuaLimits()
        limits.memoryBytes = 4 << 20
        try await withVM(limits: limits) { vm throws in
            let identity = try vm.load("return ...", chunkName: "id.lua")
            let tooDeep = luaError { _ = try vm.call(identity, deep) }
            #expect(tooDeep?.kind == .conversion)
            #expect(tooDeep?.message == "nested deeper than 200 tables")
            #expect(tooDeep?.path == "argument #1" + String(repeating: "[1]", count: 200))
            let big = LuaValue.string(String(repeating: "x", count: 8 << 20))
            let tooBig = luaError { _ = try vm.call(identity, big) }
            #expect(tooBig?.kind == .memory)
            #expect(tooBig?.message == "a string of 8388608 bytes does not fit under the memory cap of 4194304 bytes")
            #expect(try vm.call(identity, "still fine") == ["still fine"])
        }
    }

    /// Results read where they lie: elements of a result list as integers and booleans, straight off the stack —
    /// nil for anything else, a missing element, or a result that is not a table — and converted.
    @Test func resultsAreReadWhereTheyLie() async throws {
        try await withVM { vm throws in
            let chunk = try vm.load("return { 7, 2.0, 2.5, 'x', true, false }, 'not a table'", chunkName: "r.lua")
            let read = try vm.call(chunk, arguments: []) { results throws(LuaError) in
                ((1...7).map { results.integer(1, at: $0) }, (1...7).map { results.boolean(1, at: $0) },
                 results.integer(2, at: 1), results.boolean(3, at: 1), try results.value(1, at: 4, root: "r"))
            }
            #expect(read.0 == [7, 2, nil, nil, nil, nil, nil])
            #expect(read.1 == [nil, nil, nil, nil, true, false, nil])
            #expect(read.2 == nil && read.3 == nil)
            #expect(read.4 == "x")
        }
    }

    /// A list hands many values over at once. A value repeated (the same storage, as when one action is
    /// dispatched again and again) is copied inside the VM rather than converted again: each element is a table
    /// of its own (nested tables too), with the same contents, which a script may change without touching
    /// the others; values equal but not the same, and scalars, arrive as they are.
    @Test func listsCopyRepeatedTablesInsideTheVM() async throws {
        let action: LuaValue = ["type": "move", "by": ["x": 1, "y": [2, 3]], "tags": ["a", "b"]]
        let other: LuaValue = ["type": "move", "by": ["x": 1, "y": [2, 3]], "tags": ["a", "b"]] // equal, not the same
        let values: [LuaValue] = [action, action, action, "text", "text", 7, 7, other, action]
        try await withVM { vm throws in
            let list = try vm.reference(toList: values[...])
            let probe = try vm.load("""
                local list = ...
                local distinct = list[1] ~= list[2] and list[2] ~= list[3] and list[1].by ~= list[2].by
                  and list[1].by.y ~= list[2].by.y and list[1].tags ~= list[3].tags
                list[2].by.y[1] = 99                                  -- changes the second one only
                list[3].type = "changed"
                return distinct, list[1], list[2], list[3], list[9], #list, list[4], list[5], list[6], list[7], list[8]
                """, chunkName: "probe.lua")
            let results = try vm.call(probe, arguments: [.reference(list)])
            #expect(results[0] == true)
            #expect(results[1] == action)
            #expect(results[2] == ["type": "move", "by": ["x": 1, "y": [99, 3]], "tags": ["a", "b"]])
            #expect(results[3] == ["type": "changed", "by": ["x": 1, "y": [2, 3]], "tags": ["a", "b"]])
            #expect(results[4] == action)
            #expect(Array(results[5...]) == [9, "text", "text", 7, 7, other])
            // A flat table (nothing nested), copied from the list of its keys and values the first copy left.
            let tick = LuaValue.table(LuaTable(array: ["first", "second"], fields: ["type": "tick", "n": 1, "ok": true]))
            let ticks = try vm.reference(toList: Array(repeating: tick, count: 4)[...])
            let change = try vm.load("""
                local list = ...
                list[2].n = 2
                list[3][1] = nil
                return list[1] ~= list[2] and list[2] ~= list[3] and list[3] ~= list[4], list[1], list[2], list[3], list[4]
                """, chunkName: "ticks.lua")
            let copies = try vm.call(change, arguments: [.reference(ticks)])
            #expect(copies[0] == true)
            #expect(copies[1] == tick && copies[4] == tick)
            #expect(copies[2] == .table(LuaTable(array: ["first", "second"], fields: ["type": "tick", "n": 2, "ok": true])))
            #expect(copies[3] == .table(LuaTable(fields: [.integer(2): "second", "type": "tick", "n": 1, "ok": true])))
        }
        // For a function that only reads its values' fields: a flat table repeated is the very table again; one
        // holding a table is still copied (such a function may write into the table it reads).
        try await withVM { vm throws in
            let flat: LuaValue = ["type": "tick", "n": 1], nested: LuaValue = ["type": "tock", "at": ["x": 1]]
            let list = try vm.reference(toList: [flat, flat, flat, nested, nested][...], sharingFlatRepeats: true)
            let probe = try vm.load("local l = ... return l[1] == l[2], l[2] == l[3], l[4] == l[5], l[4].at == l[5].at", chunkName: "shared.lua")
            #expect(try vm.call(probe, arguments: [.reference(list)]) == [true, true, false, false])
            let readers = try vm.load("""
                return function(s, a) if a.type == "add" then s.n = s.n + a.by end end,
                       function(s, a) a.seen = true end,
                       function(s, a) s.last = a end
                """, chunkName: "readers.lua")
            let functions = try vm.callForReferences(readers, arguments: []).map { try #require($0) }
            #expect(functions.map { vm.readsOnly(argument: 2, of: $0) } == [true, false, false])
            #expect(vm.readsOnly(argument: 1, of: functions[0]) == false, "it writes into its first")
        }
        var limits = LuaLimits()
        limits.memoryBytes = 4 << 20
        let wide = LuaValue.table(LuaTable(array: (0..<2_000).map { .integer(Int64($0)) }))
        try await withVM(limits: limits) { vm throws in
            let error = luaError { _ = try vm.reference(toList: Array(repeating: wide, count: 200)[...]) }
            #expect(error?.kind == .memory, "copies count against the cap like conversions")
            #expect(try vm.run("return 1", chunkName: "after.lua") == [1])
        }
    }

    /// Values made anew, each a table of a few small fields (actions dispatched one by one), are converted many in
    /// one call: whatever their keys, their order, their number and their values, each arrives as it is, a table of
    /// its own — beside repeats, longer strings, nested tables and wide tables, which take the other ways in.
    @Test func listsConvertTablesMadeAnewManyAtATime() async throws {
        var values: [LuaValue] = []
        for index in 0..<150 {
            let small: LuaValue
            switch index % 7 {
            case 0: small = ["type": "add", "by": .integer(Int64(index)), "note": .string("note \(index % 16)"), "flag": .boolean(index % 2 == 0)]
            case 1: small = ["flag": false, "type": "add", "note": "", "by": -0.5] // the same keys, another order
            case 2: small = ["type": "x"]
            case 3: small = ["a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": .number(8.25)] // eight
            case 4: small = ["a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9] // nine: another way
            case 5: small = ["type": "a string longer than fifteen bytes", "n": .integer(Int64.min)]
            default: small = ["type": "nested", "at": ["x": .integer(Int64(index))]]
            }
            values.append(small)
            if index % 11 == 0 { values.append(small) } // a repeat: copied inside the VM
        }
        values.insert(["k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8], at: 3)
        values.insert(["k9": 9, "k10": 10, "k11": 11, "k12": 12, "k13": 13, "k14": 14, "k15": 15, "k16": 16], at: 4) // past the keys one call keeps
        try await withVM { vm throws in
            let list = try vm.reference(toList: values[...])
            let probe = try vm.load("""
                local list, count = ...
                local seen = {}
                for i = 1, count do
                  if type(list[i]) ~= "table" or seen[list[i]] then return false, i end
                  seen[list[i]] = true
                end
                return #list == count, 0
                """, chunkName: "distinct.lua")
            #expect(try vm.call(probe, arguments: [.reference(list), .value(.integer(Int64(values.count)))]) == [true, 0], "each a table of its own")
            let element = try vm.load("local list, i = ... return list[i]", chunkName: "element.lua")
            for index in values.indices {
                let read = try vm.call(element, arguments: [.reference(list), .value(.integer(Int64(index + 1)))])
                #expect(read == [values[index]], "element \(index + 1)")
            }
        }
        // Under the memory cap, as every conversion is.
        var limits = LuaLimits()
        limits.memoryBytes = 2 << 20
        let many: [LuaValue] = (0..<60_000).map { index -> LuaValue in ["type": "add", "n": .integer(Int64(index)), "note": "a note", "ok": true] }
        try await withVM(limits: limits) { vm throws in
            let error = luaError { _ = try vm.reference(toList: many[...]) }
            #expect(error?.kind == .memory, "tables made in one call count against the cap")
            #expect(try vm.run("return 1", chunkName: "after.lua") == [1])
        }
    }

    @Test func referencesKeepValuesInTheVM() async throws {
        try await withVM { vm throws in
            let make = try vm.load("local state = {items = {1, 2}}\nreturn function() return state end, function(s) return #s.items end", chunkName: "r.lua")
            let functions = try vm.callForReferences(make, arguments: [])
            let getState = try #require(functions[0])
            let count = try #require(functions[1])
            let state = try #require(try vm.callForReferences(getState, arguments: []).first ?? nil)
            let again = try #require(try vm.callForReferences(getState, arguments: []).first ?? nil)
            #expect(vm.isSame(state, again))
            #expect(try vm.call(count, arguments: [.reference(state)]) == [2])
            #expect(vm.typeName(of: state) == "table")
            let items = try #require(try vm.field("items", of: state))
            #expect(try vm.value(of: items, root: "state.items") == [1, 2])
            #expect(try vm.field("missing", of: state) == nil)
        }
    }

    @Test func droppedReferencesFreeTheirRegistrySlots() async throws {
        try await withVM { vm throws in
            let make = try vm.load("return {}", chunkName: "r.lua")
            for _ in 0..<50 { _ = try vm.callForReferences(make, arguments: []) }
            vm.collectGarbage()
            let baseline = vm.memory.bytesInUse
            for _ in 0..<20_000 { _ = try vm.callForReferences(make, arguments: []) }
            vm.collectGarbage()
            #expect(vm.memory.bytesInUse < baseline + 4096)
        }
    }
}

@Test func settingNilRemovesAFieldOfALuaTable() {
    var table = LuaTable(fields: ["a": 1, "b": 2])
    table["a"] = .nil
    table[.integer(7)] = 3
    table[.integer(7)] = .nil
    #expect(table == LuaTable(fields: ["b": 2]))
    #expect(table.fields.count == 1)
}

/// A literal with string keys keeps its fields as pairs (cheap to make: an action per dispatch), and is in every
/// way the same table as one whose fields are a dictionary: equal, hashed alike, read, changed and converted
/// the same.
@Test func tablesWrittenAsLiteralsAreTheSameAsDictionaryTables() async throws {
    let literal: LuaValue = ["type": "add", "by": 2, "note": "x", "flag": true, "gone": .nil, "by": 3]
    let dictionary = LuaValue.table(LuaTable(fields: ["type": "add", "by": 3, "note": "x", "flag": true]))
    #expect(literal == dictionary && dictionary == literal, "a later key replaces an earlier one; nil leaves it out")
    #expect(literal.hashValue == dictionary.hashValue)
    #expect(Set([literal, dictionary]).count == 1)
    #expect(literal != ["type": "add", "by": 3, "note": "x"] && literal != ["type": "add", "by": 3, "note": "x", "flag": false])
    #expect(literal.table?.count == 4 && literal.table?.fieldCount == 4)
    #expect(literal["by"] == 3 && literal["gone"] == .nil && literal.table?[.integer(1)] == .nil)
    #expect(literal.table?.fields == dictionary.table?.fields)
    #expect(literal.table?.sortedFields.map(\.key) == ["by", "flag", "note", "type"])

    var changed = try #require(literal.table)
    changed["by"] = 4
    changed[.integer(1)] = "first"
    changed["note"] = .nil
    #expect(changed == LuaTable(array: ["first"], fields: ["type": "add", "by": 4, "flag": true]))

    // Keys told apart by their length and first eight bytes, and keys that agree on those: longer keys differing
    // only after their eighth byte stay two keys, the same long key twice is one, eight-byte keys differing in
    // their last byte are two, and a key and its eight-byte prefix are two.
    let longKeys: LuaValue = ["selected item": 1, "selected index": 2, "selected item": 3, "eightbyt": 4, "eightbyT": 5,
                              "eightbyte!": 6, "é": 7, "e\u{301}": 8]
    #expect(longKeys == .table(LuaTable(fields: ["selected item": 3, "selected index": 2, "eightbyt": 4, "eightbyT": 5,
                                                 "eightbyte!": 6, "é": 7, "e\u{301}": 8])))
    #expect(longKeys.table?.fieldCount == 7 && longKeys.table?.stringPairs?.count == 7)
    #expect(longKeys["selected item"] == 3 && longKeys["selected index"] == 2 && longKeys["eightbyT"] == 5)
    let long = ["a long key, first", "a long key, second", "a long key"]
    #expect(LuaTable(stringFields: long.map { ($0, .string($0)) })
            == LuaTable(fields: Dictionary(uniqueKeysWithValues: long.map { (LuaKey.string($0), LuaValue.string($0)) })))

    // More fields than a literal keeps as pairs: a dictionary, the same table.
    let wide: LuaValue = ["a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9, "a": 10]
    #expect(wide == .table(LuaTable(fields: ["a": 10, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9])))

    try await withVM { vm throws in
        let identity = try vm.load("return ...", chunkName: "id.lua")
        #expect(try vm.call(identity, literal) == [dictionary])
        let nested: LuaValue = ["type": "t", "payload": ["x": 1, "y": ["z": true]]]
        #expect(try vm.call(identity, nested) == [nested])
        let count = try vm.load("local t = ... local n = 0 for _ in pairs(t) do n = n + 1 end return n, t.by, t.gone", chunkName: "count.lua")
        #expect(try vm.call(count, literal) == [4, 3, nil])
    }
}

/// Generated literals (seeded) of up to a literal's limit of pairs, from keys that agree on their length and first
/// bytes, differ past the eighth, are spelled alike in Unicode but not in bytes, or repeat; some values `nil`: each
/// is the table a dictionary gives, assigning the pairs in order; and two keys are one exactly when their bytes are.
@Test func generatedLiteralsAreTheTablesTheirPairsMake() {
    let keys = ["", "a", "b", "ab", "ba", "abcdefgh", "abcdefgi", "abcdefghi", "abcdefghj", "abcdefgh!", "é", "e\u{301}",
                "selected item", "selected index", "selected itemX", "ключ", "ключи", "a longer key, the first",
                "a longer key, the second"]
    for first in keys {
        for second in keys {
            #expect(String.sameBytes(first, second) == (Array(first.utf8) == Array(second.utf8)), "\(first) / \(second)")
        }
    }
    var random = SplitMix(state: 0x5EED_0F_11_7E_4A15)
    for round in 0..<2_000 {
        let count = Int.random(in: 0...8, using: &random)
        let pairs: [(String, LuaValue)] = (0..<count).map { index in
            let value: LuaValue = Int.random(in: 0..<6, using: &random) == 0 ? .nil : .integer(Int64(round * 10 + index))
            return (keys.randomElement(using: &random)!, value)
        }
        var expected: [LuaKey: LuaValue] = [:]
        for (key, value) in pairs {
            if value == .nil { expected.removeValue(forKey: .string(key)) } else { expected[.string(key)] = value }
        }
        let table = LuaTable(stringFields: pairs)
        #expect(table == LuaTable(fields: expected), "round \(round): \(pairs)")
        #expect(table.fieldCount == expected.count && table.fields == expected, "round \(round): \(pairs)")
        #expect(table.hashValue == LuaTable(fields: expected).hashValue, "round \(round)")
    }
}

/// A table read from the VM keeps a few string-keyed fields as pairs too, and is the same table as one built
/// with a dictionary: up to the limit and past it, with string keys after other keys and before them, with a
/// sequence beside them; it can be changed, and it crosses back.
@Test func tablesReadFromTheVMAreTheSameWhicheverWayTheirFieldsAreKept() async throws {
    try await withVM { vm throws in
        let cases: [(source: String, expected: LuaTable)] = [
            ("return {count = 3, note = 'x', flag = false}", LuaTable(fields: ["count": 3, "note": "x", "flag": false])),
            ("return {a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8}",
             LuaTable(fields: ["a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8])),
            ("return {a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9}",
             LuaTable(fields: ["a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8, "i": 9])),
            ("return {10, 20, x = 'y', [5] = 50, [true] = 't', z = {w = 1}}",
             LuaTable(array: [10, 20], fields: ["x": "y", .integer(5): 50, .boolean(true): "t", "z": ["w": 1]])),
            ("local t = {[2.5] = 'f'} t.k = 'v' return t", LuaTable(fields: [.number(2.5): "f", "k": "v"])),
            ("return {}", LuaTable()),
        ]
        for (source, expected) in cases {
            let read = try #require(try vm.run(source, chunkName: "t.lua").first?.table)
            #expect(read == expected && expected == read, "\(source)")
            #expect(read.hashValue == expected.hashValue, "\(source)")
            #expect(read.fields == expected.fields && read.count == expected.count, "\(source)")
            var changed = read
            changed["added"] = true
            var expectedChanged = expected
            expectedChanged["added"] = true
            #expect(changed == expectedChanged, "\(source)")
            let identity = try vm.load("return ...", chunkName: "id.lua")
            #expect(try vm.call(identity, .table(read)) == [.table(expected)], "\(source)")
        }
        let different = try #require(try vm.run("return {count = 3, note = 'y'}", chunkName: "d.lua").first?.table)
        #expect(different != LuaTable(fields: ["count": 3, "note": "x"]))
    }
}
