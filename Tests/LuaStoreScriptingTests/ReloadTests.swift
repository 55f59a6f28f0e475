import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing
import LuaStoreCore

/// Hot reload: new scripts, same state; every failure keeps the old version running.
@Suite(.tags(.concurrency)) struct ReloadTests {
    static let version1 = #"""
    local app = {}
    app.schemaVersion = 1
    function app.init() return { count = 0 } end
    function app.reduce(state, action)
      if action.type == "increment" then state.count = state.count + 1 end
    end
    function app.props(state) return { count = state.count, version = 1 } end
    return app
    """#

    static let version2 = version1.replacingOccurrences(of: "version = 1", with: "version = 2")

    static let migrated = #"""
    local app = {}
    app.schemaVersion = 2
    function app.init() return { counter = { value = 0 } } end
    function app.migrate(state, from)
      if from < 2 then
        state.counter = { value = state.count }
        state.count = nil
      end
    end
    function app.reduce(state, action)
      if action.type == "increment" then state.counter.value = state.counter.value + 1 end
    end
    function app.props(state) return { count = state.counter.value, version = 3 } end
    return app
    """#

    func makeStore() async throws -> (ScriptedStore, Recorder, AppFolder) {
        let folder = try AppFolder(["app.lua": Self.version1])
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        recorder.observe(store)
        return (store, recorder, folder)
    }

    @Test func reloadKeepsTheStateAndDeliversFreshProps() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        for _ in 0..<3 { store.dispatch(["type": "increment"]) }
        try folder.write("app.lua", Self.version2)
        #expect(try await store.reload() == .reloaded(fromSchema: 1, toSchema: 1))
        #expect(await eventually { recorder.props.value.last == ["count": 3, "version": 2] })
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last == ["count": 4, "version": 2] })
    }

    /// `tostring` identities stay deterministic across a reload: the same object (a state table) keeps its
    /// identity, the new namespace's modules get new ones, and the same session — the same actions and
    /// reloads — gives the same identities every time.
    @Test func tostringIdentitiesAcrossAReload() async throws {
        let helper = "return { name = 'helper' }\n"
        func app(_ version: Int) -> String {
            """
            local helper = require("helper")
            local own = {}
            local app = {}
            function app.init() return { seen = {}, box = {} } end
            function app.reduce(state, action)
              local seen = state.seen
              seen[#seen + 1] = table.concat({ "v\(version)", tostring(helper), tostring(own), tostring(state.box) }, " ")
            end
            function app.props(state) return { last = state.seen[#state.seen] } end
            return app
            """
        }
        func session() async throws -> [String] {
            let folder = try AppFolder(["app.lua": app(1), "helper.lua": helper])
            defer { folder.remove() }
            let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
            store.dispatch(["type": "look"])
            _ = try await store.state()
            try folder.write("app.lua", app(2))
            let reloaded = try await store.reload()
            #expect(reloaded == .reloaded(fromSchema: 0, toSchema: 0), "\(reloaded)")
            store.dispatch(["type": "look"])
            let seen = try await store.state()["seen"].table?.array ?? []
            return seen.compactMap(\.string)
        }
        let first = try await session(), second = try await session()
        #expect(first.count == 3, "look, luastore/reloaded, look: \(first)")
        #expect(first == second, "the same session gives the same identities")
        guard first.count == 3 else { return }
        let before = first[0].split(separator: " "), after = first[2].split(separator: " ")
        #expect(before.count == 7 && after.count == 7, "\(first)")
        guard before.count == 7, after.count == 7 else { return }
        #expect(before[6] == after[6], "the state's table keeps its identity across the reload: \(first)")
        #expect(before[4] != after[4], "the new version's own table is a new object: \(first)")
        #expect(Set([before[2], before[4], before[6]]).count == 3, "distinct objects, distinct identities: \(first)")
    }

    @Test func identicalBytesAreANoOp() async throws {
        let (store, _, folder) = try await makeStore()
        defer { folder.remove() }
        #expect(try await store.reload() == .unchanged)
        try folder.write("app.lua", Self.version1)
        #expect(try await store.reload() == .unchanged)
    }

    @Test func migrationRunsWhenTheSchemaVersionGrows() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        for _ in 0..<5 { store.dispatch(["type": "increment"]) }
        try folder.write("app.lua", Self.migrated)
        #expect(try await store.reload() == .reloaded(fromSchema: 1, toSchema: 2))
        #expect(try await store.state() == ["counter": ["value": 5]])
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last == ["count": 6, "version": 3] })
    }

    static let failures: [(String, String, ScriptFailure.Stage, String, String?)] = [
        ("syntax error", version1.replacingOccurrences(of: "return app", with: "return app +"), .load,
         "unexpected symbol near <eof>", "app.lua:8"),
        ("error at top level", "local x = nil\nreturn x.field", .load, "attempt to index a nil value (local 'x')", "app.lua:2"),
        ("endless loop at top level", "while true do end", .load, "time budget of 1000 ms exceeded", "app.lua:1"),
        ("missing export", version1.replacingOccurrences(of: "function app.props", with: "function app.view"), .load,
         "app.lua must export a function 'props'", "app.lua"),
        ("failing props", version1.replacingOccurrences(of: "count = state.count", with: "count = state.missing.count"), .props,
         "attempt to index a nil value (field 'missing')", "app.lua:7"),
        ("failing migration", migrated.replacingOccurrences(of: "state.count = nil", with: "state.count = nil\n    error('migration broke')"), .migrate,
         "migration broke", "app.lua:8"),
        ("migration returning no state", migrated.replacingOccurrences(of: "state.count = nil\n  end\nend", with: "state.count = nil\n  end\n  return 42\nend"),
         .migrate, "the function must return a state table or nothing", "app.lua:4"),
        ("lower schema version", version1.replacingOccurrences(of: "schemaVersion = 1", with: "schemaVersion = 0"), .reload,
         "schemaVersion went down from 1 to 0; the new version is refused", "app.lua"),
        ("growth without migrate", version1.replacingOccurrences(of: "schemaVersion = 1", with: "schemaVersion = 2"), .migrate,
         "schemaVersion grew from 1 to 2 but app.lua has no 'migrate'", "app.lua"),
    ]

    @Test(arguments: failures.map(\.0))
    func everyFailureKeepsTheOldVersionRunning(name: String) async throws {
        let (_, source, stage, message, location) = Self.failures.first { $0.0 == name }!
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        store.dispatch(["type": "increment"])
        let before = try await store.state()
        try folder.write("app.lua", source)
        do {
            try await store.reload()
            Issue.record("the reload should have failed")
        } catch {
            #expect(error.stage == stage)
            #expect(error.error.message == message)
            #expect(error.error.location == location)
        }
        #expect(try await store.state() == before, "the state is as it was")
        store.dispatch(["type": "increment"])
        #expect(await eventually { recorder.props.value.last == ["count": 2, "version": 1] }, "the old scripts still run")
    }

    @Test func reloadUnderAStreamOfDispatchesLosesAndDuplicatesNothing() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        let dispatcher = Task.detached {
            for _ in 0..<3000 {
                store.dispatch(["type": "increment"])
                if Int.random(in: 0..<50) == 0 { try? await Task.sleep(for: .microseconds(200)) }
            }
        }
        for round in 0..<10 {
            try folder.write("app.lua", round.isMultiple(of: 2) ? Self.version2 : Self.version1)
            _ = try await store.reload()
        }
        await dispatcher.value
        #expect(await eventually { recorder.props.value.last?["count"] == 3000 })
        #expect(try await store.state() == ["count": 3000])
    }

    /// How editors and tools save, each seen once — through the kernel's notifications, and by polling: a
    /// rename over the file (how many editors save), a module in a folder made after the watch began; files
    /// that are not scripts are not saves.
    @Test(arguments: [false, true]) func savesAreSeenHoweverTheyAreMade(polls: Bool) async throws {
        let (store, recorder, folder) = try await makeStore()
        defer {
            store.shutdown()
            folder.remove()
        }
        let outcomes = Protected<[String]>([])
        store.startWatching(polls: polls) { result in outcomes.withLock { $0.append("\(result)") } }
        let swap = folder.url.appendingPathComponent(".app.lua.swp")
        try Data((Self.version2 + "\n-- saved by a rename\n").utf8).write(to: swap)
        #expect(rename(swap.path, folder.url.appendingPathComponent("app.lua").path) == 0)
        #expect(await eventually { recorder.props.value.last == ["count": 0, "version": 2] },
                "\(recorder.props.value.suffix(3)) \(outcomes.value) \(recorder.failures.value)")
        #expect(await eventually { outcomes.value.count == 1 })
        try folder.write(".data/saved.json", "{}")
        try folder.write("notes.txt", "not a script")
        try folder.write("extra/more.lua", "return {}")
        #expect(await eventually { outcomes.value.count == 2 })
        try FileManager.default.removeItem(at: folder.url.appendingPathComponent("extra/more.lua")) // a deletion
        #expect(await eventually { outcomes.value.count == 3 })
        try await Task.sleep(for: .milliseconds(100)) // nothing more comes
        #expect(outcomes.value.count == 3, "\(outcomes.value)")
        #expect(outcomes.value.allSatisfy { $0.contains("reloaded(fromSchema: 1, toSchema: 1)") }, "\(outcomes.value)")
        store.stopWatching()
        try folder.write("app.lua", Self.version1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(outcomes.value.count == 3, "no reload after stopWatching")
    }

    /// An app that puts a folder of its own in front of `package.path` (`"./libs/?.lua;" .. package.path`) loads
    /// its modules from there, and a reload after one of them changed loads the new one: the folder watched is the
    /// app's, wherever in it the path leads.
    @Test func modulesFoundByAChangedPackagePathReloadToo() async throws {
        let app = #"""
            package.path = "./libs/?.lua;" .. package.path
            local labels = require("labels")
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action) if action.type == "tick" then state.count = state.count + 1 end end
            function app.props(state) return { label = labels.name(state.count) } end
            return app
            """#
        let folder = try AppFolder(["app.lua": app, "libs/labels.lua": "return { name = function(n) return 'one ' .. n end }"])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        recorder.observe(store)
        store.dispatch(["type": "tick"])
        #expect(await eventually { recorder.props.value.last == ["label": "one 1"] })
        try folder.write("libs/labels.lua", "return { name = function(n) return 'two ' .. n end }")
        let outcome = try await store.reload()
        #expect(outcome == .reloaded(fromSchema: 0, toSchema: 0), "\(recorder.failures.value)")
        #expect(await eventually { recorder.props.value.last == ["label": "two 1"] }, "\(recorder.props.value)")
        store.shutdown()
    }

    @Test func watcherReloadsAfterASave() async throws {
        let (store, recorder, folder) = try await makeStore()
        defer { folder.remove() }
        let outcomes = Protected<[String]>([])
        store.startWatching { result in
            let text = switch result {
            case .success(let outcome): "\(outcome)"
            case .failure(let error): "\(error)"
            }
            outcomes.withLock { $0.append(text) }
        }
        try folder.write("app.lua", Self.version2) // at once: the watcher's baseline was taken before it returned
        #expect(await eventually { recorder.props.value.last == ["count": 0, "version": 2] })
        try folder.write("app.lua", "return {")
        #expect(await eventually { outcomes.value.count == 2 })
        #expect(outcomes.value.first == "reloaded(fromSchema: 1, toSchema: 1)")
        #expect(outcomes.value.last?.contains("app.lua:1: unexpected symbol") == true)
        store.stopWatching()
    }
}

/// What docs/scripted-apps.md's "Hot reload" promises beyond the state kept: the reload is an action, commands in flight
/// report to the new scripts, and a burst of saves is one reload.
@Suite(.tags(.concurrency)) struct ReloadPromisesTests {
    /// Records the last action it saw (with `from`/`to`), and asks for a delayed `late` action on `later`.
    static func app(version: Int, lateMarks: String) -> String {
        """
        local luastore = require("luastore")
        local app = {}
        app.schemaVersion = \(version)
        function app.init() return { seen = "none", late = "none" } end
        function app.migrate(state, from) end
        function app.reduce(state, action)
          if action.type == "later" then return nil, { luastore.delay(0.3, { type = "late" }) } end
          if action.type == "late" then state.late = "\(lateMarks)"; return end
          state.seen = action.type .. " " .. tostring(action.from) .. "->" .. tostring(action.to)
        end
        function app.props(state) return { seen = state.seen, late = state.late } end
        return app
        """
    }

    @Test func aReloadIsDispatchedAndCommandsInFlightReportToTheNewScripts() async throws {
        let folder = try AppFolder(["app.lua": Self.app(version: 1, lateMarks: "old scripts")])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        recorder.observe(store)
        store.dispatch(["type": "later"]) // a 0.3 s delay, in flight across the reload
        _ = try await store.state()
        try folder.write("app.lua", Self.app(version: 2, lateMarks: "new scripts"))
        #expect(try await store.reload() == .reloaded(fromSchema: 1, toSchema: 2))
        #expect(await eventually { recorder.props.value.last?["seen"] == "luastore/reloaded 1->2" })
        #expect(await eventually { recorder.props.value.last?["late"] == "new scripts" }, "\(recorder.props.value)")
        #expect(recorder.failures.value.isEmpty)
        store.shutdown()
    }

    @Test func aBurstOfSavesIsOneReload() async throws {
        let folder = try AppFolder(["app.lua": Self.app(version: 1, lateMarks: "v1")])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        let outcomes = Protected<[String]>([])
        // A debounce far longer than the burst takes, so a busy machine cannot split it.
        store.startWatching(debounce: .milliseconds(300)) { result in outcomes.withLock { $0.append("\(result)") } }
        for version in 2...6 { try folder.write("app.lua", Self.app(version: version, lateMarks: "v\(version)")) }
        #expect(await eventually { outcomes.value.count == 1 })
        // One more save later is one more reload: the first count was not cut short.
        try folder.write("app.lua", Self.app(version: 7, lateMarks: "v7"))
        #expect(await eventually { outcomes.value.count == 2 })
        #expect(outcomes.value.first?.contains("toSchema: 6") == true, "the burst ended at version 6: \(outcomes.value)")
        #expect(outcomes.value.last?.contains("fromSchema: 6, toSchema: 7") == true, "\(outcomes.value)")
        store.stopWatching()
        store.shutdown()
    }
}

/// The folders bundles were unpacked into are the store's: the replaced version's goes once the new one is in,
/// the running one's at shutdown; a refused install leaves the running version's folder where it is.
@Suite struct UnpackedFolderTests {
    static func version(_ version: String, in parent: URL) throws -> URL {
        let folder = parent.appendingPathComponent("counter")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(#"{"name": "counter", "version": "\#(version)", "luastore": "^1.0"}"#.utf8).write(to: folder.appendingPathComponent("luastore.json"))
        try Data("""
            local app = {}
            function app.init() return { n = 0 } end
            function app.reduce(state, action) state.n = state.n + 1 end
            function app.props(state) return { n = state.n } end
            return app
            """.utf8).write(to: folder.appendingPathComponent("app.lua"))
        return folder
    }

    @Test func theStoreRemovesTheFoldersItWasGiven() async throws {
        let temporary = FileManager.default.temporaryDirectory
        let first = temporary.appendingPathComponent("luastore-unpacked-\(UUID().uuidString)")
        let second = temporary.appendingPathComponent("luastore-unpacked-\(UUID().uuidString)")
        let third = temporary.appendingPathComponent("luastore-unpacked-\(UUID().uuidString)")
        defer { for folder in [first, second, third] { try? FileManager.default.removeItem(at: folder) } }
        let store = try await ScriptedStore(app: try Self.version("1.0.0", in: first), options: Recorder().options)
        store.ownUnpackedFolder(first)
        _ = try await store.install(folder: try Self.version("2.0.0", in: second), owning: second)
        #expect(!FileManager.default.fileExists(atPath: first.path), "the replaced version's folder is gone")
        #expect(FileManager.default.fileExists(atPath: second.path))
        await #expect(throws: ScriptFailure.self) { try await store.install(folder: try Self.version("1.5.0", in: third), owning: third) }
        #expect(FileManager.default.fileExists(atPath: second.path), "a refused install leaves the running one's")
        #expect(await store.send(["type": "tick"]).failure == nil)
        store.shutdown()
        #expect(!FileManager.default.fileExists(atPath: second.path), "the running version's folder goes at shutdown")
    }
}
