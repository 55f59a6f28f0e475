import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreTestSupport
import Testing

/// `require` loads modules from the app's own folder and nowhere else.
@Suite struct ModuleTests {
    func makeApp(_ files: [String: String]) throws -> URL {
        let root = try makeTemporaryFolder()
        for (path, contents) in files {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(contents.utf8).write(to: url)
        }
        return root
    }

    @Test func requiresModulesFromTheAppFolder() async throws {
        let root = try makeApp([
            "app.lua": "local util = require('lib.util')\nlocal pkg = require('pkg')\nreturn {value = util.double(pkg.base), same = require('lib.util') == util}",
            "lib/util.lua": "local M = {}\nfunction M.double(x) return x * 2 end\nreturn M",
            "pkg/init.lua": "return {base = 21}",
        ])
        defer { try? FileManager.default.removeItem(at: root) }
        try await withVM(moduleRoot: root) { vm throws in
            let app = try vm.require("app")
            #expect(try vm.value(of: app) == ["value": 42, "same": true])
            #expect(vm.isSame(app, try vm.require("app")))
        }
    }

    /// `require` takes slashes as Lua's does (`spec/helper`), and `package` is Lua's, as data: `loaded` is what
    /// `require` returned (and what a script puts there), `preload` holds loaders tried first.
    @Test func packageIsLuasAsData() async throws {
        let root = try makeApp([
            "app.lua": """
                local helper = require('spec/helper')
                package.preload['virtual'] = function(name, extra) return { name = name, extra = extra } end
                package.loaded['given'] = { given = true }
                local virtual = require('virtual')
                return {
                  helper = helper.answer, same = require('spec.helper') == helper, loaded = package.loaded['spec/helper'] == helper,
                  virtual = virtual.name .. ' ' .. virtual.extra, given = require('given').given,
                  string = package.loaded.string == string, path = package.path, config = package.config,
                  loadlib = package.loadlib == nil, self = require('package') == package,
                }
                """,
            "spec/helper.lua": "return { answer = 42 }",
        ])
        defer { try? FileManager.default.removeItem(at: root) }
        try await withVM(moduleRoot: root) { vm throws in
            #expect(try vm.value(of: try vm.require("app")) == [
                "helper": 42, "same": false, "loaded": true, "virtual": "virtual :preload:", "given": true, "string": true,
                "path": "./?.lua;./?/init.lua", "config": "/\n;\n?\n!\n-\n", "loadlib": true, "self": true,
            ])
        }
    }

    /// `loadfile` and `dofile` read text files of the app's folder, and nothing outside it.
    @Test func loadfileAndDofileReadTheAppsOwnFiles() async throws {
        let root = try makeApp([
            "app.lua": """
                local chunk = loadfile('data/values.lua')
                local missing, message = loadfile('data/none.lua')
                local outside, why = loadfile('../secret.lua')
                local absolute, whyAbsolute = loadfile('/etc/passwd')
                return { first = chunk().first, second = dofile('data/values.lua').second, missing = missing == nil, message = message,
                         outside = outside == nil, why = why, absolute = whyAbsolute }
                """,
            "data/values.lua": "return { first = 1, second = 2 }",
        ])
        defer { try? FileManager.default.removeItem(at: root) }
        try await withVM(moduleRoot: root) { vm throws in
            #expect(try vm.value(of: try vm.require("app")) == [
                "first": 1, "second": 2, "missing": true, "message": "cannot open data/none.lua: No such file or directory",
                "outside": true, "why": "loadfile: '../secret.lua' is not a path inside the app folder (scripts read only the app's own files)",
                "absolute": "loadfile: '/etc/passwd' is not a path inside the app folder (scripts read only the app's own files)",
            ])
            let failing = try vm.load("dofile('data/none.lua')", chunkName: "run.lua")
            let error = luaError { _ = try vm.call(failing) }
            #expect(error?.message == "cannot open data/none.lua: No such file or directory")
            #expect(error?.location == "run.lua:1") // (dofile raises where it was called)
        }
    }

    /// A namespace with a folder of its own (`makeNamespace(root:chunkPrefix:)`): its `require`, `loadfile` and
    /// `dofile` read that folder only, its chunks are named with the prefix, and the app's own modules are not
    /// its (two `util`s, one in each).
    @Test func aNamespaceMayHaveAFolderOfItsOwn() async throws {
        let root = try makeApp([
            "app.lua": "return { util = require('util').name, secret = 1 }",
            "util.lua": "return { name = 'the app' }",
            "plugins/p/main.lua": """
                local util = require('util')
                local data = dofile('data.lua')
                local fromApp, why = loadfile('../../app.lua')
                return { util = util.name, data = data.n, fromApp = fromApp == nil, why = why,
                         fail = { run = function() error('plugin failure') end } }
                """,
            "plugins/p/util.lua": "return { name = 'the plugin' }",
            "plugins/p/data.lua": "return { n = 7 }",
        ])
        defer { try? FileManager.default.removeItem(at: root) }
        try await withVM(moduleRoot: root) { vm throws in
            #expect(try vm.value(of: try vm.require("app"))["util"] == "the app")
            let plugin = try vm.makeNamespace(root: root.appendingPathComponent("plugins/p"), chunkPrefix: "plugins/p/")
            let module = try vm.require("main", in: plugin)
            func field(_ name: String) throws -> LuaValue {
                guard let reference = try vm.field(.string(name), of: module) else { return .nil }
                return try vm.value(of: reference)
            }
            #expect(try field("util") == "the plugin")
            #expect(try field("data") == 7)
            #expect(try field("fromApp") == true)
            #expect(try field("why") == "loadfile: '../../app.lua' is not a path inside the app folder (scripts read only the app's own files)")
            let holder = try #require(try vm.field("fail", of: module))
            let fail = try #require(try vm.field("run", of: holder))
            let error = luaError { _ = try vm.call(fail) }
            #expect(error?.location == "plugins/p/main.lua:5", "\(String(describing: error))")
            let missing = luaError { _ = try vm.require("app", in: plugin) }
            #expect(missing?.message.contains("module 'app' not found") == true, "the app's modules are not the plugin's: \(String(describing: missing))")
            // A second namespace over the same folder reads it again (its own cache), under the same name.
            let again = try vm.makeNamespace(root: root.appendingPathComponent("plugins/p"), chunkPrefix: "plugins/p/")
            #expect(!vm.isSame(module, try vm.require("main", in: again)))
        }
    }

    @Test(arguments: [
        // (Dots and slashes are separators and empty components are skipped, as for stock Lua's searcher: these
        // are `secret`, `etc/passwd` and `lib/util` inside the app folder, never outside it — named as stock Lua
        // names them, every dot a slash.)
        ("../secret", "module '../secret' not found:\n\tno field package.preload['../secret']\n\tno file './///secret.lua'\n\tno file './///secret/init.lua'"),
        ("/etc/passwd", "module '/etc/passwd' not found:\n\tno field package.preload['/etc/passwd']\n\tno file './/etc/passwd.lua'\n\tno file './/etc/passwd/init.lua'"),
        ("lib..util", "module 'lib..util' not found:\n\tno field package.preload['lib..util']\n\tno file './lib//util.lua'\n\tno file './lib//util/init.lua'"),
        ("..", "require: '..' is not a module name (use names like 'lib.util')"),
        ("lib.$x", "require: 'lib.$x' is not a module name (use names like 'lib.util')"),
        ("missing", "module 'missing' not found:\n\tno field package.preload['missing']\n\tno file './missing.lua'\n\tno file './missing/init.lua'"),
        ("escape", "require: module 'escape' leads outside the app folder"),
        ("binary", "require: module 'binary' is a binary chunk; only source text loads"),
    ])
    func refusesWhatIsNotAnAppModule(name: String, message: String) async throws {
        let root = try makeApp(["app.lua": "return require(...)", "binary.lua": "\u{1B}Lua"])
        let outside = try makeApp(["secret.lua": "return 'stolen'"])
        defer {
            try? FileManager.default.removeItem(at: root)
            try? FileManager.default.removeItem(at: outside)
        }
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("escape.lua"),
                                                   withDestinationURL: outside.appendingPathComponent("secret.lua"))
        let error = try await withVM(moduleRoot: root) { vm throws in
            let app = try vm.load("local name = ...\nlocal m = require(name)\nreturn m", chunkName: "app.lua")
            return luaError { _ = try vm.call(app, .string(name)) }
        }
        #expect(error?.message == message)
        #expect(error?.location == "app.lua:2")
    }

    /// A script that changes `package.path` (`"./libs/?.lua;" .. package.path`, as scripts and libraries do) is
    /// searched by it at its next `require`, template by template, as Lua's searcher does — and still nothing
    /// outside the app's folder and the module path is read: an absolute folder nobody shared, a template that
    /// climbs out, a link that leads out are each refused, whether the file is there or not.
    @Test func aChangedPackagePathIsSearchedWithinWhatTheSandboxReads() async throws {
        let outside = try makeApp(["secret.lua": "return 'stolen'", "shared/lib.lua": "return 'shared'"])
        let root = try makeApp([
            "libs/util.lua": "return { from = 'libs', file = select(2, ...) }",
            "util.lua": "return { from = 'root' }",
            "vendor/pkg/init.lua": "return { from = 'vendor' }",
        ])
        defer {
            try? FileManager.default.removeItem(at: root)
            try? FileManager.default.removeItem(at: outside)
        }
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("libs/escape.lua"),
                                                   withDestinationURL: outside.appendingPathComponent("secret.lua"))
        let shared = outside.appendingPathComponent("shared").path + "/?.lua"
        let refused = "(the sandbox reads only the app's folder and the module path)"
        try await withVM(moduleRoot: root, modulePath: [shared]) { vm throws in
            let main = try vm.load("""
                local before = require('util').from
                package.loaded.util = nil
                package.path = './libs/?.lua;vendor/?/init.lua;' .. package.path
                local util = require('util')
                local function why(name) return select(2, pcall(require, name)) end
                package.path = '\(outside.path)/?.lua;../?.lua;' .. package.path
                return { before = before, after = util.from, file = util.file, pkg = require('pkg').from,
                         lib = require('lib'), secret = why('secret'), escape = why('escape') }
                """, chunkName: "main.lua")
            let result = try vm.call(main)[0]
            #expect(result["before"] == "root")
            #expect(result["after"] == "libs")
            #expect(result["file"] == "./libs/util.lua")
            #expect(result["pkg"] == "vendor")
            #expect(result["lib"] == "shared")
            #expect(result["secret"] == .string("""
                module 'secret' not found:
                \tno field package.preload['secret']
                \tno file '\(outside.path)/secret.lua' \(refused)
                \tno file '../secret.lua' \(refused)
                \tno file './libs/secret.lua'
                \tno file 'vendor/secret/init.lua'
                \tno file './secret.lua'
                \tno file './secret/init.lua'
                \tno file '\(outside.path)/shared/secret.lua'
                """))
            #expect(result["escape"] == "main.lua:5: require: module 'escape' leads outside the app folder")
        }
        // An absolute template inside the app's own folder — what a library makes of its script's folder
        // (Penlight's `require_here`) — is read, as `io.open` reads it; its links only where they stay inside.
        try await withVM(moduleRoot: root, modulePath: [shared]) { vm throws in
            let main = try vm.load("""
                package.path = '\(root.path)/libs/?.lua;' .. package.path
                local util, file = require('util')
                return { from = util.from, file = file, escape = select(2, pcall(require, 'escape')) }
                """, chunkName: "main.lua")
            let result = try vm.call(main)[0]
            #expect(result["from"] == "libs")
            #expect(result["file"] == .string(root.path + "/libs/util.lua"))
            #expect(result["escape"].string?.contains("no file '\(root.path)/libs/escape.lua' \(refused)") == true, "\(result["escape"])")
        }
    }

    @Test func moduleErrorsNameTheModuleFileAndLine() async throws {
        let root = try makeApp([
            "broken.lua": "local M = {}\nfunction M.f()\n  return 1 +\nend\nreturn M",
            "failing.lua": "local M = {}\n\nerror('cannot start')\nreturn M",
            "cycle_a.lua": "return require('cycle_b')",
            "cycle_b.lua": "local a = require('cycle_a')\nreturn a",
        ])
        defer { try? FileManager.default.removeItem(at: root) }
        try await withVM(moduleRoot: root) { vm throws in
            let syntax = luaError { _ = try vm.require("broken") }
            #expect(syntax?.location == "broken.lua:4")
            #expect(syntax?.message == "unexpected symbol near 'end'")
            let runtime = luaError { _ = try vm.require("failing") }
            #expect(runtime?.location == "failing.lua:3")
            #expect(runtime?.message == "cannot start")
            let cycle = luaError { _ = try vm.require("cycle_a") }
            #expect(cycle?.message == "require: module 'cycle_a' requires itself (a cycle)")
            #expect(cycle?.location == "cycle_b.lua:1", "a tail call would leave no frame to blame; this one is a plain call")
        }
    }

    /// A module whose loading ran out of time (which no handler catches: the `require` under it never came back)
    /// is required again next time, not taken for a cycle.
    @Test func aModuleWhoseLoadTimedOutLoadsAgain() async throws {
        let root = try makeApp(["slow.lua": "while not ready do end\nreturn { loaded = true }"])
        defer { try? FileManager.default.removeItem(at: root) }
        var limits = LimitsTests.quick(.watchdog)
        limits.timeBudget = .milliseconds(50)
        try await withVM(limits: limits, moduleRoot: root) { vm throws in
            let timeout = luaError { _ = try vm.run("return (function() return require('slow') end)()", chunkName: "reduce.lua") }
            #expect(timeout?.kind == .timeout, "\(String(describing: timeout))")
            #expect(try vm.run("ready = true\nreturn (function() return require('slow').loaded end)()", chunkName: "reduce.lua") == [true])
        }
    }

    /// Source is bytes, as Lua reads it: a module (or a file `loadfile` reads) whose string literal holds bytes that
    /// are not UTF-8 text loads, and the string holds those bytes.
    @Test func sourceIsReadAsBytes() async throws {
        let root = try makeApp([:])
        defer { try? FileManager.default.removeItem(at: root) }
        let bytes: [UInt8] = Array("return { raw = \"".utf8) + [0xFF, 0xFE, 0x41] + Array("\" }".utf8)
        try Data(bytes).write(to: root.appendingPathComponent("latin.lua"))
        try await withVM(moduleRoot: root) { vm throws in
            #expect(try vm.run("local r = require('latin').raw return #r, r:byte(1), r:byte(3), loadfile('latin.lua')().raw == r",
                               chunkName: "app.lua") == [3, 255, 65, true])
        }
    }

    @Test func oversizedModulesAreRefused() async throws {
        let root = try makeApp(["big.lua": "return '" + String(repeating: "x", count: 2_000) + "'"])
        defer { try? FileManager.default.removeItem(at: root) }
        var limits = LuaLimits()
        limits.moduleBytes = 1_000
        let error = try await withVM(limits: limits, moduleRoot: root) { vm throws in luaError { _ = try vm.require("big") } }
        #expect(error?.message == "require: module 'big' is 2009 bytes; the limit is 1000")
    }

    @Test func withoutAFolderNothingIsRequired() async throws {
        let error = try await withVM { vm throws in luaError { _ = try vm.require("app") } }
        #expect(error?.message == "require: module 'app' not found (no module folder is set)")
    }

    @Test func hostModulesAndGlobalsAreReadOnly() async throws {
        try await withVM { vm throws in
            try vm.define(module: "effects", source: "return {log = function(text) return {kind = 'log', text = text} end, version = 1}")
            try vm.define(global: "config", ["name": "demo", "limits": ["items": 10]])
            try vm.define(global: "double") { arguments in [.integer((arguments.first?.integer ?? 0) * 2)] }
            let result = try vm.run("""
                local effects = require('effects')
                return effects.log('hi'), config.limits.items, double(21)
                """, chunkName: "app.lua")
            #expect(result == [["kind": "log", "text": "hi"], 10, 42])
            let write = luaError { _ = try vm.run("require('effects').version = 2", chunkName: "app.lua") }
            #expect(write?.message == "cannot modify read-only table 'effects' (field 'version')")
            let nested = luaError { _ = try vm.run("config.limits.items = 0", chunkName: "app.lua") }
            #expect(nested?.message == "cannot modify read-only table 'config.limits' (field 'items')")
        }
    }

    @Test func aHostModuleDefinedByItsSourceRunsAtItsFirstRequireOnly() async throws {
        let printed = Protected<[String]>([])
        let (lines, results) = try await withVM(print: { line in printed.withLock { $0.append(line) } }) { vm throws in
            let source = "print('module ran')\nreturn {answer = 42}"
            try vm.define(module: "lazy", source: source, chunkName: "lazy-\(UUID().uuidString).lua")
            let before = printed.withLock { $0 }
            let results = try vm.run("""
                local first = require('lazy')
                local second = require('lazy')
                return first.answer, first == second
                """, chunkName: "app.lua")
            return (before + ["--"] + printed.withLock { $0 }, results)
        }
        #expect(lines == ["--", "module ran"], "nothing ran at define; once at the first require")
        #expect(results == [42, true])
    }

    @Test func aHostModuleThatDoesNotCompileFailsWhereItIsDefined() async throws {
        let error = try await withVM { vm throws in
            luaError { try vm.define(module: "broken", source: "return {", chunkName: "broken-\(UUID().uuidString).lua") }
        }
        #expect(error?.kind == .syntax)
    }

    @Test func aHostModuleThatFailsAsItRunsFailsTheRequire() async throws {
        let error = try await withVM { vm throws in
            try vm.define(module: "failing", source: "error('not today', 0)", chunkName: "failing-\(UUID().uuidString).lua")
            _ = luaError { _ = try vm.run("local m = require('failing')", chunkName: "app.lua") }
            return luaError { _ = try vm.run("local m = require('failing')", chunkName: "again.lua") }
        }
        #expect(error?.message == "not today", "a module that failed runs again at the next require, as in Lua")
    }

    @Test func hostFunctionErrorsBlameTheCaller() async throws {
        struct Refused: Error, CustomStringConvertible { var description: String { "refused by the host" } }
        let error = try await withVM { vm throws in
            try vm.define(global: "fail") { _ in throw Refused() }
            return luaError { _ = try vm.run("local x = 1\nlocal y = fail()", chunkName: "app.lua") }
        }
        #expect(error?.message == "refused by the host")
        #expect(error?.location == "app.lua:2")
    }

    /// A host function called from inside a coroutine works on the coroutine's stack: its arguments are the
    /// coroutine's, its results go back there, and its error is the coroutine's, with the coroutine's line (it
    /// read the VM's main stack: `print` inside a coroutine raised its own text as the coroutine's error).
    @Test func hostFunctionsCalledFromACoroutineWorkOnItsStack() async throws {
        struct Refused: Error, CustomStringConvertible { var description: String { "refused by the host" } }
        let printed = Protected<[String]>([])
        let results = try await withVM(print: { line in printed.withLock { $0.append(line) } }) { vm throws in
            try vm.define(global: "double") { arguments in [.integer((arguments.first?.integer ?? 0) * 2)] }
            try vm.define(global: "fail") { _ in throw Refused() }
            return try vm.run("""
                local co = coroutine.create(function(a)
                  print("in the coroutine", a)
                  local b = coroutine.yield(double(a))
                  io.write("resumed with ", b, "\\n")
                  return double(b), double(b + 1)
                end)
                local _, first = coroutine.resume(co, 20)
                local _, second, third = coroutine.resume(co, 5)
                local ok, message = coroutine.resume(coroutine.create(function()
                  local x = 1
                  return fail()
                end))
                return first, second, third, ok, message
                """, chunkName: "app.lua")
        }
        #expect(results == [40, 10, 12, false, "app.lua:11: refused by the host"])
        #expect(printed.withLock { $0 } == ["in the coroutine\t20", "resumed with 5"])
    }
}

/// `require` knows the standard library's names: the sandbox's libraries, or a message saying why not.
@Suite struct StandardModuleTests {
    @Test(arguments: ["string", "table", "math", "utf8"])
    func standardLibrariesLoadByName(name: String) async throws {
        let same = try await withVM { vm in
            try vm.run("local lib = require('\(name)')\nreturn lib == \(name), require('\(name)') == lib", chunkName: "app.lua")
        }
        #expect(same == [true, true])
    }

    @Test func utf8LoadsAsRealCodeWritesIt() async throws {
        let length = try await withVM { vm in
            try vm.run("local utf8 = require(\"utf8\")\nreturn utf8.len(\"ümlaut ☃\")", chunkName: "app.lua")
        }
        #expect(length == [8])
    }

    @Test(arguments: ["os"])
    func leftOutLibrariesSaySo(name: String) async throws {
        let error = try await withVM { vm in
            luaError { _ = try vm.run("local x = 1\nlocal lib = require('\(name)')", chunkName: "app.lua") }
        }
        #expect(error?.message.hasPrefix("require: module '\(name)' is not available in the sandbox (") == true, "\(String(describing: error))")
        #expect(error?.location == "app.lua:2")
    }

    @Test func aMissingModuleCanBeCaughtAsInLua() async throws {
        let result = try await withVM { vm in
            try vm.run("local ok, message = pcall(require, 'missing')\nreturn ok, type(message)", chunkName: "app.lua")
        }
        #expect(result == [false, "string"])
    }
}
