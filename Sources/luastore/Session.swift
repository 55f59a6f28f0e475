import Foundation
import LuaKit

/// A recorded session: one JSON object per line, `{"action": …, "state": …}` for an applied action or
/// `{"action": …, "error": "…"}` for a rejected one, in the order the store reduced them (actions from
/// effects included).
final class SessionRecorder {
    private let handle: FileHandle
    private let lock = NSLock()

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw ValidationFailure("cannot write the recording to \(path)")
        }
        self.handle = handle
    }

    func append(action: LuaValue, state: LuaValue) {
        write(["action": action, "state": state])
    }

    func append(action: LuaValue, error: String) {
        write(["action": action, "error": .string(error)])
    }

    private func write(_ entry: LuaValue) {
        guard let line = try? JSONText.encode(entry, root: "entry") else { return }
        lock.lock()
        defer { lock.unlock() }
        handle.write(Data((line + "\n").utf8))
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        try? handle.close()
    }
}

struct ValidationFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// The file handle is written only under the lock.
extension SessionRecorder: @unchecked Sendable {}
