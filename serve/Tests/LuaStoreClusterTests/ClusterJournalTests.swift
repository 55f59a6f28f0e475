import Foundation
import LocalPostgres
import LuaKit
import LuaStoreCluster
import LuaStorePersistence
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// Keys' journals in a real PostgreSQL (`initdb` and `pg_ctl` into a temporary folder): leases taken by one node at
/// a time, a node fenced out once another took its key over, and the state and client ids a new holder resumes.
@Suite(.enabled(if: PostgresServer.unavailable == nil, "PostgreSQL's server is not installed"))
struct ClusterJournalTests {
    static let app = """
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action)
          if action.type == "add" then state.count = state.count + (action.by or 1)
          elseif action.type == "boom" then error("boom") end
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    /// (Every call into the cluster's database blocks its thread: made off Swift's cooperative pool.)
    func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await PostgresServer.detached(body)
    }

    func node(_ name: String, _ url: String, lease: Double) async throws -> ClusterDatabase {
        try await blocking { try ClusterDatabase(url: url, app: "app", node: name, address: "http://127.0.0.1:1/\(name)", leaseSeconds: lease, lanes: 2) }
    }

    func store(_ folder: URL, _ journal: PostgresJournal) async throws -> ScriptedStore {
        var options = ScriptedStoreOptions(log: { _ in }, failures: { _ in })
        options.limits.timeBudget = .seconds(10)
        options.persistence = journal
        return try await ScriptedStore(app: folder, options: options)
    }

    func epoch(_ result: ClusterDatabase.Acquired) throws -> Int64 {
        guard case .taken(let epoch) = result else { throw ClusterFailure("not taken: \(result)") }
        return epoch
    }

    @Test func oneNodeAtATimeAndAFencedNodeNeverWritesAgain() async throws {
        let server = try await PostgresServer.running()
        let url = server.url(try await server.database())
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await node("a", url, lease: 120), b = try await node("b", url, lease: 120)
        defer { a.close(); b.close() }
        try await blocking { try a.heartbeat(); try b.heartbeat() }

        // a takes the key and applies three actions (full: each committed before its answer).
        let epochA = try epoch(try await blocking { try a.acquire("doc") })
        let journalA = try await blocking { try PostgresJournal(database: a, key: "doc", epoch: epochA, durability: .full) }
        #expect(journalA.resumed == nil)
        let storeA = try await store(folder, journalA)
        for index in 1...3 { #expect(await storeA.send(["type": "add"], id: "a\(index)").entry != nil) }

        // While a holds it (renewed just now), b cannot take it, and is told who has it.
        #expect(try await blocking { try a.renew() }["doc"] == epochA)
        guard case .heldBy(let holder) = try await blocking({ try b.acquire("doc") }) else { Issue.record("b took a key a holds"); return }
        #expect(holder.node == "a" && holder.address == "http://127.0.0.1:1/a")

        // a stops renewing (paused) and its lease runs out (made to, here: the test does not wait out a lease);
        // b takes the key over, at a greater epoch.
        let name = String(url.split(separator: "/").last!)
        _ = try await server.psql(name, "UPDATE luastore_leases SET expires = now() WHERE key = 'doc'")
        guard case .taken(let epochB) = try await blocking({ try b.acquire("doc") }) else { Issue.record("b could not take an expired lease"); return }
        #expect(epochB > epochA)
        let journalB = try await blocking { try PostgresJournal(database: b, key: "doc", epoch: epochB, durability: .full) }
        let storeB = try await store(folder, journalB)
        // b resumed a's state and knows a's client ids.
        #expect(try await storeB.props()["count"] == 3)
        #expect(await storeB.recentClientActions().map(\.id) == ["a1", "a2", "a3"])

        // a wakes up: its next write is refused in the database (fenced), its store accepts nothing more, and
        // the key's journal holds only what b wrote after a's.
        let late = await storeA.send(["type": "add", "by": 100], id: "late")
        #expect(late.entry == nil, "a fenced node acknowledged an action")
        #expect(journalA.failure?.reason.contains("took the key over") == true && journalA.failure?.reason.contains("SQLSTATE") == false, "\(String(describing: journalA.failure))")
        #expect(await storeB.send(["type": "add"], id: "b1").entry?.sequence == 4)
        storeA.shutdown()
        storeB.shutdown()
        await storeB.barrier()
        #expect(try await blocking { journalB.close() } == nil)
        let rows = try await server.psql(name, "SELECT seq FROM luastore_entries WHERE key = 'doc' ORDER BY seq")
        #expect(rows.split(separator: "\n") == ["1", "2", "3", "4"], "\(rows)")
        let snapshot = try await server.psql(name, "SELECT seq FROM luastore_snapshots WHERE key = 'doc'")
        #expect(snapshot.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
    }

    @Test func snapshotsReplaceEntriesAndCarryTheIds() async throws {
        let server = try await PostgresServer.running()
        let url = server.url(try await server.database())
        let folder = try CLI.makeApp(Self.app)
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try await node("a", url, lease: 30)
        defer { a.close() }
        let first = try epoch(try await blocking { try a.acquire("k") })
        let journal = try await blocking { try PostgresJournal(database: a, key: "k", epoch: first, durability: .batch, snapshotInterval: 3) }
        let opened = try await store(folder, journal)
        for index in 1...7 { _ = await opened.send(index == 5 ? ["type": "boom"] : ["type": "add"], id: "c\(index)") }
        opened.shutdown()
        await opened.barrier()
        #expect(try await blocking { journal.close() } == nil)
        try await blocking { a.release("k", epoch: first) }

        let second = try epoch(try await blocking { try a.acquire("k") })
        let again = try await blocking { try PostgresJournal(database: a, key: "k", epoch: second, durability: .batch, snapshotInterval: 3) }
        let resumed = try #require(again.resumed)
        #expect(resumed.sequence == 7)
        #expect(resumed.clientActions.map(\.id) == (1...7).map { "c\($0)" })
        #expect(resumed.clientActions[4].failure?.contains("boom") == true)
        let reopened = try await store(folder, again)
        #expect(try await reopened.props()["count"] == 6)
        reopened.shutdown()
        await reopened.barrier()
        #expect(try await blocking { again.close() } == nil)
    }

    @Test func aDatabaseOfAnotherAppIsRefusedInWords() async throws {
        let server = try await PostgresServer.running()
        let url = server.url(try await server.database())
        let a = try await node("a", url, lease: 5)
        a.close()
        do {
            _ = try await blocking { try ClusterDatabase(url: url, app: "other", node: "b", address: "http://127.0.0.1:2") }
            Issue.record("a cluster of app 'app' was opened for app 'other'")
        } catch {
            #expect("\(error)".contains("is the cluster of app app, not other"), "\(error)")
        }
        do {
            _ = try await blocking { try ClusterDatabase(url: "postgres://luastore@127.0.0.1:1/nowhere", app: "app", node: "c", address: "x") }
            Issue.record("a database nobody listens for was opened")
        } catch {
            #expect("\(error)".contains("cannot connect"), "\(error)")
            #expect(!"\(error)".contains("PSQLError"), "\(error)")
        }
        #expect(throws: ClusterFailure.self) { try ClusterDatabase(url: "mysql://x@y/z", app: "app", node: "d", address: "x") }
    }
}
