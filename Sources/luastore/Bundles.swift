import ArgumentParser
import Foundation
import LuaStoreBundles
import LuaStoreCommandLine
import LuaStoreScripting

/// `luastore keygen PATH`: an Ed25519 key pair for signing bundles.
struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a key pair for signing bundles: PATH.key (private, mode 0600) and PATH.pub (what hosts trust).",
        discussion: "Never replaces a key. Exit status: 0 when both files were written, 1 otherwise.")

    @Argument(help: "Where the keys go (PATH.key and PATH.pub).")
    var path: String

    func run() throws {
        try saidInWords {
            let id = try BundleKeys.generate(at: path)
            print("key \(id): \(path).key (private: keep it secret), \(path).pub (give it to hosts: --trust \(path).pub)")
        }
    }
}

/// `luastore pack APP -o FILE [--key PATH.key]`: an app folder as a bundle.
struct Pack: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pack an app folder (with its luastore.json) into a bundle: a zip of its files, a digest of each, and a signature with --key.",
        discussion: "Hidden files (.data, .git) stay out; a symbolic link is refused. Exit status: 0 when the bundle was written, 1 otherwise.")

    @Argument(help: "The app folder.", completion: .directory)
    var appDirectory: String

    @Option(name: .shortAndLong, help: "The bundle to write (replaced whole, never in part).")
    var output: String

    @Option(help: ArgumentHelp("Sign with this private key (from luastore keygen).", valueName: "PATH.key"))
    var key: String?

    func run() throws {
        try saidInWords {
            let signing = try key.map { path throws(BundleFailure) in try BundleKeys.privateKey(at: path) }
            let (manifest, files) = try AppBundle.pack(folder: URL(fileURLWithPath: appDirectory), to: URL(fileURLWithPath: output), key: signing,
                                                      inputs: key.map { [URL(fileURLWithPath: $0)] } ?? [])
            let signature = signing.map { "signed by \(BundleKeys.id(of: $0.publicKey))" } ?? "unsigned"
            print("\(manifest.name) \(manifest.version): \(files) files in \(output), \(signature)")
        }
    }
}

/// `luastore verify FILE --trust PUB…`: whether a bundle is whole and signed by a trusted key.
struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify a bundle: every file matches its digest, and the digests carry a signature of a trusted key.",
        discussion: "Prints 'NAME VERSION signed by KEYID'. Exit status: 0 when it verifies, 1 when it does not (and why).")

    @Argument(help: "The bundle.")
    var bundle: String

    @OptionGroup var trust: TrustOptions

    func run() throws {
        try saidInWords {
            let verified = try AppBundle.verify(URL(fileURLWithPath: bundle), trusting: try trust.keys(), allowUnsigned: trust.allowUnsigned)
            let manifest = verified.manifest
            print("\(manifest.name) \(manifest.version) " + (verified.signer.map { "signed by \($0)" } ?? "unsigned (accepted: --allow-unsigned)"))
        }
    }
}

/// Runs `body`; a failure is said in words, with exit status 1.
private func saidInWords(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch {
        Console.error("\(error)")
        throw ExitCode.appFailure
    }
}
