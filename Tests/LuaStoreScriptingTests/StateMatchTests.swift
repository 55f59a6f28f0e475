import Foundation
import LuaKit
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// `stateMatches(json:)`: the C reader that tells whether the state is the value a recording's JSON holds, read off
/// the text (a replay checks `init` so). It says "the same" only when it is — the host's own reader and comparison
/// agree on every text below — and "not the same" where it is unsure, leaving the host to decide.
@Suite struct StateMatchTests {
    static let app = #"""
        local app = {}
        function app.init()
          local holes = { 1, 2 }
          holes[4] = 4
          return {
            list = { "a", "b", { nested = { true, false } } },
            object = { name = "ünïcödé \u{1F600}", quote = "say \"hi\"\\/", controls = "tab\tline\nnul\0end\1", empty = {} },
            numbers = { int = 9007199254740993, min = math.mininteger, max = math.maxinteger, float = 0.1, big = 1e300,
                        tiny = 5e-324, negzero = -0.0, whole = 2.0, negative = -17 },
            map = { [true] = "yes", [false] = 0, [1.5] = "half", [7] = "seven", ["7"] = "string seven" },
            holes = holes,
            dollar = { ["$map"] = "a field named $map" },
            deep = { a = { b = { c = { d = { e = "bottom" } } } } },
          }
        end
        function app.reduce(state, action) end
        function app.props(state) return {} end
        return app
        """#

    /// A store of the app above, its state and that state's text as the recorder writes it.
    func makeStore(in folder: AppFolder) async throws -> (store: ScriptedStore, text: String, state: LuaValue) {
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        let state = try await store.state()
        var bytes: [UInt8] = []
        try RecordingJSON.encode(state, into: &bytes)
        return (store, String(decoding: bytes, as: UTF8.self), state)
    }

    /// What the host's reader makes of `text`, compared with the state: equal, different, or not a value at all.
    static func hostSays(_ text: String, _ state: LuaValue) -> Bool? {
        guard let decoded = try? RecordingJSON.decode(RecordingJSON.Value(parsing: ArraySlice(Array(text.utf8)))) else { return nil }
        return JournalComparison.differences(decoded, state, path: "state", limit: 1).isEmpty
    }

    /// The state's own text is the same, written as the recorder writes it or spaced and ordered otherwise.
    @Test func theStatesOwnTextMatches() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let (store, text, state) = try await makeStore(in: folder)
        defer { store.shutdown() }
        #expect(try await store.stateMatches(json: text), "\(text)")
        #expect(Self.hostSays(text, state) == true)
        let spaced = text.replacingOccurrences(of: ",", with: " ,\n\t").replacingOccurrences(of: ":", with: " : ")
        #expect(try await store.stateMatches(json: " \(spaced)\r\n"))
        #expect(Self.hostSays(spaced, state) == true)
        // (Escapes the recorder does not write read as the same characters.)
        let escaped = text.replacingOccurrences(of: #""a""#, with: #""\u0061""#).replacingOccurrences(of: "bottom", with: #"b\u006Fttom"#)
        #expect(escaped != text)
        #expect(try await store.stateMatches(json: escaped))
        #expect(Self.hostSays(escaped, state) == true)
    }

    /// Every change of one value, key or kind of number is not the same — and the host's reader agrees it differs.
    @Test func anyDifferenceIsNotTheSame() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let (store, text, state) = try await makeStore(in: folder)
        defer { store.shutdown() }
        let edits: [(String, String)] = [
            (#""a""#, #""A""#), ("9007199254740993", "9007199254740992"), ("-17", "-17.0"), ("2.0", "2"),
            ("0.1", "0.10000000000000002"), (#""yes""#, "true"), (#"[7,"seven"]"#, #"["7","seven"]"#),
            (#""name":"#, #""Name":"#), (#""empty":{}"#, #""empty":{"x":1}"#), (#""empty":{}"#, #""empty":[1]"#),
            (#"[true,false]"#, #"[true,false,true]"#), (#"[true,false]"#, #"[true]"#), ("bottom", "bottom "),
            (#""e":"bottom""#, #""e":"bottom","f":1"#),
        ]
        try await Self.expectNeverTheSame(edits, of: text, state, in: store)
    }

    /// Each edit of `text` (the state's own) is not the same to the C reader, nor to the host's.
    static func expectNeverTheSame(_ edits: [(String, String)], of text: String, _ state: LuaValue, in store: ScriptedStore) async throws {
        for (old, new) in edits {
            #expect(text.contains(old), "\(old) is in \(text)")
            let edited = text.replacingOccurrences(of: old, with: new)
            #expect(try await store.stateMatches(json: edited) == false, "\(old) → \(new)")
            #expect(hostSays(edited, state) != true, "the host's reader sees \(old) → \(new) too")
        }
    }

    /// A name (or a `$map` key) given twice in one object is never the same, even where the fields count as many as
    /// the table's and each matches: JSON leaves open which one counts, and the host's reader refuses the text.
    @Test func aNameGivenTwiceIsNeverTheSame() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let (store, text, state) = try await makeStore(in: folder)
        defer { store.shutdown() }
        let edits: [(String, String)] = [
            (#""negative":-17"#, #""int":9007199254740993"#), (#"[false,0]"#, #"[true,"yes"]"#),
            (#""quote":"#, #""name":"#),
        ]
        try await Self.expectNeverTheSame(edits, of: text, state, in: store)
        // Many names (past those scanned), one given twice.
        let wide = "{" + (0..<40).map { #""f\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        let twice = wide.replacingOccurrences(of: #""f39":39"#, with: #""f3":3"#)
        let wideFolder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() local t = {} for i = 0, 39 do t["f" .. i] = i end return t end
            function app.reduce(state, action) end
            function app.props(state) return {} end
            return app
            """])
        defer { wideFolder.remove() }
        let (wideStore, _, _) = try await makeStore(in: wideFolder)
        defer { wideStore.shutdown() }
        #expect(try await wideStore.stateMatches(json: wide))
        #expect(try await wideStore.stateMatches(json: twice) == false)
    }

    /// Text that is not JSON, or not JSON this reader takes, is never the same: the host's reader decides.
    @Test func malformedTextIsNeverTheSame() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let (store, text, _) = try await makeStore(in: folder)
        defer { store.shutdown() }
        let broken = [
            String(text.dropLast()), text + "x", text + ",", text.replacingOccurrences(of: "-17", with: "-017"),
            text.replacingOccurrences(of: "-17", with: "+17"), text.replacingOccurrences(of: #""a""#, with: #""\ud800""#),
            text.replacingOccurrences(of: #""a""#, with: #""\x61""#), text.replacingOccurrences(of: #""a""#, with: "\"\u{1}\""),
            text.replacingOccurrences(of: "true", with: "tru"), "", "null", String(repeating: "[", count: 300),
        ]
        for text in broken {
            #expect(try await store.stateMatches(json: text) == false, "\(text.prefix(80))")
        }
    }
}

/// A durable store's state is read and built in its VM (`decodejson`, `applyjson`): the snapshot's text with each
/// later entry's changes applied is the state Swift's own reading makes of them; where the C reader does not take
/// them, the store reads them the Swift way, and a damaged snapshot is an error that says so.
extension StateMatchTests {
    static let changeLists = [
        #"[[["numbers","int"],5],[["list",2]],[["deep","a","b"],{"x":[1,2.5,"z"],"y":{}}]]"#,
        #"[[["map"],{"$map":[[true,1],[2.5,{"k":false}],["$map","v"]]}],[["object","name"],"new \u00e9\ud83d\ude00"]]"#,
        "[]",
        #"[[["holes",3],3],[["holes",9]],[["object","empty","n"],-0.0]]"#,
    ]

    /// The state an engine resumed from `text` and `changes` has, and whether the C reader took them.
    func resume(_ text: String, _ changes: [String], folder: AppFolder) async throws -> (read: Bool, state: LuaValue) {
        let thread = LuaThread(name: "resume-test")
        let persisted = PersistedText(path: "/tmp/store.db", state: text,
                                      changes: changes.enumerated().map { .init(sequence: UInt64($0.offset + 1), text: $0.element) })
        return try await thread.perform { () throws -> (read: Bool, state: LuaValue) in
            let engine = try ScriptEngine(folder: folder.url, thread: thread, limits: LuaLimits(), log: { _ in }, report: { _ in },
                                          resumedText: persisted)
            let state = try engine.state()
            let read = try engine.runtime.setState(text: text, changes: changes)
            #expect(try engine.state() == state, "both ways of placing it give the same state")
            return (read, state)
        }
    }

    @Test func aResumedStateIsBuiltInTheVMAsSwiftReadsIt() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let (store, text, _) = try await makeStore(in: folder)
        store.shutdown()
        for changes in [[], Self.changeLists, Self.changeLists + [#"[[[],{"whole":[1,2]}],[["whole",3],true]]"#]] {
            let expected = try PersistedText(path: "", state: text, changes: changes.map { .init(sequence: 1, text: $0) }).decoded()
            let (read, state) = try await resume(text, changes, folder: folder)
            #expect(read, "the C reader took \(changes)")
            #expect(state == expected)
        }
        // Changes the C reader does not take (a key that is a float with an integer's value) are read the Swift
        // way, to the same state.
        for odd in [#"[[["map",2.0],"two"]]"#] {
            let expected = try PersistedText(path: "", state: text, changes: [.init(sequence: 1, text: odd)]).decoded()
            let (read, state) = try await resume(text, [odd], folder: folder)
            #expect(!read, "\(odd)")
            #expect(state == expected, "\(odd)")
        }
    }

    @Test func aDamagedResumedStateIsAnErrorThatSaysSo() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        for (text, changes, words) in [(#"{"a":"#, [String](), "is damaged: its snapshot's state"),
                                       (#"{"a":1,"b":2,"a":3}"#, [String](),
                                        #"is damaged: its snapshot's state: malformed JSON at byte 14: the name "a" appears twice in one object"#),
                                       (#"{"m":{"$map":[[1,"x"],[true,2],[1,"y"]]}}"#, [String](),
                                        "is damaged: its snapshot's state: the key 1 appears twice in one $map"),
                                       (#"{"a":1}"#, [#"[[["a"],1],"#], "is damaged at entry 1"),
                                       (#"{"a":1}"#, ["[]", #"[[["a","b","c"],1]]"#],
                                        "is damaged at entry 2: its change of state.a.b.c goes through state.a, which is not a table")] {
            do {
                _ = try await resume(text, changes, folder: folder)
                Issue.record("\(text) \(changes) resumed")
            } catch let failure as ScriptFailure {
                #expect(failure.error.message.contains("/tmp/store.db: " + words), "\(failure.error.message)")
            }
        }
    }
}
