import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// An app's manifest (`luastore.json`): semantic versions and npm-style ranges, the manifest's fields and their
/// refusals, the host's scripting API checked, capabilities enforced on a real store (a real HTTP server on
/// 127.0.0.1), budgets applied, `main` loaded.
@Suite struct ManifestTests {
    @Test func versionsParseAndOrderAsSemverSays() {
        #expect(SemanticVersion("1.2.3") == SemanticVersion(1, 2, 3))
        #expect(SemanticVersion("1.2.3-beta.2+build.7") == SemanticVersion(1, 2, 3, prerelease: ["beta", "2"]))
        for bad in ["1.2", "v1.2.3", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.x", "", "1.2.3.4", "a.b.c"] {
            #expect(SemanticVersion(bad) == nil, "\(bad)")
        }
        // semver.org §11: 1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-alpha.beta < 1.0.0-beta < 1.0.0-beta.2 < 1.0.0-beta.11
        // < 1.0.0-rc.1 < 1.0.0 < 1.0.1 < 1.1.0 < 2.0.0.
        let ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
                       "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"].compactMap(SemanticVersion.init)
        #expect(ordered.count == 11)
        for (lower, higher) in zip(ordered, ordered.dropFirst()) { #expect(lower < higher, "\(lower) < \(higher)") }
        #expect(SemanticVersion(1, 0, 0, prerelease: ["beta", "2"]).description == "1.0.0-beta.2")
    }

    /// What npm's ranges mean (the examples of node-semver's README).
    @Test func rangesMeanWhatNpmMeans() throws {
        let cases: [(String, [String], [String])] = [
            ("^1.0", ["1.0.0", "1.2.3", "1.99.0"], ["0.9.9", "2.0.0", "2.0.0-beta", "1.5.0-beta"]),
            ("^1.2.3", ["1.2.3", "1.9.0"], ["1.2.2", "2.0.0"]),
            ("^0.2.3", ["0.2.3", "0.2.9"], ["0.3.0", "0.2.2"]),
            ("^0.0.3", ["0.0.3"], ["0.0.4", "0.0.2"]),
            ("^0.x", ["0.0.1", "0.9.9"], ["1.0.0"]),
            ("~1.2.3", ["1.2.3", "1.2.9"], ["1.3.0", "1.2.2"]),
            ("~1.2", ["1.2.0", "1.2.9"], ["1.3.0"]),
            ("~1", ["1.0.0", "1.9.9"], ["2.0.0"]),
            (">=1.2 <2", ["1.2.0", "1.9.9"], ["1.1.9", "2.0.0"]),
            (">1.2.3", ["1.2.4"], ["1.2.3"]),
            (">1.2", ["1.3.0"], ["1.2.9"]),
            ("<=1.2", ["1.2.9", "0.1.0"], ["1.3.0"]),
            ("1.x", ["1.0.0", "1.5.2"], ["2.0.0", "0.9.0"]),
            ("1.2.*", ["1.2.0", "1.2.7"], ["1.3.0"]),
            ("1.2", ["1.2.0", "1.2.5"], ["1.3.0"]),
            ("1.2.3", ["1.2.3"], ["1.2.4"]),
            ("=1.0.0", ["1.0.0"], ["1.0.1"]),
            ("*", ["0.0.1", "1.0.0", "9.9.9"], ["1.0.0-beta"]),
            ("1.2 - 2.3", ["1.2.0", "2.3.9"], ["1.1.9", "2.4.0"]),
            ("1.2.3 - 2.3.4", ["1.2.3", "2.3.4"], ["2.3.5"]),
            ("^1.0 || ^3.1", ["1.4.0", "3.2.0"], ["2.0.0", "3.0.0"]),
            (">=1.0.0-beta <1.0.0", ["1.0.0-beta", "1.0.0-rc.1"], ["1.0.0", "0.9.0"]),
        ]
        for (text, inside, outside) in cases {
            let range = try #require(VersionRange(text), "\(text)")
            for version in inside { #expect(range.contains(try #require(SemanticVersion(version))), "\(version) in \(text)") }
            for version in outside { #expect(!range.contains(try #require(SemanticVersion(version))), "\(version) not in \(text)") }
        }
        for bad in ["^", "^1.2.3.4", ">=a", "1.2 -", "<*", "~v", "1.2.3 2.0 - 3", "1..2"] {
            #expect(VersionRange(bad) == nil, "\(bad)")
        }
    }

    @Test func aManifestSaysWhatIsWrongWithIt() throws {
        let full = try AppManifest.parse(Data("""
            { "name": "fetcher", "version": "1.2.0", "luastore": "^1.0", "main": "src/main.lua", "description": "Fetches",
              "capabilities": { "http": ["127.0.0.1:8080", "api.example.com", "[::1]:9000"], "storage": true, "timers": false },
              "budgets": { "timeMilliseconds": 50, "memoryBytes": 8388608 } }
            """.utf8))
        #expect(full.name == "fetcher")
        #expect(full.version == SemanticVersion(1, 2, 0))
        #expect(full.main == "src/main.lua")
        #expect(full.capabilities == AppManifest.Capabilities(http: ["127.0.0.1:8080", "api.example.com", "[::1]:9000"], storage: true))
        #expect(full.budgets == AppManifest.Budgets(time: .milliseconds(50), memoryBytes: 8 << 20))
        #expect(full.description == "Fetches")
        let minimal = try AppManifest.parse(Data(#"{"name": "a", "version": "0.1.0", "luastore": "1.x"}"#.utf8))
        #expect(minimal.main == "app.lua")
        #expect(minimal.capabilities == AppManifest.Capabilities())

        let base = #""name": "a", "version": "1.0.0", "luastore": "^1.0""#
        let refusals: [(String, String)] = [
            ("{", "luastore.json is not valid JSON"),
            ("[1]", "luastore.json must be a JSON object"),
            (#"{"version": "1.0.0", "luastore": "^1.0"}"#, "luastore.json has no 'name' (it needs name, version and luastore)"),
            ("{\(base), \"capabilites\": {}}",
             "luastore.json has an unknown field 'capabilites' (the fields are: name, version, luastore, main, capabilities, budgets, description, mounts, strictGlobals)"),
            ("{\(base), \"capabilities\": {\"network\": true}}",
             "luastore.json has an unknown field 'capabilities.network' (the fields are: capabilities.http, capabilities.storage, capabilities.timers)"),
            (#"{"name": "a", "version": "1.0", "luastore": "^1.0"}"#, "luastore.json 'version' must be a semantic version like 1.2.0, not '1.0'"),
            (#"{"name": "a", "version": "1.0.0", "luastore": "one"}"#, "luastore.json 'luastore' must be a range of versions like ^1.0 or >=1.2 <2, not 'one'"),
            ("{\(base), \"main\": \"../app.lua\"}", "luastore.json 'main' must be a .lua file in the app's folder (like app.lua or src/main.lua), not '../app.lua'"),
            ("{\(base), \"capabilities\": {\"http\": [\"host:99999\"]}}", "luastore.json 'capabilities.http' must be a list of \"host\" or \"host:port\" strings"),
            ("{\(base), \"capabilities\": {\"storage\": 1}}", "luastore.json 'capabilities.storage' must be true or false"),
            ("{\(base), \"budgets\": {\"memoryBytes\": 100}}", "luastore.json 'budgets.memoryBytes' must be a whole number of bytes, at least 1048576 (1 MiB)"),
            ("{\(base), \"budgets\": {\"timeMilliseconds\": 0}}", "luastore.json 'budgets.timeMilliseconds' must be a number of milliseconds above 0 (at most an hour)"),
            (#"{"name": "a b", "version": "1.0.0", "luastore": "^1.0"}"#, "luastore.json 'name' must start with a letter or a digit and hold only letters, digits, '-', '_' and single '.' (at most 64), not 'a b'"),
            (#"{"name": "..", "version": "1.0.0", "luastore": "^1.0"}"#, "luastore.json 'name' must start with a letter or a digit and hold only letters, digits, '-', '_' and single '.' (at most 64), not '..'"),
            (#"{"name": "-v", "version": "1.0.0", "luastore": "^1.0"}"#, "luastore.json 'name' must start with a letter or a digit and hold only letters, digits, '-', '_' and single '.' (at most 64), not '-v'"),
        ]
        for (text, said) in refusals {
            #expect(throws: ManifestFailure.self, "\(text)") { try AppManifest.parse(Data(text.utf8)) }
            do {
                _ = try AppManifest.parse(Data(text.utf8))
            } catch {
                #expect(error.description == said)
            }
        }
    }

    /// The JSON schema editors use (`lua/luastore.schema.json`) names exactly the fields the host reads, and the
    /// samples' manifests are valid.
    @Test func theEditorsSchemaNamesEveryField() throws {
        let root = CLI.packageRoot
        let schema = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent("lua/luastore.schema.json"))) as? [String: Any])
        func keys(_ object: Any?) -> Set<String> { Set(((object as? [String: Any])?["properties"] as? [String: Any])?.keys.map { $0 } ?? []) }
        let properties = schema["properties"] as? [String: Any]
        #expect(keys(schema) == Set(AppManifest.fields))
        #expect(keys(properties?["capabilities"]) == Set(AppManifest.capabilityFields))
        #expect(keys(properties?["budgets"]) == Set(AppManifest.budgetFields))
        #expect(Set(schema["required"] as? [String] ?? []) == ["name", "version", "luastore"])
        for sample in ["counter", "todos", "search", "stopwatch"] {
            let manifest = try AppManifest.parse(Data(contentsOf: root.appendingPathComponent("samples/\(sample)/luastore.json")))
            #expect(manifest.name == sample)
            try manifest.checkHost()
        }
    }

    static let plugin = #"""
        local luastore = require("luastore")
        local app = {}
        function app.init() return { log = {} } end
        function app.reduce(state, action)
          local log = state.log
          if action.type == "fetch" then
            return nil, { luastore.http { url = action.url, success = "fetched", failure = "failed", id = action.id } }
          elseif action.type == "fetched" then log[#log + 1] = "fetched " .. action.id .. " " .. action.body
          elseif action.type == "failed" then log[#log + 1] = "failed " .. action.id .. " " .. action.reason .. ": " .. action.message
          elseif action.type == "save" then return nil, { luastore.save("k", { n = 1 }) }
          elseif action.type == "wait" then return nil, { luastore.delay(0.01, { type = "waited" }) }
          elseif action.type == "waited" then log[#log + 1] = "waited"
          elseif action.type == "spin" then while true do end
          elseif action.type == "grow" then local t = {} for i = 1, 1e6 do t[i] = i end
          end
        end
        function app.props(state) return { n = #state.log } end
        return app
        """#

    /// An effect the manifest does not declare fails, naming the capability and how to declare it — an `http`
    /// one with its failure action, as a host the policy refuses — and a declared one works, against a real server.
    @Test func effectsAreLimitedToTheDeclaredCapabilities() async throws {
        let server = try await TestServer.start()
        let folder = try AppFolder(["main.lua": Self.plugin, "luastore.json": """
            { "name": "fetcher", "version": "1.0.0", "luastore": "^1.0", "main": "main.lua",
              "capabilities": { "http": ["127.0.0.1:\(server.port)"] } }
            """])
        defer { folder.remove() }
        let recorder = Recorder()
        var options = recorder.options
        options.storageFolder = folder.url.appendingPathComponent(".data")
        let store = try await ScriptedStore(app: folder.url, options: options)
        #expect(store.manifest?.name == "fetcher")
        store.dispatch(["type": "fetch", "id": "a", "url": .string(server.base + "/hello")])
        store.dispatch(["type": "fetch", "id": "b", "url": "http://127.0.0.1:1/"])
        #expect(await eventually { (try? await store.state()["log"])?.table?.array.count == 2 })
        let log = try await store.state()["log"]
        #expect(log == [
            "fetched a hello",
            "failed b refusedHost: http to 127.0.0.1:1 is not a declared capability of 'fetcher' (add it to capabilities.http in luastore.json)",
        ] || log == [
            "failed b refusedHost: http to 127.0.0.1:1 is not a declared capability of 'fetcher' (add it to capabilities.http in luastore.json)",
            "fetched a hello",
        ], "\(log)")
        store.dispatch(["type": "save"])
        store.dispatch(["type": "wait"])
        #expect(await eventually { recorder.failures.value.count == 2 })
        let said = Set(recorder.failures.value.map { "\($0.stage.rawValue): \($0.error.message)" })
        #expect(said == [
            "effect: storage (save) is not a declared capability of 'fetcher' (add \"storage\": true to capabilities in luastore.json)",
            "effect: timers (delay) are not a declared capability of 'fetcher' (add \"timers\": true to capabilities in luastore.json)",
        ], "\(said)")
        #expect(!FileManager.default.fileExists(atPath: folder.url.appendingPathComponent(".data/k.json").path), "nothing was saved")
        store.shutdown()
        await server.stop()
    }

    /// The manifest's budgets lower the host's: its time per call and its memory.
    @Test func theManifestsBudgetsApply() async throws {
        let folder = try AppFolder(["app.lua": Self.plugin, "luastore.json": """
            { "name": "tight", "version": "1.0.0", "luastore": ">=1.0.0",
              "budgets": { "timeMilliseconds": 400, "memoryBytes": 4194304 } }
            """])
        defer { folder.remove() }
        let recorder = Recorder()
        var options = recorder.options
        options.limits.timeBudget = .seconds(5) // (the manifest's 400 ms is what stops the loop; 4 MiB the growth)
        let store = try await ScriptedStore(app: folder.url, options: options)
        let spin = await store.send(["type": "spin"])
        #expect(spin.failure?.error.kind == .timeout, "\(String(describing: spin.failure))")
        #expect(spin.failure?.error.message.contains("400 ms") == true, "the manifest's budget: \(String(describing: spin.failure))")
        let grow = await store.send(["type": "grow"])
        #expect(grow.failure?.error.kind == .memory, "16 MB fit the host's 32 MiB, not the manifest's 4: \(String(describing: grow.failure))")
        #expect(await store.send(["type": "wait"]).entry != nil, "the store goes on")
        store.shutdown()
    }

    /// An installed version's budgets are in force once it is swapped in: a tighter time budget stops its loops
    /// (naming its budget); a memory budget below what the store holds is refused before it loads.
    @Test func anInstalledVersionsBudgetsApply() async throws {
        func version(_ number: String, budgets: String) throws -> AppFolder {
            try AppFolder(["app.lua": Self.plugin, "luastore.json": """
                { "name": "budgeted", "version": "\(number)", "luastore": "^1.0", "budgets": \(budgets) }
                """])
        }
        let first = try version("1.0.0", budgets: "{}")
        defer { first.remove() }
        var options = Recorder().options
        options.limits.timeBudget = .seconds(10)
        options.limits.memoryBytes = 64 << 20
        let store = try await ScriptedStore(app: first.url, options: options)
        defer { store.shutdown() }
        #expect(await store.send(["type": "grow"]).failure == nil, "the host's 64 MiB and 10 s")
        let small = try version("1.1.0", budgets: #"{"memoryBytes": 1048576}"#)
        defer { small.remove() }
        do {
            _ = try await store.install(folder: small.url)
            // (A VM may hold less than 1 MiB: then the version is installed, and its cap is what holds.)
            #expect(await store.send(["type": "grow"]).failure?.error.kind == .memory)
        } catch {
            #expect(error.error.message.contains("its budgets allow 1048576 bytes of memory, and the store holds"), "\(error)")
            #expect(store.manifest?.version == SemanticVersion(1, 0, 0))
        }
        // (An endless loop: what stops it is the budget, however loaded the machine.)
        let tight = try version("1.2.0", budgets: #"{"timeMilliseconds": 300}"#)
        defer { tight.remove() }
        _ = try await store.install(folder: tight.url)
        let spin = await store.send(["type": "spin"])
        #expect(spin.failure?.error.kind == .timeout)
        #expect(spin.failure?.error.message.contains("300 ms") == true, "\(String(describing: spin.failure))")
    }

    /// A manifest needing another scripting API, or one that is not valid, keeps the app from loading; `main`
    /// names the app's module.
    @Test func anAppNeedingAnotherAPIIsRefused() async throws {
        let newer = try AppFolder(["app.lua": Self.plugin, "luastore.json": #"{"name": "future", "version": "3.0.0", "luastore": "^2.0"}"#])
        defer { newer.remove() }
        do {
            _ = try await ScriptedStore(app: newer.url, options: Recorder().options)
            Issue.record("a plugin needing ^2.0 was loaded")
        } catch {
            #expect(error.stage == .load)
            #expect(error.error.message == "luastore.json 'future' needs the scripting API ^2.0, and this host has \(AppManifest.scriptingAPI) (run a luastore whose API is in that range)")
        }
        let nested = try AppFolder(["src/main.lua": Self.plugin, "luastore.json": #"{"name": "nested", "version": "1.0.0", "luastore": "^1", "main": "src/main.lua"}"#])
        defer { nested.remove() }
        let store = try await ScriptedStore(app: nested.url, options: Recorder().options)
        #expect(try await store.state() == ["log": .table(LuaTable())])
        store.shutdown()
        let missing = try AppFolder(["app.lua": Self.plugin, "luastore.json": #"{"name": "lost", "version": "1.0.0", "luastore": "^1", "main": "lost.lua"}"#])
        defer { missing.remove() }
        do {
            _ = try await ScriptedStore(app: missing.url, options: Recorder().options)
            Issue.record("a missing main was loaded")
        } catch {
            #expect(error.error.message == "\(missing.url.path) has no lost.lua")
        }
    }

    /// `install(folder:)`: a newer version of the same app replaces the running one, its state kept and its
    /// capabilities in force from then on; another app, an older version (unless asked for) and a version that
    /// fails to load are refused, the running one staying.
    @Test func aNewerVersionIsInstalledFromAFolder() async throws {
        func version(_ number: String, name: String = "fetcher", storage: Bool, source: String = Self.plugin) throws -> AppFolder {
            try AppFolder(["app.lua": source, "luastore.json": """
                { "name": "\(name)", "version": "\(number)", "luastore": "^1.0", "capabilities": { "storage": \(storage) } }
                """])
        }
        let first = try version("1.0.0", storage: false), second = try version("1.1.0", storage: true)
        let other = try version("2.0.0", name: "other", storage: true), older = try version("0.9.0", storage: true)
        let broken = try version("1.2.0", storage: true, source: "return {")
        defer { for folder in [first, second, other, older, broken] { folder.remove() } }
        let recorder = Recorder()
        var options = recorder.options
        options.storageFolder = first.url.appendingPathComponent(".data")
        options.journal = { _ in }
        let store = try await ScriptedStore(app: first.url, options: options)
        #expect(await store.send(["type": "fetched", "id": "kept", "body": "by hand"]).entry != nil)
        _ = await store.send(["type": "wait"]) // (refused: timers, an effect failure)
        #expect(await store.send(["type": "save"]).entry != nil)
        #expect(await eventually { recorder.failures.value.count == 2 })
        #expect(recorder.failures.value.last?.error.message.hasPrefix("storage (save) is not a declared capability") == true)

        #expect(try await store.install(folder: second.url) == .reloaded(fromSchema: 0, toSchema: 0))
        #expect(store.manifest?.version == SemanticVersion(1, 1, 0))
        #expect(await store.send(["type": "save"]).entry != nil)
        #expect(await eventually { FileManager.default.fileExists(atPath: first.url.appendingPathComponent(".data/k.json").path) },
                "storage is declared now")
        for (folder, said) in [(other, "names 'other', not the running 'fetcher'"),
                               (older, "says 'fetcher' 0.9.0, which is not newer than the running 1.1.0"),
                               (broken, "unexpected symbol near <eof>")] {
            do {
                _ = try await store.install(folder: folder.url)
                Issue.record("\(folder.url.path) was installed")
            } catch {
                #expect(error.error.message.contains(said), "\(error.error.message)")
            }
            #expect(store.manifest?.version == SemanticVersion(1, 1, 0), "the running version stays")
        }
        #expect(try await store.install(folder: older.url, allowDowngrade: true) == .reloaded(fromSchema: 0, toSchema: 0))
        #expect(store.manifest?.version == SemanticVersion(0, 9, 0))
        let migrating = try version("1.3.0", storage: true, source: Self.plugin.replacingOccurrences(of: "local app = {}", with: """
            local app = {}
            app.schemaVersion = 1
            function app.migrate(state, fromSchema, fromVersion) state.log[#state.log + 1] = "migrated from " .. fromSchema .. " of " .. fromVersion end
            """))
        defer { migrating.remove() }
        #expect(try await store.install(folder: migrating.url) == .reloaded(fromSchema: 0, toSchema: 1))
        #expect(try await store.state()["log"] == ["fetched kept by hand", "migrated from 0 of 0.9.0"])
        #expect((try await store.state()["log"]).table?.array.first == "fetched kept by hand", "the state was kept through every install")
        store.shutdown()
    }
}
