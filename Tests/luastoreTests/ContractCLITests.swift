import Foundation
import LuaStoreTestSupport
import Testing

/// A declared contract through the built binary: `check` reports what leaves the notation, an initial state or
/// props that do not match, declared actions no reducer handles and handled ones not declared; `run` refuses an
/// undeclared action naming what is wrong, and its recording replays with the refusals in their places.
@Suite struct ContractCLITests {
    static func app(reduce: String = """
        if action.type == "add" then
          state.items[#state.items + 1] = action.title
        elseif action.type == "clear" then
          state.items = {}
        end
        """, initial: String = "{ items = {} }", props: String = "{ count = #state.items }", extra: String = "") -> String {
        """
        local app = {}

        ---@class State
        ---@field items string[]

        ---@class Add
        ---@field type "add"
        ---@field title string

        ---@class Clear
        ---@field type "clear"

        ---@alias Action Add|Clear

        ---@class Props
        ---@field count integer
        \(extra)
        ---@return State
        function app.init() return \(initial) end

        ---@param state State
        ---@param action Action
        function app.reduce(state, action)
          \(reduce)
        end

        ---@return Props
        function app.props(state) return \(props) end

        return app
        """
    }

    @Test func checkReportsWhatTheContractSaysAgainstWhatTheAppDoes() async throws {
        let valid = try CLI.makeApp(Self.app())
        defer { try? FileManager.default.removeItem(at: valid) }
        let ok = try await CLI.run(["check", valid.path])
        #expect(ok.status == 0 && ok.output.contains("ok:"), "\(ok.output)\(ok.errors)")

        let cases: [(source: String, words: String)] = [
            (Self.app(reduce: #"if action.type == "add" then state.items[1] = action.title elseif "remove" == action.type then state.items = {} end"#),
             #"app.lua:10: action "clear" is declared (Clear) but no reducer handles it"#),
            (Self.app(reduce: #"if action.type == "add" then state.items[1] = action.title elseif "remove" == action.type then state.items = {} end"#),
             #"the reducer handles action "remove", which the contract does not declare"#),
            (Self.app(reduce: #"local kind = action.type if kind == "add" then state.items[1] = action.title end"#),
             #"app.lua:10: action "clear" is declared (Clear) but no reducer handles it"#),
            (Self.app(initial: "{ items = { 1, 2 } }"), "app.lua: the state init makes does not match its declaration: state.items[1] is 1, not string"),
            (Self.app(props: #"{ count = "many" }"#), #"app.lua:31: the props do not match their declaration: props.count is "many", not integer (props)"#),
            (Self.app(extra: "---@class Odd: Props"), "app.lua:17: class Odd inherits"),
            (Self.app(extra: "---@class Odd\n---@field when any"), "app.lua:18: field when: 'any' is outside the contract's types"),
        ]
        for item in cases {
            let app = try CLI.makeApp(item.source)
            defer { try? FileManager.default.removeItem(at: app) }
            let checked = try await CLI.run(["check", app.path])
            #expect(checked.status == 1 && checked.errors.contains(item.words), "\(item.words)\n\(checked.errors)")
        }
    }

    /// `luastore check` reads the contract of each plugin the app mounts from a folder as it reads the app's: its slice
    /// against its declaration, its declared actions against the ones its reducer compares, its notation.
    @Test func checkReadsTheContractsOfMountedPlugins() async throws {
        func shop(cart: String) throws -> URL {
            let folder = try CLI.makeApp("""
                local app = {}
                function app.init() return {} end
                function app.props(state) return { items = #state.cart.items } end
                return app
                """)
            try Data(#"{ "name": "shop", "version": "1.0.0", "luastore": "^1.0", "mounts": { "cart": "plugins/cart" } }"#.utf8)
                .write(to: folder.appendingPathComponent("luastore.json"))
            let plugin = folder.appendingPathComponent("plugins/cart")
            try FileManager.default.createDirectory(at: plugin, withIntermediateDirectories: true)
            try Data(#"{"name": "cart", "version": "1.0.0", "luastore": "^1.0"}"#.utf8).write(to: plugin.appendingPathComponent("luastore.json"))
            try Data(cart.utf8).write(to: plugin.appendingPathComponent("app.lua"))
            return folder
        }
        let cart = """
            local cart = {}
            ---@class AddItem
            ---@field type "addItem"
            ---@field sku string
            ---@class Slice
            ---@field items string[]
            ---@return Slice
            function cart.init() return { items = {} } end
            ---@param action AddItem
            function cart.reduce(slice, action)
              if action.type == "addItem" then slice.items[#slice.items + 1] = action.sku end
            end
            return cart
            """
        let good = try shop(cart: cart)
        defer { try? FileManager.default.removeItem(at: good) }
        let ok = try await CLI.run(["check", good.path])
        #expect(ok.status == 0, "\(ok.errors)")
        let cases: [(source: String, words: String)] = [
            (cart.replacingOccurrences(of: "return { items = {} }", with: "return { items = { 3 } }"),
             "plugins/cart/app.lua: the slice init makes does not match its declaration: state.cart.items[1] is 3, not string"),
            (cart.replacingOccurrences(of: #"if action.type == "addItem" then"#, with: #"if action.type == "dropItem" then"#),
             #"plugins/cart/app.lua:11: the reducer handles action "dropItem", which the contract does not declare"#),
            (cart.replacingOccurrences(of: "---@field sku string", with: "---@field sku strng"),
             "plugins/cart/app.lua:4: plugin 'cart''s contract: field sku of AddItem is a strng"),
        ]
        for item in cases {
            let app = try shop(cart: item.source)
            defer { try? FileManager.default.removeItem(at: app) }
            let checked = try await CLI.run(["check", app.path])
            #expect(checked.status == 1 && checked.errors.contains(item.words), "\(item.words)\n\(checked.errors)")
        }
    }

    /// `luastore swift-types`: the file LuaStoreScriptingTests compiles is what it prints for the sample.
    @Test func swiftTypesPrintsTheSamplesTypes() async throws {
        let golden = CLI.packageRoot.appendingPathComponent("Tests/LuaStoreScriptingTests/Generated/TodosContract.swift")
        let printed = try await CLI.run(["swift-types", "samples/todos", "--prefix", "Todos"])
        let expected = try String(contentsOf: golden, encoding: .utf8)
        #expect(printed.status == 0 && printed.output == expected, "\(printed.errors)")
        let plain = try await CLI.run(["swift-types", "samples/counter"])
        #expect(plain.status == 1 && plain.errors.contains("samples/counter declares no contract"), "\(plain.errors)")
        #expect(try await CLI.run(["swift-types", "samples/todos", "--prefix", "1x"]).status == 2)
        let missing = try await CLI.run(["swift-types", "samples/nothing"])
        #expect(missing.status == 2 && missing.errors.contains("is not an app's folder"), "\(missing.errors)")
    }

    @Test func runRefusesUndeclaredActionsAndTheRecordingReplays() async throws {
        let app = try CLI.makeApp(Self.app())
        defer { try? FileManager.default.removeItem(at: app) }
        let recording = app.appendingPathComponent("session.jsonl")
        let input = [#"{"type":"add","title":"milk"}"#, #"{"type":"remove"}"#, #"{"type":"add","title":["x"]}"#,
                     #"{"type":"add","title":"eggs"}"#].joined(separator: "\n") + "\n"
        let run = try await CLI.run(["run", app.path, "--format", "json", "--record", recording.path], input: input)
        #expect(run.status == 1, "\(run.output)\(run.errors)")
        #expect(run.errors.contains(#"undeclared failed: action type "remove" is not declared (the contract declares "add", "clear") (line 2)"#), "\(run.errors)")
        #expect(run.errors.contains("undeclared failed: action.title is a table, not string (line 3)"), "\(run.errors)")
        #expect(run.output.split(separator: "\n").last == #"{"count":2}"#, "\(run.output)")
        let lines = try String(contentsOf: recording, encoding: .utf8).split(separator: "\n")
        #expect(lines.filter { $0.contains(#""stage":"undeclared""#) }.count == 2)
        let replay = try await CLI.run(["replay", app.path, recording.path])
        #expect(replay.status == 0 && replay.output.contains("replayed 4 actions: every change matches"), "\(replay.output)\(replay.errors)")
    }
}
