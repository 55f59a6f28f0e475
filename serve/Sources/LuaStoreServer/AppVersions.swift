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
final class AppVersions: Sendable {
    struct Running: Sendable {
        /// The folder new and resumed stores start from.
        var folder: URL
        var manifest: AppManifest?
        /// The latest publication looked at (0: none yet).
        var seen: Int64 = 0
    }

    private let running: Protected<Running>
    /// Where published versions were unpacked: removed when the server stops.
    private let unpacked = Protected<[URL]>([])
    private let trust: [BundleKeys.Trusted]
    private let allowUnsigned: Bool
    private let storeOptions: ScriptedStoreOptions
    private let log: @Sendable (String) -> Void

    init(options: ServerOptions, log: @escaping @Sendable (String) -> Void) {
        let manifest = try? AppManifest.load(folder: options.app)
        running = Protected(Running(folder: options.app, manifest: manifest ?? nil))
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
                let (folder, manifest) = try await take(publication)
                running.withLock { $0.folder = folder; $0.manifest = manifest }
                log("installed \(manifest.name) \(manifest.version) (publication \(publication.number)) in place of \(was)")
                return folder
            } catch {
                log("install of publication \(publication.number) (\(publication.name) \(publication.version)) failed, still running \(was): \(error)")
            }
        }
        return nil
    }

    /// Verifies, checks, unpacks and loads `publication` on its own; its folder and manifest.
    private func take(_ publication: ClusterDatabase.Publication) async throws(ServeFailure) -> (URL, AppManifest) {
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
                guard verified.manifest.version > current.version else {
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
        do {
            let probe = try await ScriptedStore(app: folder, options: probeOptions)
            probe.shutdown()
        } catch {
            throw ServeFailure("\(error.error) (\(error.stage.rawValue))")
        }
        return (folder, verified.manifest)
    }

    /// Removes the folders published versions were unpacked into (the server has stopped: no store runs them).
    func removeUnpacked() {
        for folder in unpacked.withLock({ $0 }) { try? FileManager.default.removeItem(at: folder) }
    }
}
