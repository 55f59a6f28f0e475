import Foundation
import LuaStoreTestSupport
import Testing

/// Plugin bundles through the built binary: `keygen`, `pack`, `verify`, and `run`/`check`/`test` given a bundle;
/// every way a bundle can be wrong — untrusted, unsigned, a file changed, added or removed, its manifest or its
/// digests changed, a path that leaves it, a link, a name twice, a zip bomb — refused naming what, before any of
/// its code runs. The damaged bundles are made by Python's `zipfile` from a good one.
@Suite struct BundleTests {
    static let app = """
        local app = {}
        function app.init() print("init ran") return { count = 0 } end
        function app.reduce(state, action) if action.type == "add" then state.count = state.count + 1 end end
        function app.props(state) return { count = state.count } end
        return app
        """

    /// Rewrites the zip `argv[1]` into `argv[2]`, changed as `argv[3]` says.
    static let damage = #"""
        import sys, zipfile
        source, target, how = sys.argv[1], sys.argv[2], sys.argv[3]
        with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
            for info in zin.infolist():
                data = zin.read(info.filename)
                if how == "change-app" and info.filename == "app.lua": data = data.replace(b"+ 1", b"+ 2")
                if how == "change-manifest" and info.filename == "luastore.json": data = data.replace(b"1.0.0", b"9.0.0")
                if how == "change-digests" and info.filename == ".luastore/digests": data = data.replace(b"app.lua", b"app.lux")
                if how == "remove" and info.filename == "README.md": continue
                zout.writestr(info, data)
            if how == "extra": zout.writestr("extra.lua", b"return 1\n")
            if how == "traversal": zout.writestr("../evil.lua", b"os.exit(1)\n")
            if how == "duplicate":
                import warnings
                warnings.simplefilter("ignore")
                zout.writestr("app.lua", b"return {}\n")
            if how == "symlink":
                link = zipfile.ZipInfo("link.lua")
                link.create_system = 3
                link.external_attr = 0o120777 << 16
                zout.writestr(link, b"/etc/passwd")
            if how == "bomb": zout.writestr("bomb.txt", bytes(20 << 20))
            if how == "clash":
                zout.writestr("lib", b"return 1\n")
                zout.writestr("lib/x.lua", b"return 2\n")
            if how == "folder":
                zout.writestr(zipfile.ZipInfo("app.lua/"), b"")
        if how in ("encrypted", "method99"):
            data = bytearray(open(target, "rb").read())
            for signature, flags, method in ((b"PK\x03\x04", 6, 8), (b"PK\x01\x02", 8, 10)):
                at = data.find(signature)
                while at >= 0:
                    if how == "encrypted": data[at + flags] |= 1
                    else: data[at + method:at + method + 2] = (99).to_bytes(2, "little")
                    at = data.find(signature, at + 4)
            open(target, "wb").write(bytes(data))
        """#

    /// Rewrites the unsigned zip `argv[1]` into `argv[2]` with the manifest's name `argv[3]`, its digest made anew
    /// (an unsigned bundle whose files all match their digests, as a forger would make it).
    static let rename = #"""
        import sys, zipfile, hashlib, json
        source, target, name = sys.argv[1], sys.argv[2], sys.argv[3]
        with zipfile.ZipFile(source) as zin:
            files = {info.filename: zin.read(info.filename) for info in zin.infolist()}
        manifest = json.loads(files["luastore.json"])
        manifest["name"] = name
        files["luastore.json"] = json.dumps(manifest).encode()
        lines = []
        for line in files[".luastore/digests"].decode().splitlines():
            if len(line) > 66 and line[64:66] == "  " and line[66:] == "luastore.json":
                line = hashlib.sha256(files["luastore.json"]).hexdigest() + "  luastore.json"
            lines.append(line)
        files[".luastore/digests"] = ("\n".join(lines) + "\n").encode()
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
            for path, data in files.items(): zout.writestr(path, data)
        """#

    struct Workspace {
        let root: URL
        var app: URL { root.appendingPathComponent("counter") }
        func path(_ name: String) -> String { root.appendingPathComponent(name).path }

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-bundles-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: root.appendingPathComponent("counter"), withIntermediateDirectories: true)
            try Data(BundleTests.app.utf8).write(to: root.appendingPathComponent("counter/app.lua"))
            try Data("# Counter\n".utf8).write(to: root.appendingPathComponent("counter/README.md"))
            try Data(#"{"name": "counter", "version": "1.0.0", "luastore": "^1.0"}"#.utf8)
                .write(to: root.appendingPathComponent("counter/luastore.json"))
            try Data("describe('app', function() it('adds', function() assert.is_true(true) end) end)\n".utf8)
                .write(to: root.appendingPathComponent("counter/app_spec.lua"))
            try FileManager.default.createDirectory(at: root.appendingPathComponent("counter/.data"), withIntermediateDirectories: true)
            try Data("{}".utf8).write(to: root.appendingPathComponent("counter/.data/secret.json"))
            try Data(BundleTests.damage.utf8).write(to: root.appendingPathComponent("damage.py"))
        }

        func damaged(_ how: String, from source: String = "counter.lsb") async throws -> String {
            let target = path("\(how).lsb")
            let made = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", path("damage.py"), path(source), target, how])
            #expect(made.status == 0, "\(made.errors)")
            return target
        }

        func remove() { try? FileManager.default.removeItem(at: root) }
    }

    @Test func aSignedBundleIsMadeVerifiedAndRun() async throws {
        let work = try Workspace()
        defer { work.remove() }
        let keygen = try await CLI.run(["keygen", work.path("me")])
        #expect(keygen.status == 0, "\(keygen.errors)")
        let id = try #require(keygen.output.split(separator: " ").dropFirst().first.map { String($0.dropLast()) })
        #expect(id.count == 16)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: work.path("me.key"))[.posixPermissions] as? NSNumber)
        #expect(mode.intValue == 0o600, "the private key is the owner's alone")
        let again = try await CLI.run(["keygen", work.path("me")])
        #expect(again.status == 1)
        #expect(again.errors.contains("me.key exists already: keygen never replaces a key"), "\(again.errors)")

        let pack = try await CLI.run(["pack", work.app.path, "-o", work.path("counter.lsb"), "--key", work.path("me.key")])
        #expect(pack.status == 0, "\(pack.errors)")
        #expect(pack.output == "counter 1.0.0: 4 files in \(work.path("counter.lsb")), signed by \(id)\n")
        let listed = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-m", "zipfile", "-l", work.path("counter.lsb")])
        for name in ["app.lua", "luastore.json", "README.md", "app_spec.lua", ".luastore/digests", ".luastore/signature"] {
            #expect(listed.output.contains(name), "\(name) in \(listed.output)")
        }
        #expect(!listed.output.contains("secret.json"), "hidden files stay out")

        let verify = try await CLI.run(["verify", work.path("counter.lsb"), "--trust", work.path("me.pub")])
        #expect(verify.status == 0, "\(verify.errors)")
        #expect(verify.output == "counter 1.0.0 signed by \(id)\n")
        let run = try await CLI.run(["run", work.path("counter.lsb"), "--trust", work.path("me.pub"), "--format", "json"],
                                    input: "{\"type\":\"add\"}\n")
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.outputLines.last == #"{"count":1}"#)
        let check = try await CLI.run(["check", work.path("counter.lsb"), "--trust", work.path("me.pub")])
        #expect(check.status == 0, "\(check.errors)")
        let test = try await CLI.run(["test", work.path("counter.lsb"), "--trust", work.path("me.pub")])
        #expect(test.status == 0, "\(test.output) \(test.errors)")
        #expect(test.output.contains("1 passed, 0 failed"), "\(test.output)")
    }

    @Test func everyDamagedOrUntrustedBundleIsRefusedBeforeItsCodeRuns() async throws {
        let work = try Workspace()
        defer { work.remove() }
        for name in ["me", "other"] { #expect(try await CLI.run(["keygen", work.path(name)]).status == 0) }
        #expect(try await CLI.run(["pack", work.app.path, "-o", work.path("counter.lsb"), "--key", work.path("me.key")]).status == 0)
        #expect(try await CLI.run(["pack", work.app.path, "-o", work.path("unsigned.lsb")]).status == 0)
        let cases: [(String, String)] = [
            ("change-app", "app.lua differs from what was signed"),
            ("change-manifest", "luastore.json differs from what was signed"),
            ("change-digests", "its signature does not match its digests"),
            ("extra", "extra.lua is not in its digests (a file added after it was packed)"),
            ("remove", "README.md is in its digests but not in the bundle (a file removed after it was packed)"),
            ("traversal", "the entry '../evil.lua' has a path that leaves the bundle or is not plain"),
            ("duplicate", "holds app.lua twice"),
            ("symlink", "holds a symbolic link (link.lua): a bundle holds files only"),
            ("bomb", "bomb.txt expands"),
            ("clash", "holds both the file lib and lib/x.lua"),
            ("folder", "holds app.lua twice, as a file and as a folder"),
            ("encrypted", "is encrypted, and a bundle never is (luastore pack does not encrypt): pack the app again"),
            ("method99", "is packed with compression method 99, and a bundle uses only stored and deflate"),
        ]
        for (how, said) in cases {
            let bundle = try await work.damaged(how)
            let verify = try await CLI.run(["verify", bundle, "--trust", work.path("me.pub")])
            #expect(verify.status == 1, "\(how)")
            #expect(verify.errors.contains(said), "\(how): \(verify.errors)")
            // (No input: the run is refused before it reads any.)
            let run = try await CLI.run(["run", bundle, "--trust", work.path("me.pub"), "--format", "json"], input: "")
            #expect(run.status == 2, "\(how)")
            #expect(run.errors.contains(said), "\(how): \(run.errors)")
            #expect(run.output.isEmpty && !run.errors.contains("init ran"), "\(how): none of its code ran")
        }

        let untrusted = try await CLI.run(["verify", work.path("counter.lsb"), "--trust", work.path("other.pub")])
        #expect(untrusted.status == 1)
        #expect(untrusted.errors.contains("is signed by "), "\(untrusted.errors)")
        #expect(untrusted.errors.contains(", which is not trusted (--trust KEY.pub with that key)"), "\(untrusted.errors)")
        let wrongFile = try await CLI.run(["verify", work.path("counter.lsb"), "--trust", work.path("me.key")])
        #expect(wrongFile.status == 1)
        #expect(wrongFile.errors.contains("me.key is a private key, not a public key"), "\(wrongFile.errors)")

        let unsigned = try await CLI.run(["verify", work.path("unsigned.lsb"), "--trust", work.path("me.pub")])
        #expect(unsigned.status == 1)
        #expect(unsigned.errors.contains("is not signed (luastore pack --key signs a bundle; --allow-unsigned runs one anyway)"))
        let allowed = try await CLI.run(["run", work.path("unsigned.lsb"), "--allow-unsigned", "--format", "json"], input: "{\"type\":\"add\"}\n")
        #expect(allowed.status == 0, "\(allowed.errors)")
        #expect(allowed.outputLines.last == #"{"count":1}"#)
        let tampered = try await work.damaged("change-app", from: "unsigned.lsb")
        let refused = try await CLI.run(["run", tampered, "--allow-unsigned", "--format", "json"], input: "")
        #expect(refused.status == 2)
        #expect(refused.errors.contains("app.lua differs from its digest"), "never a tampered one: \(refused.errors)")

        let notZip = work.path("notes.lsb")
        try Data("not a zip".utf8).write(to: URL(fileURLWithPath: notZip))
        let garbage = try await CLI.run(["verify", notZip])
        #expect(garbage.status == 1)
        #expect(garbage.errors.contains("is not a LuaStore bundle (not a zip archive that can be read)"), "\(garbage.errors)")
        let noManifest = try await CLI.run(["pack", work.root.path, "-o", work.path("x.lsb")])
        #expect(noManifest.status == 1)
        #expect(noManifest.errors.contains("has no luastore.json: a bundle needs a manifest"), "\(noManifest.errors)")
    }

    /// A bundle's name never becomes a path outside its private folder: `..`, `.`, a hidden or option-like name is
    /// refused in words before anything is unpacked, and nothing appears in the temporary folder.
    @Test func aBundleNamedLikeAPathIsRefusedBeforeItIsUnpacked() async throws {
        let work = try Workspace()
        defer { work.remove() }
        try Data(Self.rename.utf8).write(to: work.root.appendingPathComponent("rename.py"))
        #expect(try await CLI.run(["pack", work.app.path, "-o", work.path("unsigned.lsb")]).status == 0)
        let temporary = work.root.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        for name in ["..", ".", ".hidden", "-rf", "a/b", "a..b", "x y"] {
            let bundle = work.path("renamed.lsb")
            let made = try await runChildProcess(URL(fileURLWithPath: "/usr/bin/env"),
                                                 ["python3", work.path("rename.py"), work.path("unsigned.lsb"), bundle, name])
            #expect(made.status == 0, "\(made.errors)")
            let run = try await CLI.run(["run", bundle, "--allow-unsigned", "--format", "json"], input: "{\"type\":\"add\"}\n",
                                        extraEnvironment: ["TMPDIR": temporary.path])
            #expect(run.status == 2, "\(name): \(run.output)")
            #expect(run.errors.contains("'name' must start with a letter or a digit"), "\(name): \(run.errors)")
            #expect(!run.errors.contains("init ran") && run.output.isEmpty)
            #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty, "\(name): nothing unpacked")
        }
        let manifest = work.app.appendingPathComponent("luastore.json")
        try Data(#"{"name": "..", "version": "1.0.0", "luastore": "^1.0"}"#.utf8).write(to: manifest)
        let pack = try await CLI.run(["pack", work.app.path, "-o", work.path("dots.lsb")])
        #expect(pack.status == 1)
        #expect(pack.errors.contains("'name' must start with a letter or a digit"), "\(pack.errors)")
    }

    /// `pack` never writes over what it reads: the signing key, the app's own files, anything inside the app folder
    /// (told by identity: through a link to the folder too). Each is refused before anything is written.
    @Test func packRefusesAnOutputThatIsOneOfItsInputs() async throws {
        let work = try Workspace()
        defer { work.remove() }
        #expect(try await CLI.run(["keygen", work.path("me")]).status == 0)
        let key = try Data(contentsOf: URL(fileURLWithPath: work.path("me.key")))
        let script = try Data(contentsOf: work.app.appendingPathComponent("app.lua"))
        try FileManager.default.createSymbolicLink(at: work.root.appendingPathComponent("alias"), withDestinationURL: work.app)
        for (output, said) in [
            (work.path("me.key"), "is the same file as \(work.path("me.key"))"),
            (work.app.appendingPathComponent("app.lua").path, "is inside the app folder"),
            (work.app.appendingPathComponent("new.lsb").path, "is inside the app folder"),
            (work.root.appendingPathComponent("alias/x.lsb").path, "is inside the app folder"),
            (work.root.appendingPathComponent("counter/../counter/.data/y.lsb").path, "is inside the app folder"),
        ] {
            let pack = try await CLI.run(["pack", work.app.path, "-o", output, "--key", work.path("me.key")])
            #expect(pack.status == 1, "\(output)")
            #expect(pack.errors.contains(said), "\(output): \(pack.errors)")
            #expect(pack.errors.contains("nothing was written"), "\(pack.errors)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: work.path("me.key"))) == key)
        #expect(try Data(contentsOf: work.app.appendingPathComponent("app.lua")) == script)
        #expect(!FileManager.default.fileExists(atPath: work.app.appendingPathComponent("new.lsb").path))
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.app.appendingPathComponent(".data").path) == ["secret.json"])
    }

    /// `run BUNDLE --watch` installs each new version packed over the bundle into the running store, under a
    /// stream of actions: the state is kept, every action is applied once (ten by the first version, twenty by the
    /// second: the count says which), a broken version and a downgrade are kept out with their reasons.
    @Test func aNewVersionIsInstalledIntoTheRunningStore() async throws {
        let work = try Workspace()
        defer { work.remove() }
        #expect(try await CLI.run(["keygen", work.path("me")]).status == 0)
        let source = work.app.appendingPathComponent("app.lua")
        let manifest = work.app.appendingPathComponent("luastore.json")
        func version(_ number: String, step: Int, broken: Bool = false) throws -> String {
            try Data(Self.app.replacingOccurrences(of: "+ 1 end", with: "+ \(step) end").appending(broken ? "\nreturn {" : "").utf8).write(to: source)
            try Data(#"{"name": "counter", "version": "\#(number)", "luastore": "^1.0"}"#.utf8).write(to: manifest)
            return number
        }
        _ = try version("1.0.0", step: 1)
        #expect(try await CLI.run(["pack", work.app.path, "-o", work.path("counter.lsb"), "--key", work.path("me.key")]).status == 0)
        let script = """
            set -u
            cd "$1"
            mkfifo in
            "$2" run counter.lsb --trust me.pub --watch --format json < in > out 2> err &
            pid=$!
            exec 3> in
            send() { for i in $(seq 1 "$1"); do echo '{"type":"add"}' >&3; done; }
            waitfor() { for i in $(seq 1 600); do grep -q "$1" err && return 0; sleep 0.05; done; echo "no '$1' in: $(cat err)"; return 1; }
            send 10
            for i in $(seq 1 600); do [ "$(wc -l < out)" -ge 11 ] && break; sleep 0.05; done
            "$2" pack counter -o counter.lsb --key me.key > /dev/null
            waitfor "installed counter 1.1.0 in place of counter 1.0.0" || exit 1
            send 20
            cp "$4" counter/app.lua; sed -i 's/1.1.0/1.2.0/' counter/luastore.json; "$2" pack counter -o counter.lsb --key me.key > /dev/null
            waitfor "install failed, still running counter 1.1.0" || exit 1
            cp "$5" counter/app.lua; sed -i 's/1.2.0/0.9.0/' counter/luastore.json; "$2" pack counter -o counter.lsb --key me.key > /dev/null
            waitfor "which is not newer than the running 1.1.0" || exit 1
            exec 3>&-
            wait $pid
            echo "status $?"
            """
        _ = try version("1.1.0", step: 10)
        let broken = work.path("broken.lua"), good = work.path("good.lua")
        try Data(try Data(contentsOf: source)).write(to: URL(fileURLWithPath: good))
        try Data((Self.app + "\nreturn {").utf8).write(to: URL(fileURLWithPath: broken))
        // (The 1.1.0 sources are in place; the first 10 actions reach the 1.0.0 bundle packed before.)
        let ran = try await runChildProcess(URL(fileURLWithPath: "/bin/bash"), ["-c", script, "install", work.root.path, CLI.binary.path, "",
                                                                                broken, good], environment: CLI.environment,
                                  timeout: .seconds(120))
        let errors = (try? String(contentsOfFile: work.path("err"), encoding: .utf8)) ?? ""
        #expect(ran.status == 0, "\(ran.output) \(ran.errors) \(errors)")
        #expect(ran.output.hasSuffix("status 0\n"), "\(ran.output) \(errors)")
        let output = try String(contentsOfFile: work.path("out"), encoding: .utf8)
        let counts = output.split(separator: "\n").compactMap { line -> Int? in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["count"] as? Int
        }
        #expect(counts == Array(0...10) + (1...20).map { 10 + 10 * $0 }, "\(counts)")
        #expect(errors.contains("install failed, still running counter 1.1.0: "), "\(errors)")
        #expect(errors.contains("app.lua"), "the broken version's error names its file: \(errors)")
        #expect(errors.contains("says 'counter' 0.9.0, which is not newer than the running 1.1.0 (a downgrade must be asked for)"), "\(errors)")
    }
}
