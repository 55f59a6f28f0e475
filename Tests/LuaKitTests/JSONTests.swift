import Foundation
import LuaKit
import LuaStoreTestSupport
import Testing

/// `LuaJSON`: JSON text read straight into Lua values (what `luastore run` reads actions with).
@Suite struct JSONTests {
    /// `JSONWriter`: commas, quotes and escapes are its own — what it writes is JSON that reads back as what was
    /// written, nested objects and arrays, empty ones, optionals as `null`, floats as floats, raw fragments as they are.
    @Test func aWriterBuildsJSONThatReadsBack() throws {
        var json = JSONWriter()
        let name = "quote \" back \\ line \n tab \t bell \u{7} é"
        json.object { json in
            json.field("name", name)
            json.field("count", 3)
            json.field("big", UInt64.max)
            json.field("negative", Int64.min)
            json.field("ratio", 2.0)
            json.field("missing", Int?.none)
            json.field("flag", false)
            json.object("empty") { _ in }
            json.array("none", [Int]()) { json, item in json.value(item) }
            json.array("rows", 1...3) { json, row in
                json.object { json in
                    json.field("row", row)
                    json.array("cells", ["a", "b"]) { json, cell in json.value(cell) }
                }
            }
            json.field("fragment", raw: #"{"$map":[[1,true]]}"#)
            json.key("last")
            json.value("end")
        }
        let read = try LuaJSON.parse(json.text)
        #expect(read["name"] == .string(name))
        #expect(read["count"] == 3)
        #expect(read["big"] == .number(Double(UInt64.max)), "(past Int64: a float, as JSON readers take it)")
        #expect(read["negative"] == .integer(Int64.min))
        #expect(read["ratio"] == .number(2.0))
        #expect(read["missing"] == .nil)
        #expect(json.text.contains(#""missing":null"#))
        #expect(read["flag"] == false)
        #expect(json.text.contains(#""empty":{},"none":[]"#))
        #expect(read["rows"][2]["row"] == 2)
        #expect(read["rows"][3]["cells"][2] == "b")
        #expect(read["fragment"]["$map"][1][2] == true)
        #expect(read["last"] == "end")
        var list = JSONWriter()
        list.array(["x", "y"]) { json, item in json.value(item) }
        #expect(list.text == #"["x","y"]"#)
    }

    /// The one plain-JSON writer: what it writes reads back as the very value — integers as integers, floats as
    /// floats (`2.0`, `-0.0`), lists, tables with string and other keys, escapes — keys sorted; NaN refused with
    /// its path.
    @Test func whatIsWrittenReadsBackAsTheSameValue() throws {
        let values: [LuaValue] = [
            2, .number(2.0), .number(-0.0), .number(0.1), .number(1e300), .number(-3.5), "say \"hi\"\n\t\u{1}é",
            [1, 2, 3], ["b": 1, "a": ["x": .number(1.0)]], .boolean(true), .table(LuaTable()),
        ]
        for value in values {
            let text = try LuaJSON.encode(value)
            let back = try LuaJSON.parse(text)
            #expect(back == value, "\(value) → \(text) → \(back)")
            if case .number(let number) = value {
                guard case .number(let read) = back else { Issue.record("\(text) came back as \(back), not a float"); continue }
                #expect(read.sign == number.sign, "\(text)")
            }
            if case .integer = value {
                guard case .integer = back else { Issue.record("\(text) came back as \(back), not an integer"); continue }
            }
        }
        #expect(try LuaJSON.encode(["b": 1, "a": .number(2.0), "c": [.boolean(false)]]) == #"{"a":2.0,"b":1,"c":[false]}"#)
        #expect(try LuaJSON.encode(.table(LuaTable(array: ["x"], fields: [.boolean(true): 1]))) == #"{"1":"x","true":1}"#)
        var escaped: [UInt8] = []
        LuaJSON.quote("a\u{1}\u{1f}\u{7f}", into: &escaped)
        #expect(escaped == Array(#""a\u0001\u001f"#.utf8) + [0x7F, UInt8(ascii: "\"")], "control characters as \\u00XX")
        var digits: [UInt8] = []
        LuaJSON.appendHex(0x0123_4567_89AB_CDEF, digits: 16, into: &digits)
        LuaJSON.appendHex(0xA5, digits: 2, into: &digits)
        #expect(String(decoding: digits, as: UTF8.self) == "0123456789abcdefa5")
        do {
            _ = try LuaJSON.encode(["items": [1, .number(.nan)]], root: "state")
            Issue.record("NaN was written")
        } catch {
            #expect(error.description == "state.items[2]: nan cannot be represented in JSON")
        }
    }

    /// An empty table is `{}`, or `[]` for a format whose empty tables are lists (busted's report); tables with
    /// anything in them are written as before either way.
    /// A table whose keys JSON would name alike — `1` and `"1"`, `true` and `"true"`, in its sequence or not — is
    /// not written as an object that keeps one of the two values: the writer refuses it, naming where and which.
    /// Keys that are other bytes are other names, whatever Unicode says of them.
    @Test func keysThatJSONNamesAlikeAreRefused() {
        let cases: [(LuaValue, String)] = [
            (.table(LuaTable(fields: [.integer(1): "int", .string("1"): "str"])), #"state.x: its keys [1] and ["1"] are both the JSON name "1""#),
            (.table(LuaTable(array: ["first"], fields: [.string("1"): "str"])), #"state.x: its keys [1] and ["1"] are both the JSON name "1""#),
            (.table(LuaTable(fields: [.boolean(true): "b", .string("true"): "s"])), #"are both the JSON name "true""#),
        ]
        for (table, words) in cases {
            do {
                let written = try LuaJSON.encode(["x": table], root: "state")
                Issue.record("written: \(written)")
            } catch {
                #expect(error.description.contains(words), "\(error)")
            }
        }
        #expect((try? LuaJSON.encode(["x": .table(LuaTable(fields: [.integer(2): "two", .string("1"): "one"]))])) == #"{"x":{"1":"one","2":"two"}}"#)
        // Two keys equal as Unicode but not as bytes ("é" composed, and "e" with a combining accent) are two keys in
        // Lua and two names in JSON: both are written.
        let composed = "\u{E9}", decomposed = "e\u{301}"
        #expect((try? LuaJSON.encode(["x": .table(LuaTable(fields: [.string(composed): 1, .string(decomposed): 2]))]))
            == #"{"x":{""# + decomposed + #"":2,""# + composed + #"":1}}"#)
    }

    @Test func emptyTablesAreObjectsOrListsAsTheWriterSays() throws {
        let report: LuaValue = ["pendings": .table(LuaTable()), "successes": [["name": "a", "line": 3]], "duration": .number(0.5)]
        #expect(try LuaJSON.encode(report) == #"{"duration":0.5,"pendings":{},"successes":[{"line":3,"name":"a"}]}"#)
        #expect(try LuaJSON.encode(report, emptyTable: .array) == #"{"duration":0.5,"pendings":[],"successes":[{"line":3,"name":"a"}]}"#)
    }

    @Test func valuesReadAsLuaValues() throws {
        #expect(try LuaJSON.parse(#"{"type":"add","n":3,"x":2.5,"ok":true,"no":false,"gone":null}"#)
            == ["type": "add", "n": 3, "x": 2.5, "ok": true, "no": false])
        #expect(try LuaJSON.parse("[1, 2.0, -0, 1e2, -9223372036854775808, 9223372036854775807]")
            == [1, 2.0, 0, 100.0, .integer(.min), .integer(.max)])
        // Beyond 64 bits a number is a float; "-0" is the integer 0, "-0.0" the float.
        #expect(try LuaJSON.parse("9223372036854775808") == .number(0x1p63))
        #expect(try LuaJSON.parse("-9223372036854775809") == .number(-0x1p63))
        #expect(try LuaJSON.parse("-0.0").number?.sign == .minus)
        // A null element leaves a hole (what the table would hold in Lua).
        let holes = try LuaJSON.parse("[1,null,3]")
        #expect(holes.table?.array == [1])
        #expect(holes.table?[3] == 3)
        #expect(try LuaJSON.parse("{}") == .table(LuaTable()))
        #expect(try LuaJSON.parse(" [ ] ") == .table(LuaTable()))
        // Names that are other bytes are other keys, even where Unicode calls them one text (as Lua does).
        let spellings = try LuaJSON.parse("{\"\u{E9}\":1,\"e\u{301}\":2}")
        #expect(spellings.table?.fields.count == 2)
    }

    /// JSON leaves open which value of a repeated name counts (RFC 8259 §4), and readers differ — a check made by one
    /// of them can be passed by the other's value; so an object naming a member twice is refused, wherever it is.
    @Test func anObjectNamingAMemberTwiceIsRefused() {
        let cases: [(String, String)] = [
            (#"{"a":1,"a":2}"#, #"the name "a" appears twice in one object (JSON leaves open which value counts) at column 8"#),
            (#"{"a":1,"a":null}"#, #"the name "a" appears twice in one object (JSON leaves open which value counts) at column 8"#),
            (#"{"type":"add","by":1,"type":"reset"}"#,
             #"the name "type" appears twice in one object (JSON leaves open which value counts) at column 22"#),
            // Past the few names looked through one by one, and inside a list inside an object.
            (#"{"x":[{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"e":0}]}"#,
             #"the name "e" appears twice in one object (JSON leaves open which value counts) at column 69"#),
            ("{\"a\\n\":1,\"a\\u000a\":2}", #"the name "a\n" appears twice in one object (JSON leaves open which value counts) at column 10"#),
        ]
        Self.expectRefused(cases)
    }

    /// Each text is refused as malformed, with the words and the column given.
    static func expectRefused(_ cases: [(String, String)]) {
        for (text, expected) in cases {
            #expect(throws: LuaJSON.Malformed.self, "\(text)") { try LuaJSON.parse(text) }
            do {
                _ = try LuaJSON.parse(text)
            } catch {
                #expect(error.description == "not valid JSON: " + expected, "\(text)")
            }
        }
    }

    @Test func stringsDecodeEveryEscape() throws {
        #expect(try LuaJSON.parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{C}\n\r\t"))
        #expect(try LuaJSON.parse(#""\u00e9\u4e2d\ud83d\ude00""#) == .string("é中😀"))
        #expect(try LuaJSON.parse("\"é中😀\"") == .string("é中😀"))
        #expect(try LuaJSON.parse(#""\u0000""#) == .string("\u{0}"))
    }

    @Test func malformedTextIsRefusedWithWhereAndWhy() {
        let cases: [(String, String)] = [
            ("", "a value was expected at column 1"),
            (#"{"type":"#, "a value was expected at column 9"),
            (#"{"a":1,}"#, "a member name (a string) was expected at column 8"),
            ("[1,]", "unexpected ']' at column 4"),
            ("[1 2]", "',' or ']' was expected in an array at column 4"),
            (#"{"a" 1}"#, "':' was expected after a member name at column 6"),
            (#"{"a":1 "b":2}"#, "',' or '}' was expected in an object at column 8"),
            ("01", "text after the value at column 2"),
            ("1.", "a digit was expected after '.' at column 3"),
            ("1e", "a digit was expected in the exponent at column 3"),
            ("-", "a digit was expected at column 2"),
            ("+1", "unexpected '+' at column 1"),
            ("tru", "unexpected 't' at column 1"),
            ("nul", "unexpected 'n' at column 1"),
            ("NaN", "unexpected 'N' at column 1"),
            ("1e400", "a number too large at column 1"),
            (#""abc"#, "a string is not closed at column 1"),
            ("\"a\tb\"", "a control character in a string (write it escaped) at column 3"),
            (#""\x""#, "unknown escape '\\x' at column 3"),
            (#""\u12""#, "a \\u escape needs four hex digits at column 4"),
            (#""\ud800""#, "a lone surrogate in a \\u escape at column 8"),
            (#""\udc00""#, "a lone surrogate in a \\u escape at column 8"),
            ("[] x", "text after the value at column 4"),
            ("// comment\n{}", "unexpected '/' at column 1"),
        ]
        Self.expectRefused(cases)
        // Bytes that are not UTF-8 inside a string.
        let invalid: [UInt8] = [0x22, 0x61, 0xFF, 0x22]
        let failure = invalid.withUnsafeBytes { bytes in Result { () throws(LuaJSON.Malformed) in try LuaJSON.parse(bytes) } }
        if case .failure(let error) = failure {
            #expect(error.description == "not valid JSON: a string is not valid UTF-8 at column 1")
        } else {
            Issue.record("a string that is not UTF-8 was read")
        }
    }

    @Test func nestingIsCapped() throws {
        let deep = String(repeating: "[", count: LuaJSON.maximumDepth) + String(repeating: "]", count: LuaJSON.maximumDepth)
        #expect(throws: Never.self) { try LuaJSON.parse(deep) }
        let deeper = "[" + deep + "]"
        #expect(throws: LuaJSON.Malformed.self) { try LuaJSON.parse(deeper) }
    }

    /// Generated documents, written with varied white space and escapes, read back as the values they were
    /// written from; and Foundation's reader agrees that each is JSON.
    @Test(arguments: 1...6)
    func generatedDocumentsReadBackExactly(seed: UInt64) throws {
        var random = SplitMix(state: seed)
        for _ in 0..<150 {
            let (text, expected) = Self.document(depth: 0, random: &random)
            #expect(try LuaJSON.parse(text) == expected, "\(text)")
            #expect((try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil, "\(text)")
        }
    }

    private static func space(_ random: inout SplitMix) -> String {
        ["", "", " ", "\n", "\t ", "\r\n  "][Int(random.next() % 6)]
    }

    private static func document(depth: Int, random: inout SplitMix) -> (String, LuaValue) {
        let kind = depth >= 4 ? random.next() % 5 : random.next() % 7
        switch kind {
        case 0: return ("true", true)
        case 1:
            let integer = Int64(bitPattern: random.next()) >> Int64(random.next() % 63)
            return (String(integer), .integer(integer))
        case 2:
            let number = Double(Int64(bitPattern: random.next()) % 1_000_000) / 64
            let text = random.next() % 2 == 0 ? "\(number)" : String(format: "%.17e", number)
            return (text, .number(Double(text)!))
        case 3:
            let (text, value) = string(&random)
            return (text, .string(value))
        case 4: return ("null", .nil)
        case 5:
            var table = LuaTable()
            var parts: [String] = []
            for index in 0..<Int(random.next() % 5) {
                let (text, value) = document(depth: depth + 1, random: &random)
                parts.append(space(&random) + text + space(&random))
                if value != .nil { table[.integer(Int64(index + 1))] = value }
            }
            return ("[" + parts.joined(separator: ",") + "]", .table(table))
        default:
            var table = LuaTable()
            var parts: [String] = []
            var names: Set<LuaKey> = [] // (an object names each member once: a name met already is not written again)
            for _ in 0..<Int(random.next() % 5) {
                let (nameText, name) = string(&random)
                guard names.insert(.string(name)).inserted else { continue }
                let (text, value) = document(depth: depth + 1, random: &random)
                parts.append(space(&random) + nameText + space(&random) + ":" + space(&random) + text + space(&random))
                table.fields[.string(name)] = value == .nil ? Optional.none : value
            }
            return ("{" + parts.joined(separator: ",") + "}", .table(table))
        }
    }

    /// A string's JSON (some characters escaped, some written as they are) and its value.
    private static func string(_ random: inout SplitMix) -> (String, String) {
        let alphabet: [Character] = ["a", "b", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "é", "中", "😀", "\u{7F}"]
        var text = "\""
        var value = ""
        for _ in 0..<Int(random.next() % 8) {
            let character = alphabet[Int(random.next() % UInt64(alphabet.count))]
            value.append(character)
            let scalar = character.unicodeScalars.first!
            switch character {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += random.next() % 2 == 0 ? "\\n" : "\\u000a"
            case "\t": text += "\\t"
            case "\u{1}": text += "\\u0001"
            case "/": text += random.next() % 2 == 0 ? "/" : "\\/"
            case "😀": text += random.next() % 2 == 0 ? "😀" : "\\ud83d\\ude00"
            default: text += random.next() % 4 == 0 ? String(format: "\\u%04x", scalar.value) : String(character)
            }
        }
        return (text + "\"", value)
    }
}
