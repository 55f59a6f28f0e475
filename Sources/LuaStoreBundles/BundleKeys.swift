import Crypto
import Foundation
import LuaStoreScripting

/// The Ed25519 keys that sign bundles (`luastore keygen PATH`): `PATH.key`, the private key (mode 0600), and
/// `PATH.pub`, the public key a host trusts (`--trust PATH.pub`). Each is one line of text: a label and the key's 32
/// bytes in base64. A key is named by its id: the first 8 bytes of the SHA-256 of the public key, in hex.
public enum BundleKeys {
    static let privateLabel = "luastore-ed25519-private"
    static let publicLabel = "luastore-ed25519-public"

    /// A public key a host trusts, with its id.
    public struct Trusted: Sendable {
        /// The key's id: the first 8 bytes of the SHA-256 of the public key, in hex.
        public let id: String
        /// The key's 32 bytes.
        let bytes: Data

        /// A public key to trust.
        public init(_ key: Curve25519.Signing.PublicKey) {
            bytes = key.rawRepresentation
            id = BundleKeys.id(of: key)
        }

        /// The public key a `.pub` file holds, from its text (`luastore-ed25519-public <base64>`, as `luastore keygen`
        /// writes it; surrounding white space ignored) — a key a host keeps in its configuration rather than in a
        /// file. Refused in words when it is not one.
        public init(publicKeyText text: String) throws(BundleFailure) {
            let bytes = try BundleKeys.bytes(of: text, label: BundleKeys.publicLabel, what: "a public key", name: "the text")
            do {
                self.init(try Curve25519.Signing.PublicKey(rawRepresentation: bytes))
            } catch {
                throw BundleFailure("the text is not a public key of luastore keygen")
            }
        }

        /// Whether `signature` is this key's over `data`.
        func signed(_ signature: Data, _ data: Data) -> Bool {
            (try? Curve25519.Signing.PublicKey(rawRepresentation: bytes))?.isValidSignature(signature, for: data) ?? false
        }
    }

    /// Makes a new key pair: writes `path.key` (0600) and `path.pub`, refusing to replace either. Returns the id.
    public static func generate(at path: String) throws(BundleFailure) -> String {
        let key = Curve25519.Signing.PrivateKey()
        for file in [path + ".key", path + ".pub"] where FileManager.default.fileExists(atPath: file) {
            throw BundleFailure("\(file) exists already: keygen never replaces a key (choose another name)")
        }
        try write("\(privateLabel) \(key.rawRepresentation.base64EncodedString())\n", to: path + ".key", mode: 0o600)
        try write("\(publicLabel) \(key.publicKey.rawRepresentation.base64EncodedString())\n", to: path + ".pub", mode: 0o644)
        return id(of: key.publicKey)
    }

    /// The private key in `path` (a `.key` file `generate` wrote).
    public static func privateKey(at path: String) throws(BundleFailure) -> Curve25519.Signing.PrivateKey {
        let bytes = try read(path, label: privateLabel, what: "a private key")
        do {
            return try Curve25519.Signing.PrivateKey(rawRepresentation: bytes)
        } catch {
            throw BundleFailure("\(path) is not a private key of luastore keygen")
        }
    }

    /// The public key in `path` (a `.pub` file `generate` wrote).
    public static func trusted(at path: String) throws(BundleFailure) -> Trusted {
        let bytes = try read(path, label: publicLabel, what: "a public key")
        do {
            return Trusted(try Curve25519.Signing.PublicKey(rawRepresentation: bytes))
        } catch {
            throw BundleFailure("\(path) is not a public key of luastore keygen")
        }
    }

    /// A key's id: the first 8 bytes of the SHA-256 of the public key, in hex.
    public static func id(of key: Curve25519.Signing.PublicKey) -> String {
        SHA256.hash(data: key.rawRepresentation).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    private static func read(_ path: String, label: String, what: String) throws(BundleFailure) -> Data {
        if let problem = FileIdentity.notARegularFile(path) { throw BundleFailure("\(path) \(problem): \(what) is a file luastore keygen wrote") }
        guard let data = FileManager.default.contents(atPath: path) else { throw BundleFailure("\(path) cannot be read") }
        return try bytes(of: String(decoding: data, as: UTF8.self), label: label, what: what, name: path)
    }

    /// The 32 bytes of a key file's text (`label base64`); `name` says where the text came from.
    fileprivate static func bytes(of text: String, label: String, what: String, name: String) throws(BundleFailure) -> Data {
        let parts = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
        guard parts.count == 2, parts[0] == label, let bytes = Data(base64Encoded: String(parts[1])), bytes.count == 32 else {
            let other = label == privateLabel ? publicLabel : privateLabel
            if parts.first.map(String.init) == other {
                throw BundleFailure("\(name) is \(label == privateLabel ? "a public key" : "a private key"), not \(what)")
            }
            throw BundleFailure("\(name) is not \(what) of luastore keygen")
        }
        return bytes
    }

    private static func write(_ text: String, to path: String, mode: mode_t) throws(BundleFailure) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw BundleFailure("\(path) cannot be written: \(OutputFailure.words(errno))") }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ Glibc.write(descriptor, $0.baseAddress, $0.count) }) == bytes.count, fsync(descriptor) == 0 else {
            let reason = OutputFailure.words(errno)
            unlink(path)
            throw BundleFailure("\(path) cannot be written: \(reason)")
        }
    }
}

/// Why a bundle or a key was refused, in words: which file, what is wrong, what to do.
public struct BundleFailure: Error, Sendable, CustomStringConvertible {
    public let description: String

    /// A failure that says `description`.
    public init(_ description: String) {
        self.description = description
    }
}
