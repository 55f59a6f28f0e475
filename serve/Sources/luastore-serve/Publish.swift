import ArgumentParser
import Foundation
import LuaStoreBundles
import LuaStoreCluster
import LuaStoreCommandLine
import LuaStoreScripting
import LuaStoreServer

/// `luastore publish BUNDLE --cluster URL`: a new version of the app for every node of a cluster (docs/serve.md).
struct Publish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Publish a new version of a cluster's app (a bundle from luastore pack): every node installs it into the stores it runs.",
        discussion: """
            The bundle is verified here (with --trust, or --allow-unsigned) and stored in the cluster's database; each \
            node verifies it again with its own --trust keys and, within a third of its lease, installs it as \
            `luastore run --watch` installs a new version: into every live store (migrating its state when \
            schemaVersion grew), and for every store opened after. A node or a store that cannot take it keeps the \
            version it runs, and says so in its log. Versions only go up: a version not newer than the latest \
            published is refused.
            """)

    @Argument(help: "The bundle (luastore pack).", completion: .file())
    var bundle: String

    @Option(name: .long, help: ArgumentHelp("The cluster's database.", valueName: "postgres://user@host/db"))
    var cluster: String

    @OptionGroup var trust: TrustOptions

    func run() async throws {
        let verified: AppBundle.Verified
        let bytes: Data
        do throws(BundleFailure) {
            verified = try AppBundle.verify(URL(fileURLWithPath: bundle), trusting: try trust.keys(), allowUnsigned: trust.allowUnsigned)
            guard let read = FileManager.default.contents(atPath: bundle) else { throw BundleFailure("\(bundle) cannot be read") }
            bytes = read
        } catch {
            Console.error("\(error)")
            throw ExitCode.unusable
        }
        let (cluster, name, version) = (self.cluster, verified.manifest.name, verified.manifest.version)
        let published = await Blocking.run { () -> Result<Int64, ClusterFailure> in
            Result { () throws(ClusterFailure) in
                let database = try ClusterDatabase(url: cluster, app: nil, node: "publish", address: "", lanes: 1)
                defer { database.close() }
                return try database.publish(bytes, name: name, version: version.description) { latestName, latestVersion in
                    if latestName != name { return "the cluster runs app '\(latestName)', not '\(name)': publish a version of its app" }
                    guard let latest = SemanticVersion(latestVersion), version > latest else {
                        return "\(name) \(latestVersion) is published already: publish a newer version than it (not \(version))"
                    }
                    return nil
                }
            }
        }
        switch published {
        case .success(let number):
            Console.out("published \(name) \(version) to the cluster (publication \(number)): its nodes install it within a third of their lease")
        case .failure(let failure):
            Console.error("--cluster: \(failure)")
            throw ExitCode.unusable
        }
    }
}
