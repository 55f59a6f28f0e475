import Foundation
import LuaKit

// Hot reload: a new version of the app's scripts, checked beside the running one, swapped in only when whole.
extension ScriptEngine {

    /// Loads the app's files again. Keeps the old version (and the state as it was) on any failure. `fromVersion`:
    /// the version of the app it replaces (its manifest's), when a new version is installed — `migrate`'s third
    /// argument.
    /// `source`: where the scripts are (another folder when a new version is installed); `always`: reloaded even
    /// when the app's files are the ones running (an install).
    func reload(from source: Source? = nil, fromVersion: String? = nil, always: Bool = false) throws(ScriptFailure) -> ReloadOutcome {
        let source = source ?? app.source
        if !always, Self.fingerprint(of: source.folder) == app.fingerprint { return .unchanged }
        journal.migrated = false
        // (A reload is a run of its own: its scripts load and its migration runs at the time it happened, recorded
        // with its entry.)
        if !journal.history.traveling { vm.clockMillis = clock.source.nowMillis() }
        let loaded = try Self.loadApp(vm: vm, from: source, mounted: !mounts.list.isEmpty)
        let candidate = try mounts.compose(loaded, running: app, vm: vm, renderKey: runtime.renderKey)
        if candidate.schemaVersion < app.schemaVersion {
            throw ScriptFailure(stage: .reload, error: LuaError(
                .runtime, "schemaVersion went down from \(app.schemaVersion) to \(candidate.schemaVersion); the new version is refused",
                chunkName: source.main))
        }
        var migrated = false
        let grew = candidate.schemaVersion > app.schemaVersion
        if grew || candidate.mounts.contains(where: \.migrates) {
            guard !grew || candidate.ownMigrate != nil, let migrate = candidate.migrate else {
                throw ScriptFailure(stage: .migrate, error: LuaError(
                    .runtime, "schemaVersion grew from \(app.schemaVersion) to \(candidate.schemaVersion) but \(source.main) has no 'migrate'",
                    chunkName: source.main))
            }
            do {
                let fromSchema = grew ? app.schemaVersion : nil
                try vm.withTimeBudget(atLeast: vm.limits.stateBuildingTimeBudget) { () throws(LuaError) in
                    try runtime.transform(with: migrate, fromSchema: fromSchema, fromVersion: fromVersion)
                }
                migrated = true
            } catch {
                undoLastTransaction()
                throw ScriptFailure(stage: .migrate, error: located(error, returnedBy: migrate)) // (what it returned: at its `function`)
            }
        }
        do {
            try checkProps(candidate.props)
        } catch {
            if migrated { rollBack(committed: true) }
            throw ScriptFailure(stage: .props, error: error)
        }
        var reloadedChildren: [Int64: ChildModule] = [:]
        for (id, child) in children.modules {
            do {
                reloadedChildren[id] = try loadChild(child.name, in: candidate.namespace).0
            } catch {
                if migrated { rollBack(committed: true) }
                throw ScriptFailure(stage: .load, error: error)
            }
        }
        let previous = app.schemaVersion
        journal.migrated = migrated
        app = candidate
        children.replace(with: reloadedChildren)
        for (id, kind) in readers.all {
            switch kind {
            case .props:
                try? runtime.register(reader: id, candidate.props)
            case .childProps(let child):
                if let module = reloadedChildren[child] { try? runtime.register(reader: id, module.props, child: child) }
            case .path:
                break
            }
        }
        try registerSubscriptions()
        flush(everything: true)
        return .reloaded(fromSchema: previous, toSchema: candidate.schemaVersion)
    }

    /// Installs the plugin in `newFolder` in place of the one mounted at `key`, as a reload: on any failure the
    /// running version and its slice stay. Refuses a folder whose manifest names another plugin, or a version not
    /// newer than the running one (unless `allowDowngrade`).
    func install(mount key: String, folder newFolder: URL, allowDowngrade: Bool) throws(ScriptFailure) -> (ReloadOutcome, from: AppManifest, to: AppManifest) {
        func refuse(_ message: String) -> ScriptFailure {
            ScriptFailure(stage: .reload, error: LuaError(.runtime, message))
        }
        guard let running = app.mounts.first(where: { $0.key == key }) else {
            throw refuse("no plugin is mounted at '\(key)' (mounted: \(app.mounts.map(\.key).joined(separator: ", ")))")
        }
        let found: AppManifest?
        do {
            found = try AppManifest.load(folder: newFolder)
            try found?.checkHost()
        } catch {
            throw refuse(error.description)
        }
        guard let manifest = found else { throw refuse("\(newFolder.path) has no \(AppManifest.fileName)") }
        guard manifest.name == running.manifest.name else {
            throw refuse("\(AppManifest.fileName) names '\(manifest.name)', but the plugin mounted at '\(key)' is '\(running.manifest.name)'")
        }
        guard allowDowngrade || manifest.version > running.manifest.version else {
            throw refuse("\(AppManifest.fileName) says '\(manifest.name)' \(manifest.version), which is not newer than the running \(running.manifest.version) (a downgrade must be asked for)")
        }
        let previous = mounts.installed[key]
        mounts.installed[key] = newFolder
        do {
            return (try reload(fromVersion: nil, always: true), running.manifest, manifest)
        } catch {
            mounts.installed[key] = previous
            throw error
        }
    }

    /// Installs the app in `newFolder` (module `newMain`) in place of the running one, as a reload from there: on
    /// any failure the running version, its folder and its state stay.
    /// `limits`: the new version's (the host's, lowered to its budgets), in force once it is swapped in; refused
    /// before anything loads when the VM already holds more memory than they allow.
    func install(folder newFolder: URL, main newMain: String, strictGlobals newStrict: Bool = false, mounts: [AppManifest.Mount],
                 limits: LuaLimits, replacing running: String?)
        throws(ScriptFailure) -> ReloadOutcome {
        let holding = vm.memory.bytesInUse
        guard holding <= limits.memoryBytes else {
            throw ScriptFailure(stage: .reload, error: LuaError(
                .memory, "its budgets allow \(limits.memoryBytes) bytes of memory, and the store holds \(holding) now"))
        }
        let oldMounts = self.mounts
        self.mounts.list = mounts
        self.mounts.installed = [:] // (the new version's mounts come from its own folder)
        vm.moduleRoot = newFolder
        do {
            // (A new version with the same files is installed all the same: its folder is new.)
            let outcome = try reload(from: Source(folder: newFolder, main: newMain, strictGlobals: newStrict), fromVersion: running, always: true)
            try? vm.setBudgets(time: limits.timeBudget, memoryBytes: max(limits.memoryBytes, vm.memory.bytesInUse))
            return outcome
        } catch {
            self.mounts = oldMounts
            vm.moduleRoot = app.folder
            throw error
        }
    }
}
