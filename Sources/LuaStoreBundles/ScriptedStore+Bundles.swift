import Foundation
import LuaKit
import LuaStoreScripting

extension ScriptedStore {
    /// What installing a bundle did: the reload's outcome, and the folder the new version was unpacked into.
    public struct BundleInstall: Sendable {
        /// What the reload did: unchanged, or reloaded from one schema version to another.
        public let outcome: ReloadOutcome
        /// The folder the new version was unpacked into, which it runs from.
        public let folder: URL
        /// The temporary folder holding `folder`. The store owns it: it is removed once the store runs another
        /// version, or shuts down (the folder of the version this one replaced is gone already).
        public let unpacked: URL
        /// The new version's manifest.
        public let manifest: AppManifest
    }

    /// Installs a new version of the app from a bundle: verified whole (signed by a key of `trust`, or unsigned
    /// with `allowUnsigned`), unpacked privately, then `install(folder:allowDowngrade:)` — the same app, a
    /// scripting API this host has, a greater version, loaded, migrated and checked before it is swapped in. On any
    /// failure the running version stays and nothing is left behind. The unpacked folder is the store's: it goes
    /// when another version replaces this one, or the store shuts down.
    public func install(bundle: URL, trust: [BundleKeys.Trusted], allowUnsigned: Bool = false, allowDowngrade: Bool = false)
        async throws -> BundleInstall {
        let verified = try AppBundle.verify(bundle, trusting: trust, allowUnsigned: allowUnsigned)
        let (folder, unpacked) = try AppBundle.unpack(verified)
        do {
            let outcome = try await install(folder: folder, allowDowngrade: allowDowngrade, owning: unpacked)
            return BundleInstall(outcome: outcome, folder: folder, unpacked: unpacked, manifest: verified.manifest)
        } catch {
            try? FileManager.default.removeItem(at: unpacked)
            throw error
        }
    }
}
