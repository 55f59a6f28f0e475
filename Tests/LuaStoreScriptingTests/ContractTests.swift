import Foundation
import LuaKit
import LuaStoreConcurrency
@testable import LuaStoreContract
import LuaStoreCore
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// An app's contract in LuaLS annotations (docs/contracts.md): read from its files, refused in words where it leaves
/// the notation LuaStore checks, and enforced — an action it does not declare is refused before any reducer runs,
/// journaled as a failure of its own stage, in a run of queued actions as alone.
@Suite struct ContractTests {
    static let declared = """
        local app = {}

        ---@class Todo
        ---@field title string The todo's words.
        ---@field done boolean
        ---@field tags? table<string, integer>

        ---@class State
        ---@field todos Todo[]
        ---@field filter "all"|"open"|"done"

        ---@class AddAction
        ---@field type "add"
        ---@field title string
        ---@field note? string

        ---@class ToggleAction
        ---@field type "toggle"
        ---@field index integer

        ---@class FilterAction
        ---@field type 'filter'
        ---@field filter "all"|"open"|"done"

        ---@alias Action AddAction|ToggleAction|FilterAction

        ---@class Props
        ---@field count integer
        ---@field titles string[]

        ---@return State
        function app.init() return { todos = {}, filter = "all" } end

        ---@param state State
        ---@param action Action
        function app.reduce(state, action)
          if action.type == "add" then
            state.todos[#state.todos + 1] = { title = action.title, done = false }
          elseif action.type == "toggle" then
            state.todos[action.index].done = not state.todos[action.index].done
          elseif action.type == "filter" then
            state.filter = action.filter
          end
        end

        ---@param state State
        ---@return Props
        function app.props(state)
          local titles = {}
          for i, todo in ipairs(state.todos) do titles[i] = todo.title end
          return { count = #state.todos, titles = titles }
        end

        return app
        """

    @Test func theAnnotationsAreRead() throws {
        let folder = try AppFolder(["app.lua": Self.declared])
        defer { folder.remove() }
        let (contract, problems) = AppContract.read(app: folder.url)
        #expect(problems.isEmpty, "\(problems)")
        #expect(contract.declares)
        #expect(contract.action == .named("Action") && contract.props == .named("Props") && contract.state == .named("State"))
        #expect(contract.actionParameter == "action")
        #expect(contract.actionCases.keys.sorted() == ["add", "filter", "toggle"])
        let todo = try #require(contract.classes["Todo"])
        #expect(todo.fields.map(\.name) == ["title", "done", "tags"])
        #expect(todo.fields.map(\.type) == [.string, .boolean, .map(.integer)])
        #expect(todo.fields.map(\.optional) == [false, false, true])
        #expect(contract.classes["State"]?.fields.last?.type == .union([.literal("all"), .literal("open"), .literal("done")]))
    }

    static let actions: [(LuaValue, String?)] = [
        (["type": "add", "title": "milk"], nil),
        (["type": "add", "title": "milk", "note": "2 l"], nil),
        (["type": "toggle", "index": 2], nil),
        (["type": "filter", "filter": "open"], nil),
        (["type": "ad", "title": "milk"], #"action type "ad" is not declared (the contract declares "add", "filter", "toggle")"#),
        (["type": "add"], "action.title is missing (AddAction declares it string)"),
        (["type": "add", "title": 5], "action.title is 5, not string"),
        (["type": "add", "title": "milk", "titel": "x"], "action.titel is not a field of AddAction (it declares type, title, note)"),
        (["type": "toggle", "index": 1.5], "action.index is 1.5, not integer"),
        (["type": "filter", "filter": "some"], #"action.filter is "some", not "all"|"open"|"done""#),
        (.table(LuaTable(array: [1], fields: [.string("type"): "add", .string("title"): "x"])), "action[1] is a list item, which AddAction does not declare"),
        (["kind": "add"], "action is a table, not Action"),
    ]

    /// Values are checked against a type, each difference named by its path.
    @Test(arguments: actions)
    func actionsAreCheckedNamingWhatDiffers(action: LuaValue, problem: String?) throws {
        let folder = try AppFolder(["app.lua": Self.declared])
        defer { folder.remove() }
        let contract = AppContract.read(app: folder.url).contract
        #expect(contract.mismatch(ofAction: action) == problem)
    }

    /// Entry points are found in a line as the three patterns of the notation say (the regular expressions the
    /// reader used before it read bytes, kept here as the oracle): the same name and parameters, or none, on lines
    /// written to tell them apart and on lines made at random of their pieces.
    @Test func entryPointsAreFoundAsThePatternsSay() {
        func oracle(_ line: Substring) -> (name: String, parameters: [String])? {
            let patterns = [
                #/^function\s+[A-Za-z_][A-Za-z0-9_]*[.:](init|reduce|props)\s*\(([^)]*)\)/#,
                #/^[A-Za-z_][A-Za-z0-9_]*\.(init|reduce|props)\s*=\s*function\s*\(([^)]*)\)/#,
                #/^local\s+function\s+(init|reduce|props)\s*\(([^)]*)\)/#,
            ]
            for pattern in patterns {
                if let match = line.prefixMatch(of: pattern) {
                    return (String(match.output.1), match.output.2.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                }
            }
            return nil
        }
        var lines: [String] = [
            "function app.reduce(state, action)", "function app:props( state )", "function M.init()", "function  app.reduce (s,a) end",
            "app.props = function(state) return {} end", "app.reduce=function ( state , action )", "local function init()",
            "local  function\tprops(state)", "function app.initialize(state)", "function app.reduce", "function app.reduce(state",
            "function reduce(state, action)", "app.init = 3", "app.props = function", "local function reducer(s)", "localfunction init()",
            "functionapp.reduce(s)", "function app.reduce(state, action) -- (props)", "function 1app.reduce(s)", "function app.reducé(s)",
            "app.init =function()", "app.init= function ()", "_G.props = function(a, b, c)", "function a_1.props(x)", "", "function",
        ]
        var generator = SystemRandomNumberGenerator()
        let pieces = ["function", "local", " ", "  ", "\t", "app", ".", ":", "init", "reduce", "props", "(", ")", "state", ",", "=", "x", "é", "1"]
        for _ in 0..<3_000 { lines.append((0..<Int.random(in: 1...9, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()) }
        for line in lines {
            let found = AppContract.entryPoint(line[...]), expected = oracle(line[...])
            #expect(found?.name == expected?.name && found?.parameters == expected?.parameters, "\(line.debugDescription)")
        }
    }

    /// The dispatch's fast path (keys and literals compared by their bits first, fields looked for at their own
    /// position first) decides as Lua compares strings: byte for byte, whatever the length, however a string is kept.
    @Test func longKeysLiteralsAndStringsKeptApartAreComparedByTheirBytes() throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            ---@class Long
            ---@field type "a-rather-long-action-type"
            ---@field aVeryLongFieldNameIndeed string
            ---@field n? integer
            ---@class Accented
            ---@field type "café"
            ---@alias Action Long|Accented
            function app.init() return {} end
            ---@param action Action
            function app.reduce(state, action) end
            function app.props(state) return {} end
            return app
            """])
        defer { folder.remove() }
        let checker = ContractChecker(AppContract.read(app: folder.url).contract)
        /// The same bytes as `text`, kept in storage of their own (a string of a few bytes is otherwise kept within
        /// its own bits).
        func keptApart(_ text: String) -> String {
            var kept = text + String(repeating: "-", count: 40)
            kept.removeLast(40)
            return kept
        }
        let accepted: [LuaValue] = [
            ["type": "a-rather-long-action-type", "aVeryLongFieldNameIndeed": "x"],
            ["n": 1, "aVeryLongFieldNameIndeed": "x", "type": "a-rather-long-action-type"],
            .table(LuaTable(stringFields: [(keptApart("type"), .string(keptApart("a-rather-long-action-type"))),
                                           (keptApart("aVeryLongFieldNameIndeed"), "x"), (keptApart("n"), 2)])),
            ["type": "café"],
            .table(LuaTable(stringFields: [(keptApart("type"), .string(keptApart("café")))])),
        ]
        // (Each also as the fast path alone answers: it must take what the words take, and nothing else.)
        let contract = checker.contract
        func fastPath(_ action: LuaValue) -> Bool {
            guard case .table(let table) = action, case .string(let type) = table["type"] else { return false }
            let name = type.hasPrefix("caf") ? "Accented" : "Long"
            return ClassShape(contract.classes[name]?.fields ?? []).conforms(table, in: checker)
        }
        for action in accepted {
            #expect(checker.mismatch(ofAction: action) == nil, "\(action)")
            #expect(fastPath(action), "\(action)")
        }
        let refused: [LuaValue] = [
            ["type": "a-rather-long-action-typo", "aVeryLongFieldNameIndeed": "x"],
            ["type": "a-rather-long-action-type", "aVeryLongFieldNameIndeeD": "x"],
            ["type": "a-rather-long-action-type", "aVeryLongFieldNameIndeed": "x", "N": 1],
            ["type": "cafe\u{301}"],
            ["type": "caf"],
            .table(LuaTable(stringFields: [(keptApart("typ"), .string(keptApart("café")))])),
        ]
        for action in refused {
            #expect(checker.mismatch(ofAction: action) != nil, "\(action)")
            #expect(!fastPath(action), "\(action)")
        }
    }

    @Test func nestedValuesNameTheirPath() throws {
        let folder = try AppFolder(["app.lua": Self.declared])
        defer { folder.remove() }
        let contract = AppContract.read(app: folder.url).contract
        let state: LuaValue = ["todos": [["title": "a", "done": false], ["title": "b", "done": "no"]], "filter": "all"]
        #expect(contract.mismatch(of: state, as: .named("State"), at: "state") == #"state.todos[2].done is "no", not boolean"#)
        let tagged: LuaValue = ["todos": [["title": "a", "done": false, "tags": ["x y": 1.5]]], "filter": "all"]
        #expect(contract.mismatch(of: tagged, as: .named("State"), at: "state") == #"state.todos[1].tags["x y"] is 1.5, not integer"#)
        let keyed: LuaValue = ["todos": ["first": ["title": "a", "done": false]], "filter": "all"]
        #expect(contract.mismatch(of: keyed, as: .named("State"), at: "state") == "state.todos.first is not an item of a list (Todo[] is declared at state.todos)")
        #expect(contract.mismatch(of: ["count": 1, "titles": ["a"]], as: .named("Props"), at: "props") == nil)
        // The props as a store checks them at each change (their class laid out): the same answers, the same words.
        let checker = ContractChecker(contract)
        #expect(checker.mismatch(ofProps: ["count": 1, "titles": ["a"]]) == nil)
        #expect(checker.mismatch(ofProps: ["count": 1, "titles": [2]]) == "props.titles[1] is 2, not string")
        #expect(checker.mismatch(ofProps: ["count": 1]) == "props.titles is missing (Props declares it string[])")
        #expect(checker.mismatch(ofProps: ["count": 1, "titles": [], "extra": true])
                == "props.extra is not a field of Props (it declares count, titles)")
        #expect(checker.mismatch(ofProps: "none") == #"props is "none", not Props"#)
    }

    /// What leaves the notation is refused, at its file and line — when the app declares a contract; annotations no
    /// entry point uses are the editor's, and an app with only those runs as before.
    @Test(arguments: [
        ("---@class A\n---@field x any", "app.lua:2: field x: 'any' is outside the contract's types"),
        ("---@class A\n---@field x table", "app.lua:2: field x: 'table' says nothing of what it holds"),
        ("---@class A\n---@field x table<integer, string>", "app.lua:2: field x: table<integer, …> is outside the contract's types"),
        ("---@class A: B\n---@field x string", "app.lua:1: class A inherits"),
        ("---@enum Colors", "app.lua:1: ---@enum is outside the contract's notation"),
        ("---@alias Kind\n---| \"a\"\n---| \"b\"", "app.lua:2: an alias written over several lines"),
        ("---@class A\n---@field x Missing", "app.lua:2: field x of A is a Missing, which no ---@class or ---@alias declares"),
        ("---@field x string", "app.lua:1: ---@field outside a ---@class"),
        ("---@class A\n---@field x string\n---@field x integer", "app.lua:3: field x of A is declared twice"),
        ("---@class A\n---@field x fun(a: string)", "app.lua:2: field x: 'fun' is outside the contract's types"),
    ])
    func annotationsOutsideTheNotationAreProblems(annotations: String, problem: String) async throws {
        let entry = "\n---@param action A\nfunction app.reduce(state, action) end\n"
        let source = annotations + "\nlocal app = {}\nfunction app.init() return {} end" + entry + "function app.props() return {} end\nreturn app\n"
        let folder = try AppFolder(["app.lua": source])
        defer { folder.remove() }
        let found = AppContract.read(app: folder.url).problems.map(\.description)
        #expect(found.contains { $0.hasPrefix(problem) }, "\(found)")
        // A store will not run a declared contract it cannot check: the load fails, naming the place.
        await #expect(throws: ScriptFailure.self) { _ = try await ScriptedStore(app: folder.url, options: Recorder().options) }
        do {
            _ = try await ScriptedStore(app: folder.url, options: Recorder().options)
        } catch {
            #expect(error.stage == .load && "\(error.error)".contains("the app's contract"), "\(error)")
        }
        // Without the entry point's declaration, the same annotations are the editor's: the app loads.
        let editorOnly = try AppFolder(["app.lua": source.replacingOccurrences(of: "---@param action A\n", with: "")])
        defer { editorOnly.remove() }
        let store = try await ScriptedStore(app: editorOnly.url, options: Recorder().options)
        store.shutdown()
    }

    /// The store's own actions (`luastore/reloaded`, after a hot reload) are not the app's to declare.
    @Test func theStoresOwnActionsAreNotChecked() async throws {
        let folder = try AppFolder(["app.lua": Self.declared])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        defer { store.shutdown() }
        try folder.write("app.lua", Self.declared.replacingOccurrences(of: "done = false }", with: "done = true }"))
        _ = try await store.reload()
        await store.barrier()
        _ = await store.send(["type": "add", "title": "milk"])
        #expect(try await store.state()["todos"] == [["title": "milk", "done": true]])
        #expect(recorder.failures.withLock { $0 }.isEmpty, "\(recorder.failures.withLock { $0 })")
    }

    /// A contract is read once per version of an app's scripts: a store of the same app takes the reading of the one
    /// before, and a reload or a new store of a changed app reads the change (a field declared anew takes effect).
    @Test func aChangedContractIsReadAgain() async throws {
        let folder = try AppFolder(["app.lua": Self.declared])
        defer { folder.remove() }
        let first = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { first.shutdown() }
        #expect(await first.send(["type": "add", "title": "milk", "urgent": true]).failure?.stage == .undeclared)
        let urgent = Self.declared.replacingOccurrences(of: "---@field note? string", with: "---@field note? string\n---@field urgent? boolean")
        try folder.write("app.lua", urgent)
        _ = try await first.reload()
        #expect(await first.send(["type": "add", "title": "milk", "urgent": true]).failure == nil)
        let second = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { second.shutdown() }
        #expect(await second.send(["type": "add", "title": "milk", "urgent": true]).failure == nil)
        #expect(await second.send(["type": "add", "title": "milk", "urgent": "yes"]).failure?.stage == .undeclared)
        try folder.write("app.lua", Self.declared)
        let third = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { third.shutdown() }
        #expect(await third.send(["type": "add", "title": "milk", "urgent": true]).failure?.stage == .undeclared)
    }

    /// Props that do not match their declaration are the props' failure, at the declaration's line: observers are
    /// not handed them, `props()` throws, and the action that made them stays applied; the next good props reach
    /// observers again.
    @Test func propsThatDoNotMatchAreThePropsFailure() async throws {
        let source = Self.declared.replacingOccurrences(of: "return { count = #state.todos, titles = titles }",
                                                        with: #"return { count = state.filter == "done" and "none" or #state.todos, titles = titles }"#)
        let folder = try AppFolder(["app.lua": source])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        defer { store.shutdown() }
        recorder.observe(store)
        let line = try #require(source.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0 == "---@return Props" }) + 1
        _ = await store.send(["type": "add", "title": "milk"])
        let bad = await store.send(["type": "filter", "filter": "done"])
        #expect(bad.entry != nil, "the action stays applied: \(bad)")
        #expect(try await store.state()["filter"] == "done")
        await store.barrier()
        let failure = try #require(recorder.failures.withLock { $0 }.first { $0.stage == .props })
        #expect(failure.error.message == #"the props do not match their declaration: props.count is "none", not integer"#)
        #expect(failure.error.location == "app.lua:\(line)")
        await #expect(throws: (any Error).self) { _ = try await store.props() }
        #expect(recorder.props.withLock { $0 }.allSatisfy { $0["count"] != "none" })
        _ = await store.send(["type": "filter", "filter": "all"])
        await store.barrier()
        #expect(recorder.props.withLock { $0 }.last == ["count": 1, "titles": ["milk"]])
    }

    /// An action the contract does not declare is refused before any reducer runs — the state as it was — as a
    /// failure of its own stage, journaled as a failed entry; in a run of queued actions the ones around it keep
    /// theirs.
    @Test func undeclaredActionsAreRefusedAndJournaled() async throws {
        let folder = try AppFolder(["app.lua": Self.declared])
        defer { folder.remove() }
        let recorder = Recorder()
        let journal = Protected<[JournalEntry]>([])
        var options = recorder.options
        options.journal = { entry in journal.withLock { $0.append(entry) } }
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        let applied = await store.send(["type": "add", "title": "milk"])
        #expect(applied.entry != nil, "\(applied)")
        let refused = await store.send(["type": "add", "title": 5])
        let failure = try #require(refused.failure, "\(refused)")
        #expect(failure.stage == .undeclared && failure.error.message == "action.title is 5, not string")
        #expect(try await store.state()["todos"] == [["title": "milk", "done": false]])
        // A run: 60 actions dispatched at once, every fifth undeclared (12).
        for index in 0..<60 {
            store.dispatch(index % 5 == 4 ? ["type": "remove", "index": .integer(Int64(index))] : ["type": "add", "title": .string("t\(index)")])
        }
        await store.barrier()
        #expect(try await store.props()["count"] == 49)
        let entries = journal.withLock { $0 }
        #expect(entries.count == 62)
        let undeclared = entries.filter { $0.failure?.stage == .undeclared }
        #expect(undeclared.count == 13)
        #expect(undeclared.last?.failure?.error.message == #"action type "remove" is not declared (the contract declares "add", "filter", "toggle")"#)
        #expect(entries.map(\.sequence) == Array(1...62).map(UInt64.init))
        #expect(recorder.failures.withLock { $0 }.filter { $0.stage == .undeclared }.count == 13)
    }
}
