import Foundation
import LuaKit
import LuaStoreBundles
import LuaStoreCluster
import LuaStoreConcurrency
import LuaStoreScripting

/// The version of the app a node runs, and the bundles published to its cluster (`luastore publish`). A newer one
/// is taken as `luastore run --watch` takes a bundle packed over the running one — verified with the node's own
/// trusted keys, naming the same app, a greater version, unpacked, loaded once on its own — then installed into
/// every live store (each migrating its state if its `schemaVersion` grew), and new and resumed stores start from
/// it. A bundle that fails a step leaves the node on the version it runs; a store whose install fails keeps its
/// version; both are said in the server's log. A publication is looked at once: a refused one is not tried again —
/// the latest that passes is taken (so a node started after a refused publication runs the version the others do).
///
/// A store's journal names the scripts that last wrote it (their digest). A store that cannot start on the
/// version the node runs — its `migrate` fails on its state, say, as its install did while it was live — resumes
/// on the version its journal last ran (`folder(ranBy:cluster:)`): the node's own, one it took, or one published to
/// the cluster, as that version left it; the next version that installs moves it on.
final class AppVersions: Sendable {
    struct Running: Sendable {
        /// The folder new and resumed stores start from.
        var folder: URL
        var manifest: AppManifest?
        /// The latest publication looked at (0: none yet).
        var seen: Int64 = 0
    }

    private let running: Protected<Running>
    /// A version this node has unpacked (its own, or a publication), with the digest of its scripts once known.
    private struct Known {
        var folder: URL
        var digest: String?
        var publication: Int64?
    }

    /// The versions this node has unpacked, its own first; and the publications looked for a journal's version
    /// that did not pass (not unpacked again).
    private let known: Protected<(versions: [Known], refused: Set<Int64>)>
    /// Where published versions were unpacked: removed when the server stops.
    private let unpacked = Protected<[URL]>([])
    private let trust: [BundleKeys.Trusted]
    private let allowUnsigned: Bool
    private let storeOptions: ScriptedStoreOptions
    private let log: @Sendable (String) -> Void

    init(options: ServerOptions, log: @escaping @Sendable (String) -> Void) {
        let manifest = try? AppManifest.load(folder: options.app)
        running = Protected(Running(folder: options.app, manifest: manifest ?? nil))
        known = Protected(([Known(folder: options.app)], []))
        trust = options.trust
        allowUnsigned = options.allowUnsigned
        storeOptions = options.store
        self.log = log
    }

    var folder: URL { running.withLock { $0.folder } }

    /// Takes the latest of the cluster's publications this node has not looked at that passes every step: the
    /// folder of the version it now runs, or nil when it runs the one it ran (none newer, or each refused).
    func adoptLatest(from cluster: ClusterDatabase) async -> URL? {
        let seen = running.withLock { $0.seen }
        let found = await Blocking.run { () -> Result<[ClusterDatabase.Publication], ClusterFailure> in
            Result { () throws(ClusterFailure) in try cluster.publications(after: seen) }
        }
        let publications: [ClusterDatabase.Publication]
        switch found {
        case .success(let list): publications = list
        case .failure(let failure):
            log("the cluster's published bundles cannot be read: \(failure)")
            return nil
        }
        guard let latest = publications.first else { return nil }
        running.withLock { $0.seen = latest.number }
        let was = running.withLock { $0.manifest }.map { "\($0.name) \($0.version)" } ?? "the app"
        for publication in publications {
            do {
                let (folder, manifest, digest) = try await take(publication, newerThanRunning: true)
                known.withLock { $0.versions.append(Known(folder: folder, digest: digest, publication: publication.number)) }
                running.withLock { $0.folder = folder; $0.manifest = manifest }
                log("installed \(manifest.name) \(manifest.version) (publication \(publication.number)) in place of \(was)")
                return folder
            } catch {
                log("install of publication \(publication.number) (\(publication.name) \(publication.version)) failed, still running \(was): \(error)")
            }
        }
        return nil
    }

    /// The folder of the version whose scripts have `digest` (a journal's `scripts`): one this node has unpacked,
    /// or else one published to `cluster` (verified, unpacked and loaded on its own as any publication); nil when
    /// none has it.
    func folder(ranBy digest: String, cluster: ClusterDatabase?) async -> URL? {
        for index in known.withLock({ $0.versions.indices.reversed() }) {
            var version = known.withLock { $0.versions[index] }
            if version.digest == nil {
                version.digest = await Self.digest(of: version.folder, options: storeOptions)
                known.withLock { $0.versions[index].digest = version.digest }
            }
            if version.digest == digest { return version.folder }
        }
        guard let cluster else { return nil }
        var after: Int64 = 0
        while true {
            let page = await Blocking.run { [after] () -> Result<[ClusterDatabase.Publication], ClusterFailure> in
                Result { () throws(ClusterFailure) in try cluster.publications(after: after, ascending: true) }
            }
            guard case .success(let publications) = page, let last = publications.last else { return nil }
            after = last.number
            for publication in publications {
                let looked = known.withLock { known in
                    known.refused.contains(publication.number) || known.versions.contains { $0.publication == publication.number }
                }
                guard !looked else { continue }
                guard let (folder, _, found) = try? await take(publication, newerThanRunning: false) else {
                    known.withLock { _ = $0.refused.insert(publication.number) }
                    continue
                }
                known.withLock { $0.versions.append(Known(folder: folder, digest: found, publication: publication.number)) }
                if found == digest { return folder }
            }
        }
    }

    /// The digest of the scripts of the app in `folder` as a store loads them; nil when it does not load.
    private static func digest(of folder: URL, options: ScriptedStoreOptions) async -> String? {
        var probeOptions = options
        probeOptions.performsEffects = false
        probeOptions.persistence = nil
        guard let probe = try? await ScriptedStore(app: folder, options: probeOptions) else { return nil }
        defer { probe.shutdown() }
        return await probe.journalPosition().scripts
    }

    /// Verifies, checks, unpacks and loads `publication` on its own (when `newerThanRunning`, only a version newer
    /// than the one running); its folder, manifest and scripts' digest.
    private func take(_ publication: ClusterDatabase.Publication, newerThanRunning: Bool) async throws(ServeFailure)
        -> (URL, AppManifest, String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-publication-\(UUID().uuidString).zip")
        defer { try? FileManager.default.removeItem(at: file) }
        let verified: AppBundle.Verified
        let folder: URL, parent: URL
        do throws(BundleFailure) {
            guard FileManager.default.createFile(atPath: file.path, contents: publication.bundle) else {
                throw BundleFailure("it cannot be written to \(file.path)")
            }
            verified = try AppBundle.verify(file, trusting: trust, allowUnsigned: allowUnsigned)
            if let current = running.withLock({ $0.manifest }) {
                guard verified.manifest.name == current.name else {
                    throw BundleFailure("it names '\(verified.manifest.name)', not the running '\(current.name)'")
                }
                guard !newerThanRunning || verified.manifest.version > current.version else {
                    throw BundleFailure("its version \(verified.manifest.version) is not newer than the running \(current.version)")
                }
            }
            (folder, parent) = try AppBundle.unpack(verified)
        } catch {
            throw ServeFailure(error.description)
        }
        unpacked.withLock { $0.append(parent) }
        var probeOptions = storeOptions
        probeOptions.performsEffects = false
        let digest: String
        do {
            let probe = try await ScriptedStore(app: folder, options: probeOptions)
            digest = await probe.journalPosition().scripts
            probe.shutdown()
        } catch {
            throw ServeFailure("\(error.error) (\(error.stage.rawValue))")
        }
        return (folder, verified.manifest, digest)
    }

    /// Removes the folders published versions were unpacked into (the server has stopped: no store runs them).
    func removeUnpacked() {
        for folder in unpacked.withLock({ $0 }) { try? FileManager.default.removeItem(at: folder) }
    }
}
