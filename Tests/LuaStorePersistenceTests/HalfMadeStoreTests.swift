import Foundation
import LuaStoreCore
@testable import LuaStorePersistence
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// A new store is written without SQLite's mark first, and the mark last (`StoreWriter.writeNewStore`): a kill while
/// the kernel copies its pages may leave any prefix of it behind — a write of several pages can stop part way for a
/// fatal signal. Such a file is ours and half made: the next run makes the store again in it. A file that differs
/// from a new store's bytes anywhere past the mark is not, and is left byte for byte.
@Suite struct HalfMadeStoreTests {
    func path() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("luastore-half-\(UUID().uuidString).db").path
    }

    func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    @Test func everyPrefixAKillLeavesIsMadeAgain() async throws {
        let bytes = try StoreWriter.newStoreBytes(app: "app")
        var unmarked = bytes
        for index in 0..<StoreWriter.markLength { unmarked[index] = 0 }
        let folder = try CLI.makeApp(StoreDatabaseTests.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        for length in [1, StoreWriter.markLength, 100, 4096, 4097, bytes.count - 1, bytes.count] {
            let path = path()
            defer { remove(path) }
            try Data(unmarked.prefix(length)).write(to: URL(fileURLWithPath: path))
            var options = StoreDatabaseTests.options
            options.persistence = try StoreDatabase(path: path, app: "app", durability: .full)
            let store = try await ScriptedStore(app: folder, options: options)
            _ = await store.send(["type": "add", "label": "first"])
            #expect(try await store.state()["count"] == 1, "a prefix of \(length) bytes")
            store.shutdown()
        }
    }

    @Test func aFileThatIsNotANewStoresBytesIsLeftAsItIs() throws {
        let bytes = try StoreWriter.newStoreBytes(app: "app")
        var unmarked = bytes
        for index in 0..<StoreWriter.markLength { unmarked[index] = 0 }
        var changed = unmarked
        changed[bytes.count - 1] ^= 0x01
        let cases = [changed, unmarked + [0], Array(unmarked.prefix(StoreWriter.markLength)) + [1]]
        for (index, content) in cases.enumerated() {
            let path = path()
            defer { remove(path) }
            try Data(content).write(to: URL(fileURLWithPath: path))
            #expect(throws: PersistenceFailure.self, "case \(index)") {
                _ = try StoreDatabase(path: path, app: "app", durability: .full)
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(content), "case \(index): left byte for byte")
        }
    }
}
