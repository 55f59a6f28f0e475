import Foundation
import Glibc
import LuaStoreConcurrency

/// Tells when the Lua files under a folder may have changed, on a thread of its own. From the kernel's file
/// notifications (inotify) where there are: the thread sleeps in `poll` until the kernel has news, so watching
/// costs nothing while nothing happens, and a change counts once it is complete — a file written and closed,
/// renamed into place (how many editors save), renamed away or deleted, a folder added or removed. Elsewhere
/// (`polls`, or the kernel's limit of watches reached) by comparing `FolderSnapshot`s every `interval`.
/// Either way `changed` is called after `debounce` without more news, so a burst of saves is one call.
final class FolderWatcher: Sendable {
    /// The write end of a pipe the thread also waits on: closed to stop it; -1 once closed.
    private let wake: Protected<Int32>

    /// Watches `folder` and the folders in it; the watches (or the first snapshot) are in place when this
    /// returns, so a save right after is seen.
    init(folder: URL, debounce: Duration, polls: Bool, interval: Duration, changed: @escaping @Sendable () -> Void) {
        var pipe: [Int32] = [-1, -1]
        precondition(Glibc.pipe(&pipe) == 0, "FolderWatcher: no pipe (\(errno))")
        let (asleep, wake) = (pipe[0], pipe[1])
        for descriptor in pipe { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) } // (never read nor written: only closed)
        self.wake = Protected(wake)
        let root = folder.standardizedFileURL.resolvingSymlinksInPath()
        let body: @Sendable () -> Void
        if !polls, let tree = WatchedTree(root: root.path) {
            body = {
                var tree = tree
                tree.run(wake: asleep, debounce: debounce, changed: changed)
                tree.close()
            }
        } else {
            let baseline = FolderSnapshot(root)
            body = { Self.poll(root, from: baseline, wake: asleep, interval: interval, debounce: debounce, changed: changed) }
        }
        let thread = Thread {
            body()
            close(asleep)
        }
        thread.name = "luastore.watch"
        thread.stackSize = 256 << 10
        thread.start()
    }

    deinit { stop() }

    /// Stops watching: the thread ends at once (a call of `changed` under way finishes first).
    func stop() {
        wake.withLock { descriptor in
            guard descriptor >= 0 else { return }
            close(descriptor) // the thread sees the pipe's end
            descriptor = -1
        }
    }

    /// Waits up to `timeout` (nil: for ever) for news on `descriptor` or the end of `wake`: `woken` once the
    /// watch is to stop (or waiting fails), `news` when `descriptor` has something to read.
    fileprivate static func wait(for descriptor: Int32?, wake: Int32, timeout: Duration?) -> (woken: Bool, news: Bool) {
        var milliseconds: Int32 = -1
        if let timeout { milliseconds = timeout <= .zero ? 0 : Int32(min(60_000, (timeout / .milliseconds(1)).rounded(.up))) }
        var descriptors = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        if let descriptor { descriptors.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)) }
        let ready = Glibc.poll(&descriptors, nfds_t(descriptors.count), milliseconds)
        if ready < 0 && errno != EINTR { return (true, false) }
        if descriptors[0].revents != 0 { return (true, false) }
        return (false, descriptors.count > 1 && descriptors[1].revents & Int16(POLLIN) != 0)
    }

    /// Looks every `interval`; once a snapshot differs, waits until it holds still for `debounce`.
    private static func poll(_ folder: URL, from baseline: FolderSnapshot, wake: Int32, interval: Duration, debounce: Duration,
                             changed: @Sendable () -> Void) {
        var known = baseline
        while !wait(for: nil, wake: wake, timeout: interval).woken {
            var current = FolderSnapshot(folder)
            guard current != known else { continue }
            while true {
                if wait(for: nil, wake: wake, timeout: debounce).woken { return }
                let settled = FolderSnapshot(folder)
                if settled == current { break }
                current = settled
            }
            known = current
            changed()
        }
    }
}

/// The watched folders of a tree, by watch descriptor; owned by the watcher's thread once it runs.
private struct WatchedTree: Sendable {
    let descriptor: Int32
    private var folders: [Int32: String] = [:]

    /// Watches `root` and the folders in it; nil when the kernel's notifications cannot be had.
    init?(root: String) {
        descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        guard watch(root) else {
            Glibc.close(descriptor)
            return nil
        }
    }

    func close() { Glibc.close(descriptor) }

    /// What a folder's watch reports: complete changes of its entries, and its own removal.
    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE
        | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW)

    /// Watches `path` and every folder under it; false when the kernel refuses a watch (its limit reached).
    mutating func watch(_ path: String) -> Bool {
        let added = inotify_add_watch(descriptor, path, Self.mask)
        guard added >= 0 else { return errno == ENOENT || errno == ENOTDIR } // (gone already: its removal is news)
        folders[added] = path
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: path) else { return true }
        for entry in entries {
            var isFolder: ObjCBool = false
            let child = path + "/" + entry
            if FileManager.default.fileExists(atPath: child, isDirectory: &isFolder), isFolder.boolValue,
               (try? FileManager.default.destinationOfSymbolicLink(atPath: child)) == nil {
                guard watch(child) else { return false }
            }
        }
        return true
    }

    /// Sleeps until the kernel has news or the other end of `wake` is closed; calls `changed` after `debounce`
    /// without news.
    mutating func run(wake: Int32, debounce: Duration, changed: @Sendable () -> Void) {
        let clock = ContinuousClock()
        var due: ContinuousClock.Instant?
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let (woken, news) = FolderWatcher.wait(for: descriptor, wake: wake, timeout: due.map { clock.now.duration(to: $0) })
            if woken { return }
            if news, read(into: &buffer) { due = clock.now + debounce }
            if let moment = due, clock.now >= moment {
                due = nil
                changed()
            }
        }
    }

    /// Reads the events waiting; whether any may have changed the Lua files.
    private mutating func read(into buffer: inout [UInt8]) -> Bool {
        var news = false
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { return news }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= count {
                let (watch, mask, length) = buffer.withUnsafeBytes { raw in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.wd, event.mask, Int(event.len))
                }
                let name = buffer[(offset + header)..<min(count, offset + header + length)].prefix { $0 != 0 }
                offset += header + length
                news = note(watch: watch, mask: mask, name: String(decoding: name, as: UTF8.self)) || news
            }
        }
    }

    /// Takes in one event: watches folders that appeared, forgets removed ones; whether it is news.
    private mutating func note(watch: Int32, mask: UInt32, name: String) -> Bool {
        if mask & UInt32(IN_Q_OVERFLOW) != 0 { // events were lost: watch what is there now, and look
            if let root = folders.values.min(by: { $0.count < $1.count }) { _ = self.watch(root) }
            return true
        }
        if mask & UInt32(IN_IGNORED) != 0 {
            folders[watch] = nil
            return false
        }
        if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0 { return true }
        if mask & UInt32(IN_ISDIR) != 0 {
            if mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0, let folder = folders[watch] { _ = self.watch(folder + "/" + name) }
            return true // a folder of scripts came or went
        }
        guard name.hasSuffix(".lua") else { return false }
        return mask & UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE) != 0
    }
}

/// Names, sizes, modification times and file numbers of an app's Lua files: cheap to take, compared to notice
/// saves where there are no file notifications. (A save of the same size within the clock's tick is missed.)
struct FolderSnapshot: Equatable {
    private var files: [String: [Double]] = [:]

    init(_ folder: URL) {
        let root = folder.path
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return }
        while let relative = enumerator.nextObject() as? String {
            guard relative.hasSuffix(".lua"), let attributes = try? FileManager.default.attributesOfItem(atPath: root + "/" + relative) else { continue }
            let size = (attributes[.size] as? NSNumber)?.doubleValue ?? -1
            let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? -1
            let file = (attributes[.systemFileNumber] as? NSNumber)?.doubleValue ?? -1 // (a rename over it: another)
            files[relative] = [size, modified, file]
        }
    }
}
