import Foundation

/// What makes two paths the same file: its device and inode (shared by hard links, reached through symbolic
/// links). An output that is the same file as an input is refused before anything is written.
public struct FileIdentity: Hashable, Sendable {
    /// The device the file is on (`st_dev`).
    public let device: UInt64
    /// The file's inode number on that device (`st_ino`).
    public let inode: UInt64

    /// The file at `path` (through links); nil when nothing is there.
    public init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        self.init(status)
    }

    /// The file open as `descriptor` (standard input, say).
    public init?(descriptor: Int32) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        self.init(status)
    }

    private init(_ status: stat) {
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }

    /// Where a path leads, whether or not a file is there yet: its folder's real path (links resolved) and its
    /// name; for an existing file, the file's real path. Two outputs with the same location are one file.
    public static func location(of path: String) -> String {
        if let real = realpath(path, nil) {
            defer { free(real) }
            return String(cString: real)
        }
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent().path
        guard let real = realpath(folder, nil) else { return url.standardizedFileURL.path }
        defer { free(real) }
        return String(cString: real) + "/" + url.lastPathComponent
    }

    /// What keeps `path` from being read as a file, in words ("is a folder", "is a FIFO", …), or nil for a regular
    /// file (through links). A reader that wants a file asks first: a folder made ZIP reading spin, and a FIFO or a
    /// device would keep a whole-file read waiting for ever.
    public static func notARegularFile(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return errno == ENOENT ? "does not exist" : "cannot be read (\(OutputFailure.words(errno)))" }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "is a folder, not a file"
        case S_IFIFO: return "is a FIFO (a named pipe), not a file"
        case S_IFCHR, S_IFBLK: return "is a device, not a file"
        case S_IFSOCK: return "is a socket, not a file"
        default: return "is not a regular file"
        }
    }

    /// Whether `path` (a file there or not) is `folder` or lies anywhere inside it, told by identity: the device and
    /// inode of the folder against those of each folder above the path's real location (links resolved), so no
    /// spelling (`app/../app/x`, a link to the folder, a bind mount) hides it.
    public static func path(_ path: String, isWithin folder: URL) -> Bool {
        guard let inside = FileIdentity(path: folder.path) else { return false }
        var current = URL(fileURLWithPath: location(of: path))
        if FileIdentity(path: current.path) == inside { return true }
        while current.path != "/" && !current.path.isEmpty {
            current = current.deletingLastPathComponent()
            if FileIdentity(path: current.path) == inside { return true }
        }
        return false
    }

    /// The Lua files of an app folder, its manifest if any, and the plugin bundles it mounts (what a run reads its
    /// app from; a mounted folder's files are among the first).
    public static func scripts(in folder: URL) -> [(path: String, identity: FileIdentity)] {
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles]) else {
            return []
        }
        var found: [(path: String, identity: FileIdentity)] = []
        while let file = walker.nextObject() as? URL {
            guard file.pathExtension == "lua" || file.lastPathComponent == "luastore.json" else { continue }
            if let identity = FileIdentity(path: file.path) { found.append((file.path, identity)) }
        }
        for mount in (try? AppManifest.load(folder: folder))??.mounts ?? [] {
            let path = folder.appendingPathComponent(mount.path).path
            if let identity = FileIdentity(path: path), !found.contains(where: { $0.identity == identity }) { found.append((path, identity)) }
        }
        return found
    }
}
