import Foundation
import LuaKit
import LuaStoreContract

/// The plugins an app mounts, a part of the engine (`ScriptEngine.mounts`): the mounts its manifest lists, how to
/// open one that is a bundle (LuaStoreBundles gives `ScriptedStoreOptions.openBundle`), the ones installed on
/// their own, and `mounts.lua` once loaded — and the composing of the app's functions with theirs. (The plugins
/// loaded are the app's: `ScriptEngine.App.mounts`.)
struct Mounts {
    var list: [AppManifest.Mount] = []
    var openBundle: (@Sendable (URL) throws -> URL)?
    /// Plugins installed on their own (`ScriptedStore.install(mount:folder:)`): the folder each key's comes from
    /// now, in place of the manifest's path.
    var installed: [String: URL] = [:]
    /// How messages name the app that mounts them (its manifest's name).
    var hostName = "the app"
    /// `mounts.lua`'s module, once loaded into the engine's VM.
    private var module: LuaReference?
    /// Whether the state the store started from lacked a slice a mount's `init` then placed (a durable store
    /// takes a snapshot).
    private(set) var placedSlices = false

    init(list: [AppManifest.Mount] = [], openBundle: (@Sendable (URL) throws -> URL)? = nil, hostName: String = "the app") {
        self.list = list
        self.openBundle = openBundle
        self.hostName = hostName
    }
}

/// A plugin mounted under a key of the app's state (docs/plugins.md, "Mounts"): its own namespace, manifest,
/// capabilities and budgets; its slice is the state's value at `key`.
struct MountedPlugin {
    let key: String
    let manifest: AppManifest
    /// Where its files are (a bundle's, unpacked).
    let folder: URL
    /// Its record in the VM (`mounts.lua`, `plugin`): its functions, limits and account.
    let record: LuaReference
    let schemaVersion: Int64
    /// Whether installing it needs the composed `migrate`: a new mount (no slice yet) or a grown schemaVersion.
    let migrates: Bool
    /// What it declares in its own files (nil: nothing): the actions its reducer takes, its slice.
    let contract: ContractChecker?
}

/// What a mounted plugin cost so far (`ScriptedStore.pluginCosts()`, the devtools' `/api/plugins`).
public struct PluginCost: Sendable, Equatable, Codable {
    /// The key of the state it is mounted at, its manifest's name and version.
    public let key: String
    /// Its manifest's name.
    public let name: String
    /// Its manifest's version, as text (`1.2.0`).
    public let version: String
    /// Its calls (`init`, `reduce`, `subscriptions`, `migrate`), the time the calls that returned took (estimated
    /// from one call in 16, timed) and the memory blocks they allocated, and how many failed.
    public let calls: Int64
    /// The time the calls that returned took, in nanoseconds (estimated from the timed ones).
    public let nanoseconds: Int64
    /// The memory blocks the calls that returned allocated.
    public let allocations: Int64
    /// How many calls failed: begun and never returned (an error, a spent budget).
    public let failures: Int64
}

extension Mounts {
    typealias App = ScriptEngine.App

    /// `app` with its mounts: each plugin loaded in its own namespace, and the store's `init`, `reduce`,
    /// `subscriptions` and `migrate` composed of the app's and theirs (`mounts.lua`). `running`: the app it
    /// replaces (a reload, an install), whose plugins' versions and schemas the new ones migrate from.
    /// `renderKey`: the state runtime's, which `mounts.lua` renders paths with.
    mutating func compose(_ app: App, running: App?, vm: LuaVM, renderKey: LuaReference) throws(ScriptFailure) -> App {
        guard !list.isEmpty else { return app }
        var composed = app
        do {
            let module = try mountsModule(vm: vm, renderKey: renderKey)
            var records: [LuaArgument] = []
            for mount in list {
                let plugin = try loadPlugin(mount, of: app.source.folder, vm: vm, module: module,
                                            running: running?.mounts.first { $0.key == mount.key }, replacing: running != nil)
                composed.mounts.append(plugin)
                records.append(.reference(plugin.record))
            }
            let functions = try vm.callForReferences(try vm.field("compose", of: module)!, arguments: [
                .value(.string(hostName)), .reference(app.initialize),
                app.ownReduce.map(LuaArgument.reference) ?? .value(.nil),
                app.subscriptions.map(LuaArgument.reference) ?? .value(.nil),
                app.ownMigrate.map(LuaArgument.reference) ?? .value(.nil),
            ] + records)
            guard functions.count == 4, let initialize = functions[0], let reduce = functions[1], let migrate = functions[3] else {
                throw LuaError(.runtime, "mounts.lua's compose returned \(functions.count) functions")
            }
            // (Every action reaches every reducer: the store's actions are what the app and its plugins declare.)
            composed.actions = ActionContract(parties: (app.ownReduce == nil ? [] : [("the app", app.contract)])
                                              + composed.mounts.map { ("plugin '\($0.key)'", $0.contract) })
            composed.initialize = initialize
            composed.reduce = reduce
            composed.subscriptions = functions[2]
            composed.migrate = migrate
        } catch let failure as ScriptFailure {
            throw failure
        } catch {
            throw ScriptFailure(stage: .load, error: error as? LuaError ?? LuaError(.runtime, String(describing: error)))
        }
        return composed
    }

    /// The plugin `mount` names, loaded: its manifest (required, checked against this host, without mounts of
    /// its own), its module in a namespace reading its own folder only, and its record.
    private func loadPlugin(_ mount: AppManifest.Mount, of appFolder: URL, vm: LuaVM, module: LuaReference, running: MountedPlugin?,
                            replacing: Bool) throws -> MountedPlugin {
        let where_ = "mounts.\(mount.key)"
        let folder = try pluginFolder(mount, of: appFolder)
        let manifest: AppManifest
        do {
            guard let found = try AppManifest.load(folder: folder) else {
                throw LuaError(.runtime, "\(where_): \(mount.path) has no \(AppManifest.fileName) (a mounted plugin needs one: its name, version and capabilities)")
            }
            try found.checkHost()
            manifest = found
        } catch let failure as ManifestFailure {
            throw LuaError(.runtime, "\(where_): \(mount.path)/\(failure)")
        }
        guard manifest.mounts.isEmpty else {
            throw LuaError(.runtime, "\(where_): plugin '\(manifest.name)' mounts plugins of its own; mounts do not nest")
        }
        let prefix = mount.path.hasSuffix("/") ? mount.path : mount.path + "/"
        guard FileManager.default.fileExists(atPath: folder.appendingPathComponent(manifest.main).path) else {
            throw LuaError(.runtime, "\(where_): plugin '\(manifest.name)' has no \(manifest.main)", chunkName: prefix + manifest.main)
        }
        // (Its contract, read from its own files, as an app's: a declared one must be whole.)
        let (declared, problems) = AppContract.read(app: folder, main: manifest.main)
        if declared.declares, let problem = problems.first {
            throw LuaError(.runtime, "plugin '\(manifest.name)''s contract: \(problem.message)", chunkName: prefix + problem.file, line: problem.line)
        }
        let namespace = try vm.makeNamespace(root: folder, chunkPrefix: prefix, strictGlobals: manifest.strictGlobals)
        let loaded = try vm.require(String(manifest.main.dropLast(4)).replacingOccurrences(of: "/", with: "."), in: namespace)
        let milliseconds = manifest.budgets.time.map { Int64(($0 / .milliseconds(1)).rounded(.up)) } ?? 0
        let record = try vm.callForReferences(try vm.field("plugin", of: module)!, arguments: [
            .value(.string(mount.key)), .value(.string(manifest.name)), .value(.string(prefix + manifest.main)), .reference(loaded),
            .value(.integer(milliseconds)), .value(.integer(Int64(manifest.budgets.memoryBytes ?? 0))),
            .value(.table(LuaTable(array: mount.reads.map { .string($0) }))),
            .value(running.map { .integer($0.schemaVersion) } ?? .nil),
            .value(running.map { .string($0.manifest.version.description) } ?? .nil),
            running.map { .reference($0.record) } ?? .value(.nil),
        ]).first ?? nil
        guard let record, case .integer(let schema)? = try vm.field("schema", of: record).map({ try vm.value(of: $0, root: "schema") }) else {
            throw LuaError(.runtime, "\(where_): the plugin's record was not made")
        }
        let migrates = running.map { schema > $0.schemaVersion } ?? replacing
        return MountedPlugin(key: mount.key, manifest: manifest, folder: folder, record: record, schemaVersion: schema, migrates: migrates,
                             contract: declared.declares ? ContractChecker(declared) : nil)
    }

    /// Where the plugin at `mount` lies: its folder, or its bundle opened (verified and unpacked).
    private func pluginFolder(_ mount: AppManifest.Mount, of folder: URL) throws -> URL {
        if let installed = installed[mount.key] { return installed }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder.appendingPathComponent(mount.path).path, isDirectory: &isFolder) else {
            throw LuaError(.runtime, "mounts.\(mount.key): \(mount.path) does not exist in \(folder.path)")
        }
        guard let url = AppFiles.inside(mount.path, of: folder) else {
            throw LuaError(.runtime, "mounts.\(mount.key): \(mount.path) leads outside the app's folder (a symbolic link): a plugin lies inside it")
        }
        if isFolder.boolValue { return url }
        guard let openBundle else {
            throw LuaError(.runtime, "mounts.\(mount.key): \(mount.path) is a file; a plugin is a folder, or a bundle where the host opens bundles (LuaStoreBundles: ScriptedStoreOptions.openBundle)")
        }
        do {
            return try openBundle(url)
        } catch {
            throw LuaError(.runtime, "mounts.\(mount.key): \(mount.path): \(error)")
        }
    }

    /// `mounts.lua`, loaded once per VM.
    private mutating func mountsModule(vm: LuaVM, renderKey: LuaReference) throws(LuaError) -> LuaReference {
        if let loaded = module { return loaded }
        let chunk = try vm.loadTrusted(EmbeddedLua.mounts.source, chunkName: "host:" + EmbeddedLua.mounts.path, keepingNames: false, keepingLines: false)
        guard let module = try vm.callForReferences(chunk, arguments: [
            .value(.string(StateRuntime.metatableMarker)), .reference(renderKey),
        ]).first ?? nil else {
            throw LuaError(.runtime, "mounts.lua did not load")
        }
        self.module = module
        return module
    }

    /// Notes whether the last composed `migrate` placed a new mount's slice (`placedSlices`).
    mutating func notePlacedSlices(vm: LuaVM) throws(LuaError) {
        guard let module, let placed = try vm.field("placed", of: module) else { return }
        placedSlices = (try vm.call(placed, arguments: []).first?.integer ?? 0) > 0
    }

    /// What each plugin `app` mounts cost so far, in the order actions reach them.
    func costs(of app: App, vm: LuaVM) -> [PluginCost] {
        guard let module, let cost = try? vm.field("cost", of: module) else { return [] }
        return app.mounts.map { plugin in
            let account = (try? vm.call(cost, arguments: [.reference(plugin.record)]).first) ?? .nil
            func number(_ field: String) -> Int64 { account[.string(field)].integer ?? 0 }
            let (timed, returned) = (number("timed"), number("returned"))
            return PluginCost(key: plugin.key, name: plugin.manifest.name, version: plugin.manifest.version.description,
                              calls: number("begun"), nanoseconds: timed > 0 ? number("nanoseconds") * returned / timed : 0,
                              allocations: number("allocations"), failures: number("begun") - returned)
        }
    }

}

extension ScriptEngine {
    /// What each mounted plugin cost so far, in the order actions reach them.
    func pluginCosts() -> [PluginCost] { mounts.costs(of: app, vm: vm) }

    /// The manifest of the plugin whose key an effect carries (`mount`), to check the effect against.
    func pluginManifests() -> [String: AppManifest] {
        Dictionary(uniqueKeysWithValues: app.mounts.map { ($0.key, $0.manifest) })
    }
}
