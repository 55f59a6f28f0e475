import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Plugins mounted under keys of an app's state (`mounts` in its manifest): each with its own modules,
/// capabilities and budgets, writing only its slice, reading declared slices read-only, upgraded on its own.
@Suite struct MountTests {
    static let host = """
        local app = {}
        function app.init() return { title = "shop" } end
        function app.reduce(state, action)
          if action.type == "retitle" then state.title = action.title end
          if action.type == "hostWritesCart" then state.cart.items[1] = "mine" end
          if action.type == "hostReplacesCart" then state.cart = {} end
        end
        function app.props(state) return { items = #state.cart.items, lines = #state.chat.lines, title = state.title } end
        return app
        """

    static let cart = """
        local util = require("util")
        local cart = {}
        function cart.init() return { items = {} } end
        function cart.reduce(slice, action)
          if action.type == "add" then slice.items[#slice.items + 1] = util.name(action.item) end
          if action.type == "say" then slice.items[#slice.items + 1] = "said" end
        end
        return cart
        """

    static let chat = """
        local util = require("util")
        local chat = {}
        function chat.init() return { lines = {} } end
        function chat.reduce(slice, action, reads)
          if action.type == "say" then slice.lines[#slice.lines + 1] = util.name(action.text) .. " (" .. #reads.cart.items .. ")" end
          if action.type == "steal" then reads.cart.items[1] = "stolen" end
          if action.type == "global" then shared = 1 end
        end
        return chat
        """

    static func shop(cartManifest: String = #"{"name": "cart", "version": "1.0.0", "luastore": "^1.0"}"#,
                     chatManifest: String = #"{"name": "chat", "version": "1.0.0", "luastore": "^1.0"}"#,
                     cart: String = MountTests.cart, chat: String = MountTests.chat) throws -> AppFolder {
        try AppFolder([
            "app.lua": host,
            "luastore.json": """
                { "name": "shop", "version": "1.0.0", "luastore": "^1.0",
                  "mounts": { "cart": "plugins/cart", "chat": { "path": "plugins/chat", "reads": ["cart"] } } }
                """,
            "plugins/cart/luastore.json": cartManifest, "plugins/cart/app.lua": cart,
            "plugins/cart/util.lua": #"return { name = function(x) return "item:" .. tostring(x) end }"#,
            "plugins/chat/luastore.json": chatManifest, "plugins/chat/app.lua": chat,
            "plugins/chat/util.lua": #"return { name = function(x) return "line:" .. tostring(x) end }"#,
        ])
    }

    /// An app (`app`) mounting two plugins, `cart` and `chat` (reduced in that order), of the sources given.
    static func twoPlugins(app: String, cart: String, chat: String) throws -> AppFolder {
        try AppFolder([
            "app.lua": app,
            "luastore.json": """
                { "name": "shop", "version": "1.0.0", "luastore": "^1.0", "mounts": { "cart": "plugins/cart", "chat": "plugins/chat" } }
                """,
            "plugins/cart/luastore.json": #"{"name": "cart", "version": "1.0.0", "luastore": "^1.0"}"#,
            "plugins/cart/app.lua": cart,
            "plugins/chat/luastore.json": #"{"name": "chat", "version": "1.0.0", "luastore": "^1.0"}"#,
            "plugins/chat/app.lua": chat,
        ])
    }

    /// What one reducer writes into its action reaches no other: the host and each plugin see the action as it
    /// was dispatched (a forged `type`, a changed nested field, a default filled in), in a batch as alone.
    @Test func eachPluginSeesTheActionAsDispatched() async throws {
        let forger = """
            local cart = {}
            function cart.init() return { items = {} } end
            function cart.reduce(slice, action)
              if action.type == "note" then
                slice.items[#slice.items + 1] = action.type .. ":" .. action.meta.tag
                action.type = "say"; action.text = "INJECTED"; action.meta.tag = "forged"
              end
            end
            return cart
            """
        let listener = """
            local chat = {}
            function chat.init() return { lines = {} } end
            function chat.reduce(slice, action)
              action.text = action.text or "default"
              slice.lines[#slice.lines + 1] = action.type .. ":" .. action.text .. ":" .. action.meta.tag
            end
            return chat
            """
        let folder = try Self.twoPlugins(app: """
            local app = {}
            function app.init() return {} end
            function app.reduce(state, action) action.meta.tag = "host"; action.type = "host" end
            function app.props(state) return { lines = #state.chat.lines } end
            return app
            """, cart: forger, chat: listener)
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(await store.send(["type": "note", "meta": ["tag": "t1"]]).failure == nil)
        for index in 2...40 { store.dispatch(["type": "note", "meta": ["tag": .string("t\(index)")]]) } // (runs of many)
        await store.barrier()
        let state = try await store.state()
        let lines = try #require(state["chat"]["lines"].table?.array)
        #expect(lines.count == 40)
        #expect(lines.first == "note:default:t1", "\(lines)")
        #expect(lines.last == "note:default:t40", "\(lines)")
        #expect(!lines.contains { $0.string?.contains("INJECTED") == true || $0.string?.contains("forged") == true || $0.string?.contains("host") == true })
        #expect(state["cart"]["items"].table?.array.last == "note:t40")
    }

    /// A plugin whose code only reads its action's fields shares the dispatched table when none of the fields it
    /// reads holds a table; a nested table it reaches through a field is not the action's to share: the plugin
    /// after it still sees the action as dispatched, flat or nested, sent alone or in runs.
    @Test func aReaderSharesOnlyWhatItCannotChange() async throws {
        let reader = """
            return {
              init = function() return { seen = 0 } end,
              reduce = function(slice, action) -- (only reads its action's fields: it may share a flat one)
                slice.seen = slice.seen + 1
                local meta = action.meta
                if meta then meta.tag = "forged"; meta[1] = "forged" end
              end,
            }
            """
        let listener = """
            return {
              init = function() return { lines = {} } end,
              reduce = function(slice, action) slice.lines[#slice.lines + 1] = action.type .. ":" .. (action.meta and action.meta.tag or "-") end,
            }
            """
        let folder = try Self.twoPlugins(
            app: "return { init = function() return {} end, props = function(state) return { seen = state.cart.seen } end }",
            cart: reader, chat: listener)
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url)
        defer { store.shutdown() }
        #expect(await store.send(["type": "nested", "meta": ["tag": "t0"]]).failure == nil)
        for index in 1...30 {
            store.dispatch(index % 2 == 0 ? ["type": "flat", "by": .integer(Int64(index))] : ["type": "nested", "meta": ["tag": .string("t\(index)")]])
        }
        await store.barrier()
        let state = try await store.state()
        #expect(state["cart"]["seen"] == 31)
        let lines = try #require(state["chat"]["lines"].table?.array)
        let expected: [LuaValue] = ["nested:t0"] + (1...30).map { .string($0 % 2 == 0 ? "flat:-" : "nested:t\($0)") }
        #expect(lines == expected)
    }

    /// Each plugin's slice is placed by its `init`, its modules are its own (two `util`s), it writes only its
    /// slice: a write to a slice it reads, or the host's write to a plugin's slice, fails naming the path and
    /// whose it is, and the whole action is undone — the other plugin's writes in it too.
    @Test func mountedPluginsAreIsolatedFromEachOther() async throws {
        let folder = try Self.shop()
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        #expect(store.mountedManifests.keys.sorted() == ["cart", "chat"])
        #expect(await store.send(["type": "add", "item": 1]).failure == nil)
        #expect(await store.send(["type": "say", "text": "hi"]).failure == nil)
        #expect(await store.send(["type": "retitle", "title": "market"]).failure == nil)
        let expected: LuaValue = [
            "title": "market", "cart": ["items": ["item:1", "said"]], "chat": ["lines": ["line:hi (2)"]],
        ]
        #expect(try await store.state() == expected)

        let steal = await store.send(["type": "steal"])
        #expect(steal.failure?.error.message.contains(
            "cannot write cart.items[1]: plugin 'chat' reads the slice 'cart', which only plugin 'cart' writes") == true,
            "\(String(describing: steal.failure))")
        #expect(steal.failure?.error.chunkName == "plugins/chat/app.lua", "\(String(describing: steal.failure?.error))")
        let host = await store.send(["type": "hostWritesCart"])
        #expect(host.failure?.error.message.contains(
            "cannot write cart.items[1]: 'cart' is the slice of plugin 'cart', and only it writes there") == true,
            "\(String(describing: host.failure))")
        let replace = await store.send(["type": "hostReplacesCart"])
        #expect(replace.failure?.error.message.contains("cannot replace 'cart': it is the slice of plugin 'cart'") == true,
                "\(String(describing: replace.failure))")
        let global = await store.send(["type": "global"])
        #expect(global.failure?.error.message.contains("cannot set global 'shared' while the store runs") == true,
                "\(String(describing: global.failure))")
        #expect(try await store.state() == expected, "every refused action was undone whole")

        // `say` reaches both: when the second fails, the first's write is undone as well.
        let broken = try Self.shop(chat: Self.chat.replacingOccurrences(of: "if action.type == \"say\" then", with: "if action.type == \"say\" then error(\"no\") end if false then"))
        defer { broken.remove() }
        let other = try await ScriptedStore(app: broken.url, options: Recorder().options)
        defer { other.shutdown() }
        let failed = await other.send(["type": "say", "text": "x"]).failure
        #expect(failed.map { "\($0)" }?.contains("plugins/chat/app.lua:5: no") == true, "\(String(describing: failed))")
        #expect(try await other.state()["cart"] == ["items": .table(LuaTable())])
    }

    /// A plugin's effects are checked against its own manifest (a real server on 127.0.0.1): the one that
    /// declares the host reaches it, the other is refused in its own name.
    @Test func eachPluginHasItsOwnCapabilities() async throws {
        let server = try await TestServer.start()
        let fetcher = """
            local luastore = require("luastore")
            local p = {}
            function p.init() return { log = {} } end
            function p.reduce(slice, action)
              if action.type == "fetch" and action.id == NAME then
                return nil, { luastore.http { url = action.url, success = "fetched", failure = "failed", id = action.id } }
              elseif action.type == "fetched" and action.id == NAME then slice.log[#slice.log + 1] = "fetched " .. action.body
              elseif action.type == "failed" and action.id == NAME then slice.log[#slice.log + 1] = action.reason .. ": " .. action.message
              end
            end
            return p
            """
        let folder = try AppFolder([
            "app.lua": "return { init = function() return {} end, props = function(s) return {} end }",
            "luastore.json": #"{"name": "host", "version": "1.0.0", "luastore": "^1.0", "mounts": {"a": "a", "b": "b"}}"#,
            "a/luastore.json": #"{"name": "alpha", "version": "1.0.0", "luastore": "^1.0", "capabilities": {"http": ["127.0.0.1:\#(server.port)"]}}"#,
            "a/app.lua": "local NAME = 'a'\n" + fetcher,
            "b/luastore.json": #"{"name": "beta", "version": "1.0.0", "luastore": "^1.0"}"#,
            "b/app.lua": "local NAME = 'b'\n" + fetcher,
        ])
        defer { folder.remove() }
        // A server the plugin may reach that redirects it to one it may not (another port of the same address): the
        // redirect is checked as the first request is, not followed.
        let elsewhere = try await TestServer.start()
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        // Both plugins return a request for each action; each id names the plugin whose log hears it.
        store.dispatch(["type": "fetch", "id": "a", "url": .string(server.base + "/hello")])
        store.dispatch(["type": "fetch", "id": "b", "url": .string(server.base + "/hello")])
        #expect(await eventually {
            let state = try? await store.state()
            return state?["a"]["log"].table?.array.count == 1 && state?["b"]["log"].table?.array.count == 1
        })
        store.dispatch(["type": "fetch", "id": "a", "url": .string(server.base + "/hop?to=" + elsewhere.base + "/hello")])
        #expect(await eventually { (try? await store.state())?["a"]["log"].table?.array.count == 2 })
        let state = try await store.state()
        #expect(state["a"]["log"] == ["fetched hello", .string(
            "refusedHost: the server redirected to \(elsewhere.base)/hello, and http to 127.0.0.1:\(elsewhere.port) is not a declared capability "
                + "of 'alpha' (add it to capabilities.http in luastore.json)")], "\(state)")
        #expect(state["b"]["log"] == [.string(
            "refusedHost: http to 127.0.0.1:\(server.port) is not a declared capability of 'beta' (add it to capabilities.http in luastore.json)")],
            "\(state)")
        store.shutdown()
        await server.stop()
        await elsewhere.stop()
    }

    /// A command a plugin returns that is not one is refused at the plugin's own file and `reduce`, naming the
    /// mount it came from — not at the host's code that composes the reducers; the app's own, at its file.
    @Test func aBadCommandIsNamedWhereItsReducerIs() async throws {
        let folder = try Self.twoPlugins(
            app: """
                local app = {}
                function app.init() return {} end
                function app.reduce(state, action)
                  if action.type == "host" then return nil, { { kind = "nonsense" } } end
                end
                function app.props(state) return {} end
                return app
                """,
            cart: """
                local cart = {}
                function cart.init() return {} end
                function cart.reduce(slice, action)
                  if action.type == "cart" then return nil, { { kind = "nonsense" } } end
                  slice.n = (slice.n or 0) + 1
                  if action.type == "bytes" then return nil, { { kind = "log", message = "\\xff" } } end
                end
                return cart
                """,
            chat: "return { init = function() return {} end, reduce = function() end }")
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: ScriptedStoreOptions(log: { _ in }, failures: { _ in }))
        defer { store.shutdown() }
        let cart = await store.send(["type": "cart"]).failure.map(String.init(describing:))
        #expect(cart?.contains("plugins/cart/app.lua:3: command #1 (from the plugin mounted at 'cart'): unknown effect kind 'nonsense'") == true,
                "\(cart ?? "nil")")
        // A command that cannot even be converted: the plugin's place too, and every slice's write undone.
        _ = await store.send(["type": "count"])
        let bytes = await store.send(["type": "bytes"]).failure.map(String.init(describing:))
        #expect(bytes?.contains("plugins/cart/app.lua:3:") == true && bytes?.contains("not valid UTF-8") == true, "\(bytes ?? "nil")")
        #expect(try await store.state()["cart"]["n"] == 1)
        let host = await store.send(["type": "host"]).failure.map(String.init(describing:))
        #expect(host?.contains("app.lua:3: command #1: unknown effect kind 'nonsense'") == true, "\(host ?? "nil")")
        #expect(host?.contains("mounts.lua") == false && cart?.contains("mounts.lua") == false)
    }

    /// So is a subscription that is not an effect: at the `subscriptions` of the plugin whose id it has, or of the
    /// app — a lone app's too (it named no file at all).
    @Test func aBadSubscriptionIsNamedWhereItsFunctionIs() async throws {
        let subscribing = { (name: String) in """
            local \(name) = {}
            function \(name).init() return {} end
            function \(name).reduce(state, action) state.on = action.type end
            function \(name).subscriptions(state)
              if state.on == "\(name)" then return { tick = { kind = "nonsense" } } end
              return {}
            end
            function \(name).props(state) return {} end
            return \(name)
            """
        }
        let mounted = try Self.twoPlugins(app: subscribing("app"), cart: subscribing("cart"), chat: subscribing("chat"))
        let lone = try AppFolder(["app.lua": subscribing("app")])
        defer { mounted.remove(); lone.remove() }
        for (folder, type, expected) in [(mounted, "cart", #"plugins/cart/app.lua:4: subscription "cart/tick": unknown effect kind"#),
                                         (mounted, "app", #"app.lua:4: subscription "tick": unknown effect kind"#),
                                         (lone, "app", #"app.lua:4: subscription "tick": unknown effect kind"#)] {
            let recorder = Recorder()
            let store = try await ScriptedStore(app: folder.url, options: recorder.options)
            _ = await store.send(["type": .string(type)])
            let failure = await eventually { recorder.failures.withLock { !$0.isEmpty } }
            let said = recorder.failures.withLock { $0.first.map(String.init(describing:)) } ?? "nothing"
            #expect(failure && said.contains(expected) && !said.contains("mounts.lua"), "\(type): \(said)")
            store.shutdown()
        }
    }

    /// A table of another's slice, read through `reads`, is not stored in the reader's own — refused as such, at the
    /// plugin's line ("store a copy of it"), not as a table kept from an earlier call; a copy is stored.
    @Test func aSliceReadThroughReadsIsStoredAsACopy() async throws {
        let folder = try Self.shop(
            cart: """
                local cart = {}
                function cart.init() return { items = { { id = 1 } } } end
                function cart.reduce(slice, action) end
                return cart
                """,
            chat: """
                local chat = {}
                function chat.init() return { lines = {} } end
                function chat.reduce(slice, action, reads)
                  if action.type == "take" then slice.taken = reads.cart.items[1] end
                  if action.type == "copy" then slice.taken = { id = reads.cart.items[1].id } end
                end
                return chat
                """)
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let taken = await store.send(["type": "take"]).failure.map(String.init(describing:)) ?? "applied"
        #expect(taken.contains("plugins/chat/app.lua:4: state.chat.taken: cannot store a table read through `reads` (another's slice, read-only)"), "\(taken)")
        #expect(await store.send(["type": "copy"]).failure == nil)
        #expect(try await store.state()["chat"]["taken"] == ["id": 1])
    }

    /// A plugin's budgets bound its own calls: its time per call and what one call may allocate; another plugin
    /// and the host keep the host's.
    @Test func eachPluginHasItsOwnBudgets() async throws {
        let folder = try Self.shop(
            cartManifest: #"{"name": "cart", "version": "1.0.0", "luastore": "^1.0", "budgets": {"timeMilliseconds": 1000, "memoryBytes": 2097152}}"#,
            cart: Self.cart.replacingOccurrences(of: "return cart", with: """
                local reduce = cart.reduce
                function cart.reduce(slice, action)
                  if action.type == "spin" then while true do end end
                  if action.type == "grow" then local t = {} for i = 1, 1e6 do t[i] = i end end
                  return reduce(slice, action)
                end
                return cart
                """),
            chat: Self.chat.replacingOccurrences(of: "return chat", with: """
                local reduce = chat.reduce
                function chat.reduce(slice, action, reads)
                  if action.type == "chatGrows" then local t = {} for i = 1, 1e6 do t[i] = i end end
                  return reduce(slice, action, reads)
                end
                return chat
                """))
        defer { folder.remove() }
        let recorder = Recorder()
        var options = recorder.options
        options.limits.timeBudget = .seconds(10)
        options.limits.memoryBytes = 64 << 20
        let store = try await ScriptedStore(app: folder.url, options: options)
        defer { store.shutdown() }
        let spin = await store.send(["type": "spin"])
        #expect(spin.failure?.error.kind == .timeout, "\(String(describing: spin.failure))")
        #expect(spin.failure?.error.message.contains("1000 ms") == true, "the plugin's budget: \(String(describing: spin.failure))")
        let grow = await store.send(["type": "grow"])
        #expect(grow.failure?.error.kind == .memory, "16 MB is over the plugin's 2 MiB: \(String(describing: grow.failure))")
        #expect(await store.send(["type": "chatGrows"]).failure == nil, "the other plugin has the host's 64 MiB")
        #expect(await store.send(["type": "add", "item": 7]).failure == nil, "the store goes on")
        #expect(try await store.state()["cart"]["items"] == ["item:7"])
        let costs = await store.pluginCosts()
        #expect(costs.map(\.key) == ["cart", "chat"])
        #expect(costs.map(\.name) == ["cart", "chat"])
        // The cart: init, spin, grow, chatGrows, add; the chat: init, chatGrows, add (an action ends at the first
        // plugin that fails: the cart's spin and grow).
        #expect(costs.map(\.calls) == [5, 3], "\(costs)")
        #expect(costs.map(\.failures) == [2, 0], "\(costs)")
        #expect(costs.allSatisfy { $0.nanoseconds > 0 && $0.allocations > 0 }, "\(costs)")
    }

    /// `install(mount:folder:)`: a newer version of one plugin replaces it, its slice migrated and kept, the other
    /// plugin and the host untouched; an older version, another plugin, and a version that fails to load are
    /// refused, the running one staying.
    @Test func aPluginIsUpgradedOnItsOwn() async throws {
        let folder = try Self.shop()
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        defer { store.shutdown() }
        #expect(await store.send(["type": "add", "item": 1]).failure == nil)
        #expect(await store.send(["type": "say", "text": "hi"]).failure == nil)

        func version(_ number: String, name: String = "cart", source: String) throws -> AppFolder {
            try AppFolder([
                "luastore.json": #"{"name": "\#(name)", "version": "\#(number)", "luastore": "^1.0"}"#, "app.lua": source,
                "util.lua": #"return { name = function(x) return "v2:" .. tostring(x) end }"#,
            ])
        }
        let upgraded = try version("2.0.0", source: """
            local util = require("util")
            local cart = { schemaVersion = 1 }
            function cart.init() return { items = {}, count = 0 } end
            function cart.migrate(slice, fromSchema, fromVersion)
              slice.count = #slice.items
              slice.from = fromVersion .. "@" .. fromSchema
            end
            function cart.reduce(slice, action)
              if action.type == "add" then slice.items[#slice.items + 1] = util.name(action.item); slice.count = slice.count + 1 end
            end
            return cart
            """)
        defer { upgraded.remove() }
        let outcome = try await store.install(mount: "cart", folder: upgraded.url)
        #expect(outcome == .reloaded(fromSchema: 0, toSchema: 0), "the app's own schema did not change")
        #expect(store.mountedManifests["cart"]?.version == SemanticVersion(2, 0, 0))
        #expect(await store.send(["type": "add", "item": 2]).failure == nil)
        #expect(try await store.state()["cart"] == [
            "items": ["item:1", "said", "v2:2"], "count": 3, "from": "1.0.0@0",
        ])
        #expect(try await store.state()["chat"] == ["lines": ["line:hi (2)"]], "the other plugin's slice is as it was")

        let older = try version("1.5.0", source: Self.cart)
        defer { older.remove() }
        let other = try version("3.0.0", name: "chat", source: Self.chat)
        defer { other.remove() }
        let broken = try version("3.0.0", source: "local cart = {\nreturn cart")
        defer { broken.remove() }
        for (candidate, expected) in [
            (older, "luastore.json says 'cart' 1.5.0, which is not newer than the running 2.0.0 (a downgrade must be asked for)"),
            (other, "luastore.json names 'chat', but the plugin mounted at 'cart' is 'cart'"),
            (broken, "plugins/cart/app.lua:2:"),
        ] {
            do {
                try await store.install(mount: "cart", folder: candidate.url)
                Issue.record("\(candidate.url.path) was installed")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
        #expect(store.mountedManifests["cart"]?.version == SemanticVersion(2, 0, 0))
        #expect(await store.send(["type": "add", "item": 3]).failure == nil)
        #expect(try await store.state()["cart"]["count"] == 4, "version 2.0.0 still runs")
    }

    /// What a manifest's `mounts` may say, and what is refused when the app loads.
    @Test func mountsAreCheckedAsTheAppLoads() async throws {
        let base = #""name": "a", "version": "1.0.0", "luastore": "^1.0""#
        let parsed = try AppManifest.parse(Data(#"{\#(base), "mounts": {"z": "p/z", "b": {"path": "p/b", "reads": ["z"]}}}"#.utf8))
        #expect(parsed.mounts == [AppManifest.Mount(key: "b", path: "p/b", reads: ["z"]), AppManifest.Mount(key: "z", path: "p/z")])
        for (mounts, expected) in [
            (#""x""#, "'mounts' must be an object"),
            (#"{"end": "p"}"#, "'mounts' key 'end' must be a name of the state's"),
            (#"{"a": "../p"}"#, "'mounts.a' must be a path inside the app's folder, not '../p'"),
            (#"{"a": "."}"#, "'mounts.a' is the app's own folder ('.'): a plugin is a folder or a bundle inside it"),
            (#"{"a": "./."}"#, "'mounts.a' is the app's own folder ('./.'): a plugin is a folder or a bundle inside it"),
            (#"{"a": {"path": "p", "reads": ["b"]}}"#, "'mounts.a.reads' may name only other mounts ()"),
            (#"{"a": {"path": "p", "writes": []}}"#, "has an unknown field 'mounts.a.writes'"),
            (#"{"a": 3}"#, "'mounts.a' must be the plugin's path"),
        ] {
            do {
                _ = try AppManifest.parse(Data(#"{\#(base), "mounts": \#(mounts)}"#.utf8))
                Issue.record("\(mounts) was accepted")
            } catch {
                #expect(error.description.contains(expected), "\(error)")
            }
        }
        let cases: [(files: [String: String], expected: String)] = [
            (["p/app.lua": Self.cart], "mounts.cart: p has no luastore.json (a mounted plugin needs one"),
            (["p/luastore.json": #"{"name": "c", "version": "1.0.0", "luastore": "^2.0"}"#, "p/app.lua": Self.cart], "needs the scripting API ^2.0"),
            (["p/luastore.json": #"{"name": "c", "version": "1.0.0", "luastore": "^1.0"}"#, "p/app.lua": "return { init = function() return {} end }"],
             "plugin 'c' (p/app.lua, mounted at 'cart') must export a function 'reduce'"),
            (["p/luastore.json": #"{"name": "c", "version": "1.0.0", "luastore": "^1.0"}"#,
              "p/app.lua": "return { init = function() return 1 end, reduce = function() end }"],
             "plugin 'c' (mounted at 'cart'): init must return a table, its slice (got a number)"),
            (["q/x": ""], "mounts.cart: p does not exist"),
        ]
        for (files, expected) in cases {
            var all = files
            all["app.lua"] = "return { init = function() return {} end, props = function(s) return {} end }"
            all["luastore.json"] = #"{\#(base), "mounts": {"cart": "p"}}"#
            let folder = try AppFolder(all)
            defer { folder.remove() }
            await Self.expectRefused(folder, saying: expected, "\(files.keys.sorted())")
        }
    }

    /// A plugin's folder, or a manifest, that a symbolic link inside the app's folder brings from outside it is not
    /// the app's: the store does not load, naming the mount or the file — nothing outside the folder is read
    /// (`../p` and absolute paths are refused by the manifest's own check, above).
    @Test func aSymbolicLinkOutOfTheAppsFolderIsRefused() async throws {
        let outside = try AppFolder([
            "luastore.json": #"{"name": "outside", "version": "1.0.0", "luastore": "^1.0"}"#,
            "app.lua": "return { init = function() return { pwn = 1 } end, reduce = function() end }",
        ])
        defer { outside.remove() }
        let base = #""name": "a", "version": "1.0.0", "luastore": "^1.0""#
        let app = "return { init = function() return {} end, props = function(s) return {} end }"
        let cases: [(files: [String: String], link: (at: String, to: String), expected: String)] = [
            (["app.lua": app, "luastore.json": #"{\#(base), "mounts": {"p": "sub"}}"#], ("sub", outside.url.path),
             "mounts.p: sub leads outside the app's folder (a symbolic link)"),
            (["app.lua": app, "luastore.json": #"{\#(base), "mounts": {"p": "plug"}}"#, "plug/app.lua": Self.cart],
             ("plug/luastore.json", outside.url.appendingPathComponent("luastore.json").path),
             "mounts.p: plug/luastore.json leads outside the app's folder (a symbolic link)"),
            (["app.lua": app], ("luastore.json", outside.url.appendingPathComponent("luastore.json").path),
             "luastore.json leads outside the app's folder (a symbolic link)"),
        ]
        for (files, link, expected) in cases {
            let folder = try AppFolder(files)
            defer { folder.remove() }
            try FileManager.default.createSymbolicLink(atPath: folder.url.appendingPathComponent(link.at).path, withDestinationPath: link.to)
            await Self.expectRefused(folder, saying: expected, "\(link.at) -> \(link.to)")
        }
    }

    /// The app in `folder` does not load, and its failure says `expected` (`what`: the case, for the record).
    static func expectRefused(_ folder: AppFolder, saying expected: String, _ what: String) async {
        do {
            let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
            store.shutdown()
            Issue.record("\(what) loaded")
        } catch {
            #expect(error.error.message.contains(expected), "\(error)")
        }
    }
}
