import Foundation
import LuaKit
import LuaStorePersistence
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Actions sent with their sender's id (`send(_:id:)`): the journal keeps each id in its entry (origin
/// `{"client": id}`) and the latest in each snapshot's header, so a durable store knows them after it is reopened —
/// whatever snapshots dropped in between.
@Suite struct ClientActionTests {
    func open(_ folder: URL, _ path: String, snapshotEvery: UInt64, remembering: Int = 10_000) async throws -> (ScriptedStore, StoreDatabase) {
        let database = try StoreDatabase(path: path, app: "app", durability: .full, snapshotInterval: snapshotEvery)
        var options = StoreDatabaseTests.options
        options.persistence = database
        options.rememberedClientActions = remembering
        return (try await ScriptedStore(app: folder, options: options), database)
    }

    @Test(arguments: [1, 3, 10_000] as [UInt64])
    func idsOutliveTheStoreAndItsSnapshots(snapshotEvery: UInt64) async throws {
        let folder = try CLI.makeApp(StoreDatabaseTests.app)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-ids-\(UUID().uuidString).db").path
        defer {
            try? FileManager.default.removeItem(at: folder)
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        let (store, database) = try await open(folder, path, snapshotEvery: snapshotEvery)
        var sent: [ClientAction] = []
        for index in 1...7 {
            let action: LuaValue = index == 4 ? ["type": "boom"] : ["type": "add", "label": .string("n\(index)")]
            switch await store.send(action, id: "c-\(index)") {
            case .applied(let entry):
                #expect(entry.origin == .client(id: "c-\(index)"))
                sent.append(ClientAction(id: "c-\(index)", sequence: entry.sequence))
            case .failed(let failure):
                sent.append(ClientAction(id: "c-\(index)", sequence: UInt64(index), failure: ClientAction.failureText(failure.error)))
            default:
                Issue.record("action \(index) was neither applied nor failed")
            }
        }
        _ = await store.send(["type": "add", "label": "no id"]) // (an action without an id is not one of them)
        #expect(await store.recentClientActions() == sent)
        store.shutdown()
        await store.barrier()
        #expect(database.close() == nil)

        let (reopened, again) = try await open(folder, path, snapshotEvery: snapshotEvery)
        #expect(await reopened.recentClientActions() == sent)
        // The failed one failed with the reducer's words.
        #expect(sent[3].failure?.contains("boom") == true)
        reopened.shutdown()
        await reopened.barrier()
        #expect(again.close() == nil)
    }

    @Test func onlyTheLatestAreKept() async throws {
        let folder = try CLI.makeApp(StoreDatabaseTests.app)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("luastore-ids-\(UUID().uuidString).db").path
        defer {
            try? FileManager.default.removeItem(at: folder)
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        let (store, database) = try await open(folder, path, snapshotEvery: 2, remembering: 3)
        for index in 1...6 { _ = await store.send(["type": "add", "label": "x"], id: "k\(index)") }
        #expect(await store.recentClientActions().map(\.id) == ["k4", "k5", "k6"])
        store.shutdown()
        await store.barrier()
        #expect(database.close() == nil)
        let (reopened, again) = try await open(folder, path, snapshotEvery: 2, remembering: 3)
        #expect(await reopened.recentClientActions().map(\.id) == ["k4", "k5", "k6"])
        reopened.shutdown()
        await reopened.barrier()
        #expect(again.close() == nil)
    }

    /// A recording's client origins and header `clients` are read back, and refused, naming what is wrong, where
    /// they are not what the format says.
    @Test func recordingsCarryClientIdsAndRefuseBadOnes() async throws {
        var start = JournalStart(state: ["n": 0], scripts: "0123456789abcdef", schemaVersion: 0, sequence: 2, time: 0,
                                 clock: RecordedClock(started: 0))
        start.clientActions = [ClientAction(id: "a", sequence: 1), ClientAction(id: "b", sequence: 2, failure: "boom")]
        let header = try RecordingLine.header(app: "app", start: start)
        #expect(header.contains(#""clients":[["a",1],["b",2,"boom"]]"#))
        var reader = try RecordingReader(header: Array(header.utf8)[...])
        #expect(reader.header.clientActions == start.clientActions)
        var entry = JournalEntry(sequence: 3, event: .action(["type": "add"]), origin: .client(id: "c\"3"), changes: [],
                                 failure: nil, scripts: "0123456789abcdef")
        entry.time = 0
        let line = try RecordingLine.entry(entry, after: 0)
        #expect(line.contains(#""origin":{"client":"c\"3"}"#))
        #expect(try reader.entry(Array(line.utf8)[...])?.clientId == "c\"3")

        for (bad, words) in [(#"{"client":5}"#, "a client's origin needs its id"), (#"{"client":"x","extra":1}"#, "extra")] {
            var damaged = JournalEntry(sequence: 4, event: .action(["type": "add"]), origin: .outside, changes: [], failure: nil,
                                       scripts: "0123456789abcdef")
            damaged.time = 0
            let text = RecordingLine.withSum(try RecordingLine.entry(damaged, after: 0).replacingOccurrences(of: #""outside""#, with: bad))
            var fresh = reader
            #expect(throws: RecordingJSON.Malformed.self) { _ = try fresh.entry(Array(text.utf8)[...]) }
            do {
                _ = try fresh.entry(Array(text.utf8)[...])
            } catch {
                #expect("\(error)".contains(words), "\(error)")
            }
        }
        // A header whose clients come after its entry is not one the format writes.
        let later = RecordingLine.withSum(header.replacingOccurrences(of: #"["b",2,"boom"]"#, with: #"["b",9,"boom"]"#))
        #expect(throws: RecordingJSON.Malformed.self) { _ = try RecordingReader(header: Array(later.utf8)[...]) }
    }
}
