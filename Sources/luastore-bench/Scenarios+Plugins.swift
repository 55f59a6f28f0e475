import Foundation
import LuaKit
import LuaStoreBundles
import LuaStoreScripting

/// Plugins (`LuaStoreBundles`): how fast a bundle is verified — every entry's structure, the signature over the
/// digests, every file inflated and hashed — for an app carrying 16 MB of data modules; what installing a new
/// version into a store holding 100,000 items costs (verify, unpack, load, props, swap); and what mounting costs
/// per action (two plugins against the same logic in one app).
extension Scenarios {
    /// The two plugins of the mounted row: one counts, one keeps the last note and flag of a fresh action.
    static let countingPlugin = """
        local p = {}
        function p.init() return { count = 0 } end
        function p.reduce(slice, action) if action.type == "add" then slice.count = slice.count + action.by end end
        return p
        """
    static let notingPlugin = """
        local p = {}
        function p.init() return { note = "", flag = false } end
        function p.reduce(slice, action) if action.type == "add" then slice.note = action.note; slice.flag = action.flag end end
        return p
        """
    /// The same logic as one app.
    static let unmountedApp = """
        local app = {}
        function app.init() return { counting = { count = 0 }, noting = { note = "", flag = false } } end
        function app.reduce(state, action)
          if action.type == "add" then
            local counting, noting = state.counting, state.noting
            counting.count = counting.count + action.by
            noting.note = action.note; noting.flag = action.flag
          end
        end
        function app.props(state) return { count = state.counting.count } end
        return app
        """

    /// The app that mounts the two plugins (its own module: init and props only).
    func mountedApp() throws -> URL {
        let folder = try app("mounted", """
            return { init = function() return {} end, props = function(state) return { count = state.counting.count } end }
            """)
        try Data(#"{"name": "mounted", "version": "1.0.0", "luastore": "^1.0", "mounts": {"counting": "counting", "noting": "noting"}}"#.utf8)
            .write(to: folder.appendingPathComponent("luastore.json"))
        for (name, source) in [("counting", Self.countingPlugin), ("noting", Self.notingPlugin)] {
            let plugin = folder.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: plugin, withIntermediateDirectories: true)
            try Data(source.utf8).write(to: plugin.appendingPathComponent("app.lua"))
            try Data(#"{"name": "\#(name)", "version": "1.0.0", "luastore": "^1.0"}"#.utf8).write(to: plugin.appendingPathComponent("luastore.json"))
        }
        return folder
    }

    /// ns per fresh action through the app in `folder`, until the observer has the last props.
    func freshActionNanoseconds(_ folder: URL, actions: Int) async throws -> Double {
        let store = try await ScriptedStore(app: folder, options: options)
        let arrival = await Self.arrival(of: store, counting: "count")
        let notes = (0..<16).map { LuaValue.string("note \($0)") }
        let total = await Harness.nanoseconds(operations: actions) {
            for index in 0..<actions {
                store.dispatch(["type": "add", "by": 1, "note": notes[index & 15], "flag": .boolean(index & 1 == 0)])
            }
            await arrival.wait(for: Int64(actions))
        }
        store.shutdown()
        return total
    }

    /// `plugins.mounted_dispatch_ratio`: an action through an app with two mounted plugins ÷ the same logic in one app.
    func mountedDispatch() async throws -> [Scenario] {
        let mounted = try mountedApp(), single = try app("unmounted", Self.unmountedApp)
        let actions = quick ? 20_000 : 200_000
        let (withMounts, without, ratio) = try await Harness.alternate(rounds: rounds, sides: sides) {
            try await freshActionNanoseconds(mounted, actions: actions)
        } _: {
            try await freshActionNanoseconds(single, actions: actions)
        }
        return [
            Scenario(name: "plugins.mounted_ns_per_dispatch", value: withMounts, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "plugins.unmounted_ns_per_dispatch", value: without, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "plugins.mounted_dispatch_ratio", value: ratio, unit: "×", goal: "≤ 1.3", pass: ratio <= 1.3),
        ]
    }

    /// Milliseconds to install version `1.N.0` of the list app, as a signed bundle, into a store of `items` items.
    func installMilliseconds(items: Int) async throws -> Double {
        let keys = workspace.appendingPathComponent("install-key").path
        if !FileManager.default.fileExists(atPath: keys + ".key") { _ = try BundleKeys.generate(at: keys) }
        let trusted = [try BundleKeys.trusted(at: keys + ".pub")]
        func bundle(_ minor: Int) throws -> URL {
            let folder = workspace.appendingPathComponent("install-\(minor)")
            try? FileManager.default.removeItem(at: folder)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(Self.listApp(items: items).utf8).write(to: folder.appendingPathComponent("app.lua"))
            try Data(#"{"name": "list", "version": "1.\#(minor).0", "luastore": "^1.0"}"#.utf8).write(to: folder.appendingPathComponent("luastore.json"))
            let file = workspace.appendingPathComponent("install-\(minor).lsb")
            _ = try AppBundle.pack(folder: folder, to: file, key: try BundleKeys.privateKey(at: keys + ".key"))
            return file
        }
        let first = try AppBundle.unpack(try AppBundle.verify(try bundle(0), trusting: trusted))
        defer { try? FileManager.default.removeItem(at: first.parent) }
        let store = try await ScriptedStore(app: first.folder, options: options)
        let next = try bundle(1)
        let clock = ContinuousClock()
        let start = clock.now
        let installed = try await store.install(bundle: next, trust: trusted)
        let elapsed = clock.now - start
        precondition(store.manifest?.version.minor == 1)
        store.shutdown()
        try? FileManager.default.removeItem(at: installed.unpacked)
        return Harness.milliseconds(elapsed)
    }

    func plugins() async throws -> [Scenario] {
        let megabytes = quick ? 2 : 16
        let folder = workspace.appendingPathComponent("plugin")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(Self.listApp(items: 10).utf8).write(to: folder.appendingPathComponent("app.lua"))
        try Data(#"{"name": "plugin", "version": "1.0.0", "luastore": "^1.0"}"#.utf8).write(to: folder.appendingPathComponent("luastore.json"))
        // Data modules: Lua tables of numbers and words, as an app carrying a dictionary or a map would.
        var generator = SystemRandomNumberGenerator()
        for part in 0..<megabytes {
            var text = "return {\n"
            while text.utf8.count < 1 << 20 {
                text += "  { id = \(generator.next() as UInt32), word = \"w\(generator.next() as UInt16)\", weight = \(Double(generator.next() as UInt16) / 7) },\n"
            }
            try Data((text + "}\n").utf8).write(to: folder.appendingPathComponent("data\(part).lua"))
        }
        let keys = workspace.appendingPathComponent("bench-key").path
        for suffix in [".key", ".pub"] { try? FileManager.default.removeItem(atPath: keys + suffix) }
        _ = try BundleKeys.generate(at: keys)
        let bundle = workspace.appendingPathComponent("plugin.lsb")
        _ = try AppBundle.pack(folder: folder, to: bundle, key: try BundleKeys.privateKey(at: keys + ".key"))
        let trusted = [try BundleKeys.trusted(at: keys + ".pub")]
        let bytes = Double(megabytes << 20)
        let perSecond = try await Harness.median(rounds: rounds) {
            let clock = ContinuousClock()
            let start = clock.now
            let verified = try AppBundle.verify(bundle, trusting: trusted)
            precondition(verified.files.count == megabytes + 2)
            return bytes / 1_048_576 / (Harness.milliseconds(clock.now - start) / 1000)
        }
        let install = try await Harness.median(rounds: rounds) { try await installMilliseconds(items: quick ? 10_000 : 100_000) }
        return [
            Scenario(name: "plugins.verify_mb_per_s", value: perSecond, unit: "MB/s", goal: "—", pass: nil),
            Scenario(name: "plugins.install_ms_100k", value: install, unit: "ms", goal: "≤ 100", pass: install <= 100),
        ]
    }
}
