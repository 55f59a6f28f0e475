import Crypto
import Foundation
import LuaStoreConcurrency
import LuaStoreScripting
import ZIPFoundation

/// A plugin bundle (`luastore pack`): a standard zip holding an app's files (its manifest among them) and
/// `.luastore/digests` — `luastore-bundle 1`, then a line `SHA256  path` per file, sorted by path — with, when signed,
/// `.luastore/signature`: `luastore-ed25519 KEYID SIGNATURE`, an Ed25519 signature over the digests' exact bytes.
///
/// Verifying reads the whole bundle before any of it is used: a path that leaves the bundle, a link, a name held
/// twice, too many entries, one too large or that expands too much (a zip bomb), a signature that does not match or
/// whose key is not trusted, a file whose digest differs, one listed but missing or held but not listed — each is
/// refused, naming it. See docs/plugins.md.
public enum AppBundle {
    static let digestsPath = ".luastore/digests"
    static let signaturePath = ".luastore/signature"
    static let digestsHeader = "luastore-bundle 1"
    static let signatureLabel = "luastore-ed25519"

    /// What a bundle may hold.
    public struct Limits: Sendable {
        /// At most this many files.
        public var entries = 10_000
        /// Largest unpacked size of one file, in bytes.
        public var entryBytes: UInt64 = 64 << 20
        /// Largest unpacked size of all its files together, in bytes.
        public var totalBytes: UInt64 = 256 << 20
        /// An entry over 1 MiB may expand at most this many times its packed size.
        public var expansion: UInt64 = 100

        /// The defaults: 10,000 files, 64 MiB each, 256 MiB in all, 100 times expansion.
        public init() {}
    }

    /// A bundle whose every file matched its digest (and, signed, whose signature a trusted key made).
    public struct Verified: Sendable {
        /// The app's manifest (`luastore.json`).
        public let manifest: AppManifest
        /// The app's files, by path.
        public let files: [String: Data]
        /// The id of the key that signed it; nil for an unsigned bundle run with `allowUnsigned`.
        public let signer: String?
    }

    // MARK: Packing

    /// Packs the app in `folder` (its manifest required) into a zip at `output` — written beside it and renamed
    /// over it — signed with `key` if given. Every regular file goes in but hidden ones (`.data`, `.git`); a link
    /// is refused. An output inside the app folder, or that is one of `inputs` (the signing key's file, say), is
    /// refused before anything is read or written, by identity. Returns the manifest and the number of files.
    public static func pack(folder: URL, to output: URL, key: Curve25519.Signing.PrivateKey?, inputs: [URL] = []) throws(BundleFailure)
        -> (manifest: AppManifest, files: Int) {
        let manifest: AppManifest
        do {
            guard let found = try AppManifest.load(folder: folder) else {
                throw BundleFailure("\(folder.path) has no \(AppManifest.fileName): a bundle needs a manifest (docs/plugins.md)")
            }
            manifest = found
        } catch let failure as ManifestFailure {
            throw BundleFailure("\(folder.path): \(failure)")
        } catch let failure as BundleFailure {
            throw failure
        } catch {
            throw BundleFailure("\(folder.path): \(error)")
        }
        if FileIdentity.path(output.path, isWithin: folder) {
            throw BundleFailure("\(output.path) is inside the app folder \(folder.path): a bundle is written outside the app it packs (nothing was written)")
        }
        if let written = FileIdentity(path: output.path), let input = inputs.first(where: { FileIdentity(path: $0.path) == written }) {
            throw BundleFailure("\(output.path) is the same file as \(input.path): refusing to write over it (nothing was written)")
        }
        let files = try appFiles(in: folder, leaving: output)
        if let odd = files.first(where: { !safe($0) }) {
            throw BundleFailure("\(folder.appendingPathComponent(odd).path) cannot go in a bundle: its name holds a backslash or a control character, or a part longer than 255 bytes (nothing was written)")
        }
        if let (one, other) = sameNameTwice(files) {
            throw BundleFailure("\(folder.path) holds \(one) and \(other), names that differ only in case: one file where case is not told apart (nothing was written)")
        }
        var contents: [(path: String, data: Data)] = []
        for path in files {
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(path).path) else {
                throw BundleFailure("\(folder.appendingPathComponent(path).path) cannot be read")
            }
            contents.append((path, data))
        }
        let digests = Data(digestsText(contents.map { ($0.path, $0.data) }).utf8)
        var extra: [(String, Data)] = [(digestsPath, digests)]
        if let key {
            do {
                let signature = try key.signature(for: digests)
                extra.append((signaturePath, Data("\(signatureLabel) \(BundleKeys.id(of: key.publicKey)) \(signature.base64EncodedString())\n".utf8)))
            } catch {
                throw BundleFailure("the bundle cannot be signed: \(error)")
            }
        }
        let temporary = output.deletingLastPathComponent().appendingPathComponent(".\(output.lastPathComponent).\(getpid()).partial")
        try? FileManager.default.removeItem(at: temporary)
        do {
            let archive = try Archive(url: temporary, accessMode: .create)
            let packed = Date(timeIntervalSince1970: 946_684_800) // (2000-01-01: a bundle is the same bytes whenever it is made)
            for (path, data) in contents + extra {
                try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count), modificationDate: packed,
                                     permissions: 0o644, compressionMethod: .deflate) { position, size in
                    data.subdata(in: Int(position)..<Int(position) + size)
                }
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw BundleFailure("\(output.path) cannot be written: \(OutputFailure.obstacle(to: output.path) ?? OutputFailure.words(for: error))")
        }
        guard rename(temporary.path, output.path) == 0 else {
            let reason = OutputFailure.words(errno)
            try? FileManager.default.removeItem(at: temporary)
            throw BundleFailure("\(output.path) cannot be written: \(reason)")
        }
        return (manifest, contents.count)
    }

    /// The app's files under `folder`, relative, sorted: regular files, hidden ones and `output` left out; a link
    /// is refused.
    static func appFiles(in folder: URL, leaving output: URL) throws(BundleFailure) -> [String] {
        let root = folder.standardizedFileURL.path
        let skipped = output.standardizedFileURL.path
        guard let enumerator = FileManager.default.enumerator(atPath: root) else {
            throw BundleFailure("\(folder.path) is not a folder that can be read")
        }
        var files: [String] = []
        while let relative = enumerator.nextObject() as? String {
            let name = (relative as NSString).lastPathComponent
            let full = root + "/" + relative
            var information = stat()
            guard lstat(full, &information) == 0 else { throw BundleFailure("\(full) cannot be read") }
            if name.hasPrefix(".") {
                if (information.st_mode & S_IFMT) == S_IFDIR { enumerator.skipDescendants() }
                continue
            }
            switch information.st_mode & S_IFMT {
            case S_IFLNK: throw BundleFailure("\(full) is a symbolic link: a bundle holds files only (copy what it points to)")
            case S_IFREG: if full != skipped { files.append(relative) }
            default: continue
            }
        }
        return files.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    static func digestsText(_ files: [(String, Data)]) -> String {
        let sorted = files.sorted { Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8)) }
        return ([digestsHeader] + sorted.map { "\(hex(SHA256.hash(data: $0.1)))  \($0.0)" }).joined(separator: "\n") + "\n"
    }

    static func hex(_ digest: SHA256.Digest) -> String {
        digest.map { String(format: "%02x", $0) }.joined()
    }

    // MARK: Verifying

    /// Reads and checks the bundle at `url` (see the type's description); `trusting`: the keys whose signatures are
    /// accepted; `allowUnsigned`: an unsigned bundle is accepted (never one whose files differ from its digests).
    public static func verify(_ url: URL, trusting: [BundleKeys.Trusted], allowUnsigned: Bool = false,
                              limits: Limits = Limits()) throws(BundleFailure) -> Verified {
        let name = url.path
        if let problem = FileIdentity.notARegularFile(name) { throw BundleFailure("\(name) \(problem): a bundle is a file luastore pack wrote") }
        if let problem = unsupportedEntry(in: url) { throw BundleFailure("\(name): \(problem)") }
        let archive: Archive
        do {
            archive = try Archive(url: url, accessMode: .read)
        } catch {
            throw BundleFailure("\(name) is not a LuaStore bundle (not a zip archive that can be read)")
        }
        // The structure first: nothing is inflated before every entry's name, kind and size is acceptable.
        var entries: [String: Entry] = [:]
        var folders: [String] = [] // (folder entries: nothing is read from them, but no file may share a name with one)
        var total: UInt64 = 0
        for entry in archive {
            let path = entry.path
            guard entries.count < limits.entries else { throw BundleFailure("\(name) holds more than \(limits.entries) entries") }
            guard safe(path) else { throw BundleFailure("\(name): the entry '\(path)' has a path that leaves the bundle or is not plain") }
            switch entry.type {
            case .symlink: throw BundleFailure("\(name) holds a symbolic link (\(path)): a bundle holds files only")
            case .directory:
                folders.append(path.hasSuffix("/") ? String(path.dropLast()) : path)
                continue
            case .file: break
            }
            guard entries[path] == nil else { throw BundleFailure("\(name) holds \(path) twice") }
            guard entry.uncompressedSize <= limits.entryBytes else {
                throw BundleFailure("\(name): \(path) is larger than \(limits.entryBytes >> 20) MiB")
            }
            if entry.uncompressedSize > 1 << 20, entry.uncompressedSize / max(entry.compressedSize, 1) > limits.expansion {
                throw BundleFailure("\(name): \(path) expands \(entry.uncompressedSize / max(entry.compressedSize, 1)) times its packed size (a zip bomb?)")
            }
            total += entry.uncompressedSize
            guard total <= limits.totalBytes else { throw BundleFailure("\(name) holds more than \(limits.totalBytes >> 20) MiB") }
            entries[path] = entry
        }
        if let (one, other) = sameNameTwice(entries.keys.sorted()) {
            throw BundleFailure("\(name) holds \(one) and \(other), names that differ only in case: one file where case is not told apart")
        }
        if let folder = folders.first(where: { entries[$0] != nil }) {
            throw BundleFailure("\(name) holds \(folder) twice, as a file and as a folder")
        }
        for path in entries.keys { // (a file `lib` beside `lib/x.lua`: no folder could hold both)
            var folder = Substring(path)
            while let slash = folder.lastIndex(of: "/") {
                folder = folder[..<slash]
                if entries[String(folder)] != nil { throw BundleFailure("\(name) holds both the file \(folder) and \(path), which would be in a folder of that name") }
            }
        }
        func contents(_ path: String) throws(BundleFailure) -> Data {
            guard let entry = entries[path] else { throw BundleFailure("\(name) has no \(path)") }
            var data = Data()
            do {
                _ = try archive.extract(entry, skipCRC32: false) { chunk in
                    data.append(chunk)
                    if UInt64(data.count) > entry.uncompressedSize { throw BundleFailure("\(name): \(path) holds more than its entry says") }
                }
            } catch let failure as BundleFailure {
                throw failure
            } catch {
                throw BundleFailure("\(name): the packed data of \(path) is damaged (it cannot be inflated): get the bundle again")
            }
            return data
        }
        guard entries[digestsPath] != nil else {
            throw BundleFailure("\(name) is not a LuaStore bundle (it has no \(digestsPath): make one with luastore pack)")
        }
        let digests = try contents(digestsPath)
        // Who signed it.
        var signer: String?
        if entries[signaturePath] != nil {
            let line = String(decoding: try contents(signaturePath), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            let parts = line.split(separator: " ")
            guard parts.count == 3, parts[0] == signatureLabel, let signature = Data(base64Encoded: String(parts[2])) else {
                throw BundleFailure("\(name): its signature is not one luastore pack writes")
            }
            let id = String(parts[1])
            guard let key = trusting.first(where: { $0.id == id }) else {
                throw BundleFailure("\(name) is signed by \(id), which is not trusted (--trust KEY.pub with that key)")
            }
            guard key.signed(signature, digests) else {
                throw BundleFailure("\(name): its signature does not match its digests (it was changed after \(id) signed it)")
            }
            signer = id
        } else if !allowUnsigned {
            throw BundleFailure("\(name) is not signed (luastore pack --key signs a bundle; --allow-unsigned runs one anyway)")
        }
        // Every file as listed.
        let lines = String(decoding: digests, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.first == Substring(digestsHeader), lines.last == "" else {
            throw BundleFailure("\(name): its digests are not in a format this luastore reads (\(lines.first ?? ""))")
        }
        var listed: [String: String] = [:]
        for line in lines.dropFirst().dropLast() {
            guard line.count > 66, line.dropFirst(64).hasPrefix("  ") else { throw BundleFailure("\(name): its digests are damaged") }
            listed[String(line.dropFirst(66))] = String(line.prefix(64))
        }
        let whose = signer == nil ? "its digest" : "what was signed"
        if let stray = entries.keys.sorted().first(where: { $0.hasPrefix(".luastore/") && $0 != digestsPath && $0 != signaturePath }) {
            throw BundleFailure("\(name): \(stray) is not a file luastore pack writes")
        }
        var files: [String: Data] = [:]
        for path in entries.keys.sorted() where !path.hasPrefix(".luastore/") {
            guard let digest = listed[path] else {
                throw BundleFailure("\(name): \(path) is not in its digests (a file added after it was packed)")
            }
            let data = try contents(path)
            guard hex(SHA256.hash(data: data)) == digest else { throw BundleFailure("\(name): \(path) differs from \(whose)") }
            files[path] = data
        }
        if let missing = listed.keys.sorted().first(where: { files[$0] == nil }) {
            throw BundleFailure("\(name): \(missing) is in its digests but not in the bundle (a file removed after it was packed)")
        }
        guard let manifestData = files[AppManifest.fileName] else {
            throw BundleFailure("\(name) has no \(AppManifest.fileName): a bundle needs a manifest")
        }
        do {
            let manifest = try AppManifest.parse(manifestData)
            guard files[manifest.main] != nil else { throw BundleFailure("\(name) has no \(manifest.main), its manifest's main") }
            return Verified(manifest: manifest, files: files, signer: signer)
        } catch let failure as ManifestFailure {
            throw BundleFailure("\(name): its \(failure)")
        } catch let failure as BundleFailure {
            throw failure
        } catch {
            throw BundleFailure("\(name): \(error)")
        }
    }

    /// Whether an entry's path is a plain relative path inside the bundle, one that every file system it is unpacked
    /// on can hold as it is: no backslash, no control character (a line break would split its line of the digests),
    /// each part at most 255 bytes.
    static func safe(_ path: String) -> Bool {
        guard !path.isEmpty, path.utf8.count <= 1024, !path.hasPrefix("/"), !path.contains("\\"),
              !path.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            return false
        }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        let directory = path.hasSuffix("/")
        return parts.enumerated().allSatisfy { index, part in
            (part.isEmpty && directory && index == parts.count - 1) || (!part.isEmpty && part != "." && part != ".." && part.utf8.count <= 255)
        }
    }

    /// The first two of `paths` that differ only in case (or in how their accents are written): one file, once
    /// unpacked on a file system that does not tell them apart.
    static func sameNameTwice(_ paths: some Sequence<String>) -> (String, String)? {
        var seen: [String: String] = [:]
        for path in paths {
            let folded = path.lowercased()
            if let other = seen[folded] { return (other, path) }
            seen[folded] = path
        }
        return nil
    }

    /// The first entry of the zip at `url` that a bundle never holds and the zip reader would pass over in
    /// silence — one encrypted, or packed with a method other than stored or deflate — read from the zip's central
    /// directory; nil when there is none, or when the directory is not one this reads (the zip reader then says
    /// what is wrong).
    static func unsupportedEntry(in url: URL) -> String? {
        guard let handle = try? FileHandle(forReadingFrom: url) else { return nil }
        defer { try? handle.close() }
        guard let size = try? handle.seekToEnd(), size >= 22 else { return nil }
        let tailLength = min(size, 22 + 65_535)
        guard (try? handle.seek(toOffset: size - tailLength)) != nil, let tail = try? handle.read(upToCount: Int(tailLength)) else { return nil }
        let bytes = [UInt8](tail)
        func u16(_ b: [UInt8], _ at: Int) -> Int { Int(b[at]) | Int(b[at + 1]) << 8 }
        func u32(_ b: [UInt8], _ at: Int) -> Int { u16(b, at) | u16(b, at + 2) << 16 }
        guard let end = stride(from: bytes.count - 22, through: 0, by: -1).first(where: { at in
            bytes[at] == 0x50 && bytes[at + 1] == 0x4B && bytes[at + 2] == 0x05 && bytes[at + 3] == 0x06
        }) else { return nil }
        let directorySize = u32(bytes, end + 12), directoryOffset = u32(bytes, end + 16)
        guard directoryOffset != 0xFFFF_FFFF, directorySize <= 64 << 20, UInt64(directoryOffset + directorySize) <= size,
              (try? handle.seek(toOffset: UInt64(directoryOffset))) != nil,
              let read = try? handle.read(upToCount: directorySize) else { return nil }
        let directory = [UInt8](read)
        var at = 0
        while at + 46 <= directory.count, u32(directory, at) == 0x0201_4B50 {
            let flags = u16(directory, at + 8), method = u16(directory, at + 10)
            let nameLength = u16(directory, at + 28), extraLength = u16(directory, at + 30), commentLength = u16(directory, at + 32)
            guard at + 46 + nameLength <= directory.count else { return nil }
            let entry = String(decoding: directory[(at + 46)..<(at + 46 + nameLength)], as: UTF8.self)
            if flags & 1 != 0 {
                return "\(entry) is encrypted, and a bundle never is (luastore pack does not encrypt): pack the app again"
            }
            if method != 0 && method != 8 {
                return "\(entry) is packed with compression method \(method), and a bundle uses only stored and deflate: pack the app again with luastore pack"
            }
            at += 46 + nameLength + extraLength + commentLength
        }
        return nil
    }

    // MARK: Unpacking

    /// Writes a verified bundle's files into a new private folder (mode 0700) named after the app, under the
    /// system's temporary folder; returns it. The caller removes it (`parent`) when done.
    public static func unpack(_ verified: Verified) throws(BundleFailure) -> (folder: URL, parent: URL) {
        var template = Array((FileManager.default.temporaryDirectory.path + "/luastore-bundle-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw BundleFailure("cannot make a folder to unpack the bundle in, in \(FileManager.default.temporaryDirectory.path): \(OutputFailure.words(errno))")
        }
        let parent = URL(fileURLWithPath: String(cString: made))
        // (The manifest's name was checked to be one plain component; checked again here, where it becomes a path.)
        guard AppManifest.isPlainName(verified.manifest.name) else {
            try? FileManager.default.removeItem(at: parent)
            throw BundleFailure("the bundle's app name '\(verified.manifest.name)' is not a plain name: it is not unpacked")
        }
        let folder = parent.appendingPathComponent(verified.manifest.name, isDirectory: true)
        for (path, data) in verified.files {
            let file = folder.appendingPathComponent(path)
            do {
                try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                try data.write(to: file)
            } catch {
                let reason = OutputFailure.obstacle(to: file.path, makingFolders: true) ?? OutputFailure.words(for: error)
                try? FileManager.default.removeItem(at: parent)
                throw BundleFailure("cannot unpack \(path) of the bundle into \(parent.path): \(reason)")
            }
        }
        return (folder, parent)
    }
}

extension AppBundle {
    /// Opens the bundles an app mounts as plugins (`ScriptedStoreOptions.openBundle`): each verified whole with
    /// the same trust as the app's own bundle, then unpacked privately; `removeAll()` removes what it unpacked
    /// once the store has stopped.
    public final class Opener: Sendable {
        private let trust: [BundleKeys.Trusted]
        private let allowUnsigned: Bool
        private let unpacked = Protected<[URL]>([])

        /// An opener accepting bundles signed by a key in `trust`, and unsigned ones when `allowUnsigned`.
        public init(trusting trust: [BundleKeys.Trusted], allowUnsigned: Bool = false) {
            self.trust = trust
            self.allowUnsigned = allowUnsigned
        }

        /// The folder the bundle at `url` was unpacked into, once verified (`BundleFailure` otherwise).
        public func open(_ url: URL) throws -> URL {
            let verified = try AppBundle.verify(url, trusting: trust, allowUnsigned: allowUnsigned)
            let (folder, parent) = try AppBundle.unpack(verified)
            unpacked.withLock { $0.append(parent) }
            return folder
        }

        /// Removes every folder it unpacked (call once the store has stopped).
        public func removeAll() {
            for parent in unpacked.withLock({ list in defer { list = [] }; return list }) {
                try? FileManager.default.removeItem(at: parent)
            }
        }
    }
}
