import Foundation
import LuaKit
import LuaStoreCore

// New versions of the app's scripts: hot reload, installs (the app's and a mounted plugin's), watching the folder.
extension ScriptedStore {
    // MARK: Reload

    /// Loads the app's scripts again, at an action boundary, keeping the state (see docs/scripted-apps.md, "Hot reload").
    @discardableResult
    public func reload() async throws(ScriptFailure) -> ReloadOutcome {
        try await reloading { engine throws(ScriptFailure) in try engine.reload() }
    }

    /// Installs a new version of the app from `folder` (its manifest required) in place of the running one,
    /// keeping the state: refused unless the manifest is valid, names the same app, needs a scripting API this
    /// host has and a greater version than the running one (`allowDowngrade`: any other); then as a reload —
    /// loaded beside the running version, `migrate(state, fromSchema, fromVersion)` run if its `schemaVersion`
    /// grew (`fromVersion`: the running version's, as text), props computed once, swapped
    /// in whole, its capabilities in force from the next effect. On any failure the running version stays, and
    /// the failure is a journal entry (`failedReload`) as well as thrown. Actions dispatched meanwhile wait and
    /// are reduced by the version in force when their turn comes: none is lost or applied twice. The folder must
    /// stay while the store runs (modules load from it). Its budgets are in force once it is swapped in (a version
    /// whose memory budget is below what the store holds is refused). `owning`: a temporary folder holding `folder`
    /// (where a bundle was unpacked), which the store removes once it runs another version or shuts down; the
    /// folder the replaced version was given goes once the new one is in.
    public func install(folder: URL, allowDowngrade: Bool = false, owning: URL? = nil) async throws(ScriptFailure) -> ReloadOutcome {
        let running = manifest
        let candidate: AppManifest
        do throws(ManifestFailure) {
            guard let found = try AppManifest.load(folder: folder) else {
                throw ManifestFailure("is missing from \(folder.path): an installed version needs a manifest")
            }
            try found.checkHost()
            if let running {
                guard found.name == running.name else {
                    throw ManifestFailure("names '\(found.name)', not the running '\(running.name)': install a version of the same app")
                }
                guard allowDowngrade || found.version > running.version else {
                    throw ManifestFailure("says '\(found.name)' \(found.version), which is not newer than the running \(running.version) (a downgrade must be asked for)")
                }
            }
            candidate = found
        } catch {
            let failure = ScriptFailure(stage: .reload, error: LuaError(.runtime, error.description))
            _ = try? await onThread { engine throws(ScriptFailure) -> Bool in
                if engine.journal.collecting { engine.record(.failedReload, origin: .reload, changes: [], failure: failure) }
                return true
            }
            throw failure
        }
        let replacing = running?.version.description
        let limits = candidate.capped(options.limits)
        let (outcome, mounted) = try await reloading { engine throws(ScriptFailure) in
            let outcome = try engine.install(folder: folder, main: candidate.main, strictGlobals: candidate.strictGlobals,
                                             mounts: candidate.mounts, limits: limits, replacing: replacing)
            return (outcome, engine.pluginManifests())
        }
        let replaced = installed.withLock { state in
            defer { state = InstalledManifests(app: candidate, mounts: mounted, owned: owning) }
            return state.owned
        }
        if let replaced, replaced != owning { try? FileManager.default.removeItem(at: replaced) }
        return outcome
    }

    /// Installs a new version of the plugin mounted at `key` from `folder` (its manifest required), on its own:
    /// refused unless the manifest is valid, names the same plugin, needs a scripting API this host has and a
    /// greater version than the running one (`allowDowngrade`: any other); then as `install(folder:)` — the app
    /// and its plugins loaded beside the running ones, the plugin's `migrate(slice, fromSchema, fromVersion)` run if
    /// its `schemaVersion` grew, props computed once, swapped in whole with the state kept, its capabilities in
    /// force from the next effect. On any failure the running version stays (a `failedReload` journal entry, and
    /// thrown). The folder must stay while the store runs that version.
    @discardableResult
    public func install(mount key: String, folder: URL, allowDowngrade: Bool = false) async throws(ScriptFailure) -> ReloadOutcome {
        let (outcome, mounted) = try await reloading { engine throws(ScriptFailure) in
            let (outcome, _, _) = try engine.install(mount: key, folder: folder, allowDowngrade: allowDowngrade)
            return (outcome, engine.pluginManifests())
        }
        installed.withLock { $0.mounts = mounted }
        return outcome
    }

    /// What each mounted plugin has cost so far (calls, time, allocations, failures), in the order actions reach
    /// them; empty for an app without mounts.
    public func pluginCosts() async -> [PluginCost] {
        await withCheckedContinuation { continuation in
            thread.async { [engine] in continuation.resume(returning: engine.pluginCosts()) }
        }
    }

    /// Runs `engine.reload()` or `install` on the store's thread, journaling what became of it.
    private func reloading(_ body: @escaping @Sendable (ScriptEngine) throws(ScriptFailure) -> ReloadOutcome) async throws(ScriptFailure)
        -> ReloadOutcome {
        try await reloading { engine throws(ScriptFailure) in (try body(engine), ()) }.0
    }

    /// Runs `body` (a reload or an install, with something it read after) on the store's thread, journaling what
    /// became of it.
    private func reloading<Extra: Sendable>(_ body: @escaping @Sendable (ScriptEngine) throws(ScriptFailure) -> (ReloadOutcome, Extra))
        async throws(ScriptFailure) -> (ReloadOutcome, Extra) {
        let result: Result<(ReloadOutcome, Extra), ScriptFailure> = await withCheckedContinuation { continuation in
            thread.async { [engine, root] in
                let outcome = Result { () throws(ScriptFailure) -> (ReloadOutcome, Extra) in try body(engine) }
                if engine.journal.collecting {
                    switch outcome.map(\.0) {
                    case .success(.reloaded(let from, let to)):
                        let changes = engine.journal.migrated ? ((try? engine.lastChanges()) ?? []) : []
                        engine.record(.reload(fromSchema: from, toSchema: to), origin: .reload, changes: changes, failure: nil,
                                      kept: engine.journal.migrated)
                    case .failure(let failure):
                        engine.record(.failedReload, origin: .reload, changes: [], failure: failure)
                    case .success(.unchanged):
                        break
                    }
                }
                if case .success((.reloaded(let from, let to), _)) = outcome {
                    root.dispatch(["type": "luastore/reloaded", "from": .integer(from), "to": .integer(to)])
                }
                continuation.resume(returning: outcome)
            }
        }
        return try result.get()
    }

    /// Watches the app's folder and reloads after a save: from the kernel's file notifications (inotify), so
    /// an idle watch costs nothing, or where there are none by looking every `interval`. A save counts once it is
    /// complete (written and closed, renamed into place, deleted); saves within `debounce` of each other are one
    /// reload. Each reload that loaded new scripts, or failed to, is reported to `onReload` (a save that leaves
    /// the scripts as they are is not). `polls`: look every `interval` even where there are notifications (a
    /// network file system, a folder shared into a container: the kernel does not hear of changes made on
    /// another machine).
    public func startWatching(
        interval: Duration = .milliseconds(10), debounce: Duration = .milliseconds(5), polls: Bool = false,
        onReload: @escaping @Sendable (Result<ReloadOutcome, ScriptFailure>) -> Void = { _ in }
    ) {
        let (saves, saved) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let reloads = Task { [weak self] in
            for await _ in saves {
                guard let self else { return }
                do throws(ScriptFailure) {
                    let outcome = try await self.reload()
                    if case .unchanged = outcome { continue }
                    onReload(.success(outcome))
                } catch {
                    onReload(.failure(error))
                }
            }
        }
        let files = FolderWatcher(folder: engine.app.folder, debounce: debounce, polls: polls, interval: interval) { saved.yield() }
        let watching = Watching(reloads: reloads, saves: saved, files: files)
        watcher.withLock { previous in
            previous?.end()
            previous = watching
        }
    }

    /// Stops watching the app's folder.
    public func stopWatching() {
        watcher.withLock { watching in
            watching?.end()
            watching = nil
        }
    }
}
