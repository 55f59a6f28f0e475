import ArgumentParser
import Foundation
import LuaStoreCluster
import LuaStoreCommandLine
import LuaStoreServer

/// `luastore export KEY --cluster URL`: a key's journal in a cluster's database, written as a recording for
/// `luastore replay` (docs/serve.md, "Many machines").
struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a key's journal in a cluster's PostgreSQL database as a recording (for luastore replay and the devtools' import).",
        discussion: """
            The recording starts at the key's latest snapshot (its header holds the state there) and has every entry \
            after it, read as one moment of the database while nodes go on writing. Nothing in the database changes.
            """)

    @Argument(help: "The store's key.")
    var key: String

    @Option(name: .long, help: ArgumentHelp("The cluster's database.", valueName: "postgres://user@host/db"))
    var cluster: String

    @Option(name: [.short, .long], help: ArgumentHelp("Write the recording to this file (a new one; default: standard output).", valueName: "file"))
    var output: String?

    func run() async throws {
        let (cluster, key) = (self.cluster, self.key)
        if let problem = StoreKey.check(key) { throw ValidationError("\(problem): \(key.debugDescription)") }
        if let output, FileManager.default.fileExists(atPath: output) {
            Console.error("\(output) exists: export writes a new file (remove it, or choose another name)")
            throw ExitCode.unusable
        }
        let read = await Blocking.run { () -> Result<Data?, ClusterFailure> in
            Result { () throws(ClusterFailure) in
                let database = try ClusterDatabase(url: cluster, app: nil, node: "export", address: "", lanes: 1)
                defer { database.close() }
                return try database.recording(of: key)
            }
        }
        let recording: Data
        switch read {
        case .failure(let failure):
            Console.error("--cluster: \(failure)")
            throw ExitCode.unusable
        case .success(nil):
            Console.error("the cluster holds no journal of key \(key.debugDescription)")
            throw ExitCode.failure
        case .success(let data?):
            recording = data
        }
        guard let output else {
            FileHandle.standardOutput.write(recording)
            return
        }
        guard FileManager.default.createFile(atPath: output, contents: recording) else {
            Console.error("cannot write \(output)")
            throw ExitCode.unusable
        }
    }
}
