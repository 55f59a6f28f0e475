import Crypto
import Foundation
import LuaKit
import LuaStoreBundles
import LuaStoreScripting
import LuaStoreTestSupport
import Testing
import ZIPFoundation

/// `AppBundle` and `BundleKeys` as a host calls them: a bundle packed, signed, verified and unpacked; every bundle
/// a host must not run — unsigned, signed by a key it does not trust, a file changed after signing, a path that
/// leaves the bundle — refused naming what is wrong before a byte of it is unpacked; a new version installed into
/// a running store. (`luastore pack`, `verify` and `run BUNDLE` are tested through the binary in luastoreTests.)
@Suite struct AppBundleTests {
    static func app(version: String, step: Int) -> [String: String] {
        [
            "app.lua": """
                local app = {}
                function app.init() return { count = 0 } end
                function app.reduce(state, action) if action.type == "add" then state.count = state.count + \(step) end end
                function app.props(state) return { count = state.count } end
                return app
                """,
            "luastore.json": #"{"name": "counter", "version": "\#(version)", "luastore": "^1.0"}"#,
            "lib/words.lua": "return { hello = \"hello\" }\n",
            ".data/secret.json": "{}",
        ]
    }

    /// A folder for keys and bundles, and a key pair in it.
    struct Keys {
        let folder: AppFolder
        let id: String
        let key: Curve25519.Signing.PrivateKey
        let trusted: BundleKeys.Trusted

        init(_ name: String = "signer") throws {
            folder = try AppFolder([:])
            let path = folder.url.appendingPathComponent(name).path
            id = try BundleKeys.generate(at: path)
            key = try BundleKeys.privateKey(at: path + ".key")
            trusted = try BundleKeys.trusted(at: path + ".pub")
        }

        func bundle(_ name: String) -> URL { folder.url.appendingPathComponent(name) }
    }

    static func pack(_ files: [String: String], signedBy keys: Keys?, to output: URL) throws -> AppFolder {
        let folder = try AppFolder(files)
        _ = try AppBundle.pack(folder: folder.url, to: output, key: keys?.key)
        return folder
    }

    /// The bundle's entries, by path.
    static func entries(of url: URL) throws -> [String: Data] {
        let archive = try Archive(url: url, accessMode: .read)
        var entries: [String: Data] = [:]
        for entry in archive {
            var data = Data()
            _ = try archive.extract(entry) { data.append($0) }
            entries[entry.path] = data
        }
        return entries
    }

    /// Writes `entries` as a zip at `url` (a bundle changed by hand, as an attacker would).
    static func write(_ entries: [(String, Data)], to url: URL) throws {
        try? FileManager.default.removeItem(at: url)
        let archive = try Archive(url: url, accessMode: .create)
        for (path, data) in entries {
            try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count), compressionMethod: .deflate) { position, size in
                data.subdata(in: Int(position)..<Int(position) + size)
            }
        }
    }

    /// A host that keeps a public key in its configuration trusts it from its text (`Trusted(publicKeyText:)`), as
    /// from the `.pub` file; a private key's text, or anything else, is refused in words.
    @Test func aPublicKeyIsTrustedFromItsText() throws {
        let keys = try Keys()
        defer { keys.folder.remove() }
        let text = try String(contentsOf: keys.bundle("signer.pub"), encoding: .utf8)
        let trusted = try BundleKeys.Trusted(publicKeyText: "  " + text + "\n")
        #expect(trusted.id == keys.id)
        let output = keys.bundle("counter.lsb")
        let folder = try Self.pack(Self.app(version: "1.0.0", step: 1), signedBy: keys, to: output)
        defer { folder.remove() }
        #expect(try AppBundle.verify(output, trusting: [trusted]).signer == keys.id)
        let privateText = try String(contentsOf: keys.bundle("signer.key"), encoding: .utf8)
        let refused = #expect(throws: BundleFailure.self) { try BundleKeys.Trusted(publicKeyText: privateText) }
        #expect(refused?.description == "the text is a private key, not a public key")
        let garbage = #expect(throws: BundleFailure.self) { try BundleKeys.Trusted(publicKeyText: "luastore-ed25519-public abc") }
        #expect(garbage?.description == "the text is not a public key of luastore keygen")
    }

    @Test func aSignedBundleIsVerifiedWholeAndUnpacked() throws {
        let keys = try Keys()
        defer { keys.folder.remove() }
        let output = keys.bundle("counter.lsb")
        let app = try Self.pack(Self.app(version: "1.0.0", step: 1), signedBy: keys, to: output)
        defer { app.remove() }

        let verified = try AppBundle.verify(output, trusting: [keys.trusted])
        #expect(verified.signer == keys.id)
        #expect(verified.manifest.name == "counter")
        #expect(Set(verified.files.keys) == ["app.lua", "luastore.json", "lib/words.lua"], "hidden files stay out")
        #expect(verified.files["lib/words.lua"] == Data("return { hello = \"hello\" }\n".utf8))
        let (folder, parent) = try AppBundle.unpack(verified)
        defer { try? FileManager.default.removeItem(at: parent) }
        #expect(try Data(contentsOf: folder.appendingPathComponent("app.lua")) == verified.files["app.lua"])
    }

    @Test func aBundleNoTrustedKeySignedIsRefused() throws {
        let keys = try Keys(), stranger = try Keys("stranger")
        defer { keys.folder.remove(); stranger.folder.remove() }
        let signed = keys.bundle("signed.lsb"), unsigned = keys.bundle("unsigned.lsb")
        let app = try Self.pack(Self.app(version: "1.0.0", step: 1), signedBy: keys, to: signed)
        defer { app.remove() }
        let plain = try Self.pack(Self.app(version: "1.0.0", step: 1), signedBy: nil, to: unsigned)
        defer { plain.remove() }

        let untrusted = #expect(throws: BundleFailure.self) { try AppBundle.verify(signed, trusting: [stranger.trusted]) }
        #expect(untrusted?.description.contains(keys.id) == true, "\(String(describing: untrusted))")
        let noSignature = #expect(throws: BundleFailure.self) { try AppBundle.verify(unsigned, trusting: [keys.trusted]) }
        #expect(noSignature?.description.contains("unsigned") == true || noSignature?.description.contains("not signed") == true,
                "\(String(describing: noSignature))")
        #expect(try AppBundle.verify(unsigned, trusting: [], allowUnsigned: true).signer == nil)
    }

    @Test func aFileChangedOrAddedAfterSigningIsRefusedNamingIt() throws {
        let keys = try Keys()
        defer { keys.folder.remove() }
        let good = keys.bundle("good.lsb")
        let app = try Self.pack(Self.app(version: "1.0.0", step: 1), signedBy: keys, to: good)
        defer { app.remove() }
        let entries = try Self.entries(of: good).sorted { $0.key < $1.key }

        let changed = keys.bundle("changed.lsb")
        try Self.write(entries.map { ($0.key, $0.key == "app.lua" ? Data($0.value.map { $0 == UInt8(ascii: "1") ? UInt8(ascii: "9") : $0 }) : $0.value) },
                       to: changed)
        let refusedChange = #expect(throws: BundleFailure.self) { try AppBundle.verify(changed, trusting: [keys.trusted]) }
        #expect(refusedChange?.description.contains("app.lua") == true, "\(String(describing: refusedChange))")

        let added = keys.bundle("added.lsb")
        try Self.write(entries.map { ($0.key, $0.value) } + [("extra.lua", Data("return 1\n".utf8))], to: added)
        let refusedAddition = #expect(throws: BundleFailure.self) { try AppBundle.verify(added, trusting: [keys.trusted]) }
        #expect(refusedAddition?.description.contains("extra.lua") == true, "\(String(describing: refusedAddition))")

        let escaping = keys.bundle("escaping.lsb")
        try Self.write(entries.map { ($0.key, $0.value) } + [("../evil.lua", Data("os.exit(1)\n".utf8))], to: escaping)
        let refusedPath = #expect(throws: BundleFailure.self) { try AppBundle.verify(escaping, trusting: [keys.trusted], allowUnsigned: true) }
        #expect(refusedPath?.description.contains("../evil.lua") == true, "\(String(describing: refusedPath))")
        #expect(!FileManager.default.fileExists(atPath: keys.folder.url.deletingLastPathComponent().appendingPathComponent("evil.lua").path))
    }

    /// A name every file system can hold as it is, or none: `pack` refuses what `verify` would (a backslash, a line
    /// break — which would split its line of the digests —, a part over 255 bytes, two names that differ only in
    /// case), and `verify` refuses such names in a bundle made by hand, naming them, before anything is unpacked.
    @Test func namesABundleCannotHoldAreRefusedByPackAndVerify() throws {
        let keys = try Keys()
        defer { keys.folder.remove() }
        for (odd, said) in [("back\\slash.lua", "back\\slash.lua"), ("new\nline.lua", "line.lua"),
                            (String(repeating: "a", count: 300) + ".lua", "aaaa"), ("App.lua", "names that differ only in case")] {
            if odd.utf8.count <= 255 { // (a longer name no folder here can hold: only a bundle made by hand has it)
                var files = Self.app(version: "1.0.0", step: 1)
                files[odd] = "return 1\n"
                let output = keys.bundle("odd.lsb")
                let folder = try AppFolder(files)
                defer { folder.remove() }
                let packing = #expect(throws: BundleFailure.self) { try AppBundle.pack(folder: folder.url, to: output, key: nil) }
                #expect(packing?.description.contains(said) == true, "\(String(describing: packing))")
                #expect(!FileManager.default.fileExists(atPath: output.path), "nothing was written")
            }

            let good = keys.bundle("good.lsb")
            let app = try Self.pack(Self.app(version: "1.0.0", step: 1), signedBy: nil, to: good)
            defer { app.remove() }
            let handMade = keys.bundle("hand.lsb")
            try Self.write(try Self.entries(of: good).sorted { $0.key < $1.key }.map { ($0.key, $0.value) } + [(odd, Data("return 1\n".utf8))],
                           to: handMade)
            let verifying = #expect(throws: BundleFailure.self) { try AppBundle.verify(handMade, trusting: [], allowUnsigned: true) }
            #expect(verifying?.description.contains(odd.hasPrefix("App") ? said : "is not plain") == true, "\(String(describing: verifying))")
        }
    }

    @Test func aNewVersionIsInstalledIntoTheRunningStore() async throws {
        let keys = try Keys()
        defer { keys.folder.remove() }
        let first = try AppFolder(Self.app(version: "1.0.0", step: 1))
        defer { first.remove() }
        let store = try await ScriptedStore(app: first.url, options: ScriptedStoreOptions(log: { _ in }, failures: { _ in }))
        defer { store.shutdown() }
        _ = await store.send(["type": "add"])
        #expect(try await store.props() == ["count": 1])

        let next = keys.bundle("counter-1.1.0.lsb")
        let app = try Self.pack(Self.app(version: "1.1.0", step: 10), signedBy: keys, to: next)
        defer { app.remove() }
        let installed = try await store.install(bundle: next, trust: [keys.trusted])
        #expect(installed.manifest.version.description == "1.1.0")
        _ = await store.send(["type": "add"])
        #expect(try await store.props() == ["count": 11], "the state stayed; the new reducer runs")

        // The same bundle again is no downgrade but nothing new; an older one is refused and the running one stays.
        let older = keys.bundle("counter-0.9.0.lsb")
        let oldApp = try Self.pack(Self.app(version: "0.9.0", step: 100), signedBy: keys, to: older)
        defer { oldApp.remove() }
        await #expect(throws: (any Error).self) { try await store.install(bundle: older, trust: [keys.trusted]) }
        _ = await store.send(["type": "add"])
        #expect(try await store.props() == ["count": 21])
    }
}
