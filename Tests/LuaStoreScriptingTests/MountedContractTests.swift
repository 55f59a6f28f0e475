import Foundation
import LuaKit
import LuaStoreContract
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The contracts of mounted plugins (docs/contracts.md): each plugin declares, in its own files, the actions its reducer
/// takes; every action reaches every reducer, so an action is checked against each declaration of its `type`, and one
/// no party declares is refused only when every party with a reducer declares its actions.
@Suite struct MountedContractTests {
    static let cart = """
        local cart = {}
        ---@class AddItem
        ---@field type "addItem"
        ---@field sku string
        ---@field count? integer

        ---@class CartSlice
        ---@field items string[]

        ---@return CartSlice
        function cart.init() return { items = {} } end

        ---@param slice CartSlice
        ---@param action AddItem
        function cart.reduce(slice, action)
          if action.type == "addItem" then
            for _ = 1, action.count or 1 do slice.items[#slice.items + 1] = action.sku end
          end
        end
        return cart
        """

    static let declaredChat = """
        local chat = {}
        ---@class Say
        ---@field type "say"
        ---@field text string

        ---@class Cleared
        ---@field type "cleared"

        ---@alias ChatAction Say|Cleared

        function chat.init() return { lines = {} } end

        ---@param action ChatAction
        function chat.reduce(slice, action)
          if action.type == "say" then slice.lines[#slice.lines + 1] = action.text end
          if action.type == "cleared" then slice.lines = {} end
        end
        return chat
        """

    static let plainChat = """
        local chat = {}
        function chat.init() return { lines = {} } end
        function chat.reduce(slice, action)
          if action.type == "say" then slice.lines[#slice.lines + 1] = tostring(action.text) end
          if action.type == "dance" then slice.lines[#slice.lines + 1] = "danced" end
        end
        return chat
        """

    /// An app without a reducer of its own mounting `cart` and `chat`.
    static func shop(cart: String = Self.cart, chat: String, app: String? = nil) throws -> AppFolder {
        try AppFolder([
            "app.lua": app ?? """
                local app = {}
                function app.init() return {} end
                function app.props(state) return { items = #state.cart.items, lines = #state.chat.lines } end
                return app
                """,
            "luastore.json": #"{ "name": "shop", "version": "1.0.0", "luastore": "^1.0", "mounts": { "cart": "plugins/cart", "chat": "plugins/chat" } }"#,
            "plugins/cart/luastore.json": #"{"name": "cart", "version": "1.0.0", "luastore": "^1.0"}"#,
            "plugins/cart/app.lua": cart,
            "plugins/chat/luastore.json": #"{"name": "chat", "version": "1.0.0", "luastore": "^1.0"}"#,
            "plugins/chat/app.lua": chat,
        ])
    }

    @Test func everyPartyDeclares_anActionNoneDeclaresIsRefused() async throws {
        let folder = try Self.shop(chat: Self.declaredChat)
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        #expect(await store.send(["type": "addItem", "sku": "tea", "count": 2]).entry != nil)
        #expect(await store.send(["type": "say", "text": "hi"]).entry != nil)
        let wrongField = try #require(await store.send(["type": "addItem", "sku": 7]).failure)
        #expect(wrongField.stage == .undeclared)
        #expect(wrongField.error.message == "action.sku is 7, not string (as plugin 'cart' declares it)")
        let unknown = try #require(await store.send(["type": "dance"]).failure)
        #expect(unknown.error.message == #"action type "dance" is not declared (the app and its plugins declare "addItem", "cleared", "say")"#)
        // (In a run too: the refused one alone, the others applied.)
        for action: LuaValue in [["type": "addItem", "sku": "jam"], ["type": "say", "text": 1], ["type": "cleared"]] { store.dispatch(action) }
        await store.barrier()
        #expect(try await store.props() == ["items": 3, "lines": 0])
    }

    @Test func aPartyThatDeclaresNothingTakesAnything() async throws {
        let folder = try Self.shop(chat: Self.plainChat)
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        // (chat declares nothing: an action no one declares may be its; one cart declares must still be cart's.)
        #expect(await store.send(["type": "dance"]).entry != nil)
        #expect(await store.send(["type": "say", "text": 5]).entry != nil)
        let wrongField = try #require(await store.send(["type": "addItem", "sku": "tea", "count": "two"]).failure)
        #expect(wrongField.error.message == #"action.count is "two", not integer (as plugin 'cart' declares it)"#)
        #expect(try await store.props() == ["items": 0, "lines": 2])
    }

    /// The app's own reducer is a party too: declaring nothing, it leaves actions no plugin declares unchecked;
    /// declaring, it joins the plugins' cases.
    @Test func theAppsOwnReducerIsAParty() async throws {
        let app = """
            local app = {}
            ---@class Renamed
            ---@field type "renamed"
            ---@field title string
            function app.init() return { title = "shop" } end
            ---@param action Renamed
            function app.reduce(state, action)
              if action.type == "renamed" then state.title = action.title end
            end
            function app.props(state) return { title = state.title, items = #state.cart.items } end
            return app
            """
        let folder = try Self.shop(chat: Self.declaredChat, app: app)
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        #expect(await store.send(["type": "renamed", "title": "market"]).entry != nil)
        #expect(await store.send(["type": "addItem", "sku": "tea"]).entry != nil)
        let unknown = try #require(await store.send(["type": "dance"]).failure)
        #expect(unknown.error.message == #"action type "dance" is not declared (the app and its plugins declare "addItem", "cleared", "renamed", "say")"#)
        let wrong = try #require(await store.send(["type": "renamed"]).failure)
        #expect(wrong.error.message == "action.title is missing (Renamed declares it string) (as the app declares it)")
    }

    @Test func aPluginsContractWithAProblemFailsTheLoadNamingItsFile() async throws {
        let broken = Self.cart.replacingOccurrences(of: "---@field sku string", with: "---@field sku strin")
        let folder = try Self.shop(cart: broken, chat: Self.declaredChat)
        defer { folder.remove() }
        let error = await #expect(throws: ScriptFailure.self) { try await ScriptedStore(app: folder.url, options: Recorder().options) }
        #expect(error?.stage == .load)
        let said = error.map { "\($0.error)" } ?? ""
        #expect(said.contains("plugins/cart/app.lua:4:"), "\(said)")
        #expect(said.contains("plugin 'cart''s contract: field sku of AddItem is a strin"), "\(said)")
    }
}

/// Swift types of an app with mounted plugins: their classes named after their key, their cases in the app's enum.
@Suite struct MountedSwiftTypesTests {
    @Test func thePluginsCasesJoinTheAppsEnum() throws {
        let folder = try MountedContractTests.shop(chat: MountedContractTests.declaredChat)
        defer { folder.remove() }
        let app = AppContract.read(app: folder.url).contract
        let (mounted, problems) = AppContract.readMounted(app: folder.url)
        #expect(problems.isEmpty && mounted.map(\.key) == ["cart", "chat"])
        let text = try SwiftTypes.generate(app, mounted: mounted, prefix: "Shop", source: "shop")
        for expected in [
            "public struct ShopCartCartSlice: Codable, Sendable, Equatable {",
            "public enum ShopAction: Sendable, Equatable {",
            "    /// `---@class AddItem` (plugin 'cart', app.lua:2).\n    case addItem(sku: String, count: Int? = nil)",
            "    case cleared\n",
            "    case say(text: String)",
            "public func send(_ action: ShopAction) async -> SendResult",
        ] {
            #expect(text.contains(expected), "\(expected)\n\(text)")
        }
    }

    @Test func oneLiteralDeclaredTwoWaysHasNoSwiftCase() throws {
        let chat = MountedContractTests.declaredChat.replacingOccurrences(of: #"---@field type "say""#, with: #"---@field type "addItem""#)
        let folder = try MountedContractTests.shop(chat: chat)
        defer { folder.remove() }
        let (mounted, _) = AppContract.readMounted(app: folder.url)
        let error = #expect(throws: SwiftTypes.Unsupported.self) {
            try SwiftTypes.generate(AppContract.read(app: folder.url).contract, mounted: mounted, source: "shop")
        }
        #expect(error?.description == #"action "addItem" is declared by plugin 'cart' (sku: String, count: Int? = nil) and by plugin 'chat' (text: String): one Swift case cannot be both"#)
    }
    /// A contract whose names would make Swift that does not compile is refused, naming them, as a type with no
    /// Swift form is: two actions or two literals that would be one case, a literal or a type with no letter or
    /// digit, a field that is the struct's own `luaValue`, a class named after a type the file names (`String`).
    @Test(arguments: [
        ("---@class AddA\n---@field type \"item-added\"\n---@class AddB\n---@field type \"item_added\"\n---@alias Action AddA|AddB", nil,
         #"actions "item-added" and "item_added" would both be the Swift case itemAdded: rename one"#),
        ("---@class State\n---@field k? \"\"|\"x\"", "State", #""" of StateK has no Swift name: it holds no letter or digit"#),
        ("---@class State\n---@field mode \"a-b\"|\"a_b\"", "State", #""a-b" and "a_b" of StateMode would both be the Swift case aB: rename one"#),
        ("---@class State\n---@field luaValue? string", "State",
         "field luaValue of State would be the Swift property luaValue, as the table the scripts read is: rename one"),
        ("---@class String\n---@field n integer", "String",
         "`---@class String` (app.lua:1) would be the Swift type String, which the generated code names already (or a keyword): rename it, or give --prefix"),
    ] as [(String, String?, String)])
    func namesWithNoSwiftFormAreRefused(annotations: String, state: String?, said: String) throws {
        // (`state`: the class `init` returns; without it the actions are the contract, `reduce`'s `Action`.)
        let functions = state.map { "---@return \($0)\nfunction app.init() return {} end\nfunction app.reduce(state, action) end" }
            ?? "function app.init() return {} end\n---@param action Action\nfunction app.reduce(state, action) end"
        let folder = try AppFolder(["app.lua": annotations + "\nlocal app = {}\n" + functions + "\nfunction app.props(state) return {} end\nreturn app\n"])
        defer { folder.remove() }
        let error = #expect(throws: SwiftTypes.Unsupported.self) {
            try SwiftTypes.generate(AppContract.read(app: folder.url).contract, source: "app")
        }
        #expect(error?.description == said)
    }
}
