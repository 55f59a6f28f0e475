import Foundation
import LuaStoreBundles
import LuaStoreScripting

/// Plugins (`LuaStoreBundles`): how fast a bundle is verified — every entry's structure, the signature over the
/// digests, every file inflated and hashed — for an app carrying 16 MB of data modules; and what installing a new
/// version into a store holding 100,000 items costs (verify, unpack, load, props, swap).
extension Scenarios {
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
