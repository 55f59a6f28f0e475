import Foundation
import LuaStoreConcurrency
import LuaStoreContract

/// The contracts apps declare, as this process read them: by app folder and main file, with the digest of the
/// scripts they were read from (`ScriptEngine.App.digest`, of every script of the folder). The stores of one app —
/// a server's thousand keys, a pool's ten thousand stores — read its files once; a store of a changed app (a reload,
/// an upgrade: another digest) reads them again, and that reading is kept in place of the last. (Up to `limit` apps.)
enum ReadContracts {
    private struct Read {
        let digest: String
        let contract: AppContract
        let problems: [AppContract.Problem]
    }

    private static let reads = Protected<[String: Read]>([:]) // (a lock the thread sanitizer knows, as every lock here)
    /// How many apps' contracts are kept at most.
    private static let limit = 256

    /// The contract of the app in `folder` (`AppContract.read`), whose scripts have `digest`.
    static func contract(of folder: String, main: String, digest: String) -> (contract: AppContract, problems: [AppContract.Problem]) {
        let key = folder + "\u{0}" + main
        if let read = reads.withLock({ $0[key] }), read.digest == digest { return (read.contract, read.problems) }
        let (contract, problems) = AppContract.read(app: URL(fileURLWithPath: folder), main: main)
        reads.withLock { reads in
            if reads.count >= Self.limit, reads[key] == nil { reads.removeAll() } // (a process that loads many apps keeps the latest)
            reads[key] = Read(digest: digest, contract: contract, problems: problems)
        }
        return (contract, problems)
    }
}
