import Foundation
import LuaKit

// Hot reload: a new version of the app's scripts, checked beside the running one, swapped in only when whole.
extension ScriptEngine {

    /// Loads the app's files again. Keeps the old version (and the state as it was) on any failure. `fromVersion`:
    /// the version of the app it replaces (its manifest's), when a new version is installed — `migrate`'s third
    /// argument.
    func reload(fromVersion: String? = nil) throws(ScriptFailure) -> ReloadOutcome {
        let fingerprint = Self.fingerprint(of: folder)
        if fingerprint == app.fingerprint { return .unchanged }
        migrated = false
        let candidate = try Self.loadApp(vm: vm, folder: folder, main: main)
        if candidate.schemaVersion < app.schemaVersion {
            throw ScriptFailure(stage: .reload, error: LuaError(
                .runtime, "schemaVersion went down from \(app.schemaVersion) to \(candidate.schemaVersion); the new version is refused",
                chunkName: main))
        }
        var migrated = false
        if candidate.schemaVersion > app.schemaVersion {
            guard let migrate = candidate.migrate else {
                throw ScriptFailure(stage: .migrate, error: LuaError(
                    .runtime, "schemaVersion grew from \(app.schemaVersion) to \(candidate.schemaVersion) but \(main) has no 'migrate'",
                    chunkName: main))
            }
            do {
                try vm.call(runtime[.transform], arguments: [
                    .reference(migrate), .value(.integer(app.schemaVersion)), .value(fromVersion.map(LuaValue.string) ?? .nil),
                ])
                migrated = true
            } catch {
                undoLastTransaction()
                throw ScriptFailure(stage: .migrate, error: error)
            }
        }
        let check: Int64 = -2
        do {
            try vm.call(runtime[.register], arguments: [.value(.integer(check)), .reference(candidate.props)])
            defer { _ = try? vm.call(runtime[.unregister], arguments: [.value(.integer(check))]) }
            _ = try vm.call(runtime[.evaluate], arguments: [.value(.integer(check))])
        } catch {
            _ = try? vm.call(runtime[.reset], arguments: [])
            if migrated { undoLastTransaction() }
            throw ScriptFailure(stage: .props, error: error)
        }
        var reloadedChildren: [Int64: ChildModule] = [:]
        for (id, child) in children {
            do {
                reloadedChildren[id] = try loadChild(child.name, in: candidate.namespace).0
            } catch {
                if migrated { undoLastTransaction() }
                throw ScriptFailure(stage: .load, error: error)
            }
        }
        let previous = app.schemaVersion
        self.migrated = migrated
        app = candidate
        children = reloadedChildren
        for (id, reader) in readers {
            switch reader.kind {
            case .props:
                _ = try? vm.call(runtime[.register], arguments: [.value(.integer(id)), .reference(candidate.props)])
            case .childProps(let child):
                if let module = reloadedChildren[child] {
                    _ = try? vm.call(runtime[.register], arguments: [.value(.integer(id)), .reference(module.props), .value(.integer(child))])
                }
            case .path:
                break
            }
        }
        try registerSubscriptions()
        flush(everything: true)
        return .reloaded(fromSchema: previous, toSchema: candidate.schemaVersion)
    }

    /// Installs the app in `newFolder` (module `newMain`) in place of the running one, as a reload from there: on
    /// any failure the running version, its folder and its state stay.
    func install(folder newFolder: URL, main newMain: String, replacing running: String?) throws(ScriptFailure) -> ReloadOutcome {
        let (oldFolder, oldMain, oldFingerprint) = (folder, main, app.fingerprint)
        (folder, main) = (newFolder, newMain)
        vm.moduleRoot = newFolder
        app.fingerprint = [:] // (a new version with the same files is installed all the same: its folder is new)
        do {
            return try reload(fromVersion: running)
        } catch {
            (folder, main) = (oldFolder, oldMain)
            vm.moduleRoot = oldFolder
            app.fingerprint = oldFingerprint
            throw error
        }
    }
}
