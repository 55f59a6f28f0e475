import ArgumentParser
import Foundation
import LuaStoreBundles
import LuaStorePersistence
import LuaStoreScripting

/// `--trust PUB` (repeatable) and `--allow-unsigned`: which bundles `run`, `check`, `test` and `verify` accept.
public struct TrustOptions: ParsableArguments, Sendable {
    public init() {}

    @Option(name: .customLong("trust"), help: ArgumentHelp("Accept bundles signed by this public key (from luastore keygen); repeatable.", valueName: "PATH.pub"))
    public var trusted: [String] = []

    @Flag(name: .customLong("allow-unsigned"), help: "Accept a bundle that is not signed (never one whose files differ from its digests).")
    public var allowUnsigned = false

    public func keys() throws(BundleFailure) -> [BundleKeys.Trusted] {
        var keys: [BundleKeys.Trusted] = []
        for path in trusted { keys.append(try BundleKeys.trusted(at: path)) }
        return keys
    }
}

/// An app given to `run`, `check` or `test`: a folder as it is, or a bundle verified and unpacked into a private
/// folder (removed by `remove()`), and the bundles it mounts as plugins, opened with the same trust.
public struct AppSource {
    public let folder: URL
    /// Where a bundle was unpacked (nil for a folder).
    public let unpacked: URL?
    /// The bundle's path (nil for a folder).
    public let bundle: String?
    /// Opens the bundles the app mounts (`ScriptedStoreOptions.openBundle`).
    public let mountedBundles: AppBundle.Opener

    /// The app at `path` — a bundle when it is a file — or exit status 2 with why.
    public static func open(_ path: String, trust: TrustOptions) throws -> AppSource {
        let keys: [BundleKeys.Trusted]
        do {
            keys = try trust.keys()
        } catch {
            Console.error("\(error)")
            throw ExitCode.unusable
        }
        let opener = AppBundle.Opener(trusting: keys, allowUnsigned: trust.allowUnsigned)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue else {
            return AppSource(folder: URL(fileURLWithPath: path), unpacked: nil, bundle: nil, mountedBundles: opener)
        }
        do {
            let verified = try AppBundle.verify(URL(fileURLWithPath: path), trusting: keys, allowUnsigned: trust.allowUnsigned)
            let (folder, parent) = try AppBundle.unpack(verified)
            return AppSource(folder: folder, unpacked: parent, bundle: path, mountedBundles: opener)
        } catch {
            Console.error("\(error)")
            throw ExitCode.unusable
        }
    }

    /// `options` opening the app's mounted bundles.
    public func configure(_ options: inout ScriptedStoreOptions) {
        options.openBundle = { [mountedBundles] url in try mountedBundles.open(url) }
    }

    public func remove() {
        mountedBundles.removeAll()
        if let unpacked { try? FileManager.default.removeItem(at: unpacked) }
    }
}

/// `--persist-sync full|batch` (`run`, `serve`).
extension Durability: ExpressibleByArgument {}
