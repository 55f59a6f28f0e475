import Foundation
import LuaKit
import LuaStoreDevtools
import LuaStoreScripting
import RawHTTPClient

/// The devtools: what an open page costs the store, how soon it hears of an action, and how fast it pages and
/// filters a long session.
extension Scenarios {
    /// A store with the devtools on (`--devtools`: the journal kept, a history for time travel, the server) and
    /// a page connected to the live stream that keeps up (a thread reading every byte).
    struct DevtoolsSetup {
        let store: ScriptedStore
        let server: DevtoolsServer
        let token: String
        let page: RawSocket?

        func stop() async {
            page?.close()
            await server.stop()
            store.shutdown()
        }
    }

    func devtoolsSetup(folder: URL, keep: Int, page: Bool) async throws -> DevtoolsSetup {
        let journal = DevtoolsJournal(capacity: keep)
        var options = self.options
        options.journal = { journal.hear($0) }
        options.historyEntries = keep
        let store = try await ScriptedStore(app: folder, options: options)
        let server = try await DevtoolsServer.start(store: store, journal: journal)
        let token = String(server.url.split(separator: "=").last ?? "")
        var socket: RawSocket?
        if page {
            let connected = try RawSocket(port: server.port)
            try connected.write("GET /api/live?token=\(token) HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\nUpgrade: websocket\r\n"
                                + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            Thread.detachNewThread { while (try? connected.readSome()) != nil {} }
            socket = connected
        }
        return DevtoolsSetup(store: store, server: server, token: token, page: socket)
    }

    /// What is on while toggling a 100,000-item list.
    enum DevtoolsSide {
        /// The devtools' journal and history (what `--devtools` keeps), a server, and a page open on the live
        /// stream that keeps up.
        case pageOpen
        /// The devtools' journal and history, no server, no page.
        case kept
        /// A journal nobody keeps (what journaling itself costs).
        case journalOnly
    }

    func devtoolsToggleCost(items: Int, actions: Int, side: DevtoolsSide) async throws -> Double {
        let folder = try app("list\(items)", Self.listApp(items: items))
        var setup: DevtoolsSetup?
        let store: ScriptedStore
        switch side {
        case .pageOpen:
            setup = try await devtoolsSetup(folder: folder, keep: 100_000, page: true)
            store = setup!.store
        case .kept:
            let journal = DevtoolsJournal(capacity: 100_000)
            var options = self.options
            options.journal = { journal.hear($0) }
            options.historyEntries = 100_000
            store = try await ScriptedStore(app: folder, options: options)
        case .journalOnly:
            var options = self.options
            options.journal = { _ in }
            store = try await ScriptedStore(app: folder, options: options)
        }
        let arrival = await Self.arrival(of: store)
        let toggles: [LuaValue] = (0..<actions).map { ["type": "toggle", "id": .integer(Int64($0 * 7919 % items + 1))] }
        let result = await Harness.nanoseconds(operations: actions) {
            for action in toggles { store.dispatch(action) }
            await arrival.wait(for: Int64(actions))
        }
        if let setup { await setup.stop() } else { store.shutdown() }
        return result
    }

    func devtools() async throws -> [Scenario] {
        let items = quick ? 10_000 : 100_000
        let actions = quick ? 2_000 : 20_000
        let (_, _, pageRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await devtoolsToggleCost(items: items, actions: actions, side: .pageOpen) },
            { try await devtoolsToggleCost(items: items, actions: actions, side: .kept) })
        let (_, _, keptRatio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await devtoolsToggleCost(items: items, actions: actions, side: .kept) },
            { try await devtoolsToggleCost(items: items, actions: actions, side: .journalOnly) })

        // A long session: how soon a page hears of a new action, and what paging and filtering cost.
        let folder = try app("list\(items)", Self.listApp(items: items))
        let setup = try await devtoolsSetup(folder: folder, keep: 100_000, page: false)
        let entries = quick ? 10_000 : 100_000
        for index in 0..<entries { setup.store.dispatch(["type": "toggle", "id": .integer(Int64(index % items + 1))]) }
        await setup.store.barrier()
        let (port, token) = (setup.server.port, setup.token)
        let live = try await offPool { try RawWebSocket(port: port, target: "/api/live?token=\(token)") }
        _ = try await offPool { try live.readText() } // what is kept, at once
        var latencies: [Double] = []
        for round in 0..<(quick ? 10 : 40) {
            let started = ContinuousClock.now
            setup.store.dispatch(["type": "toggle", "id": .integer(Int64(round + 1))])
            let sequence = "\"last\":\(entries + round + 1),"
            while !(try await offPool { try live.readText() }).contains(sequence) {}
            latencies.append(Harness.milliseconds(.now - started))
        }
        live.close()
        func milliseconds(_ target: String) async throws -> Double {
            try await Harness.median(rounds: 5) {
                let started = ContinuousClock.now
                let response = try await offPool { try RawHTTP.request("GET", target, port: port, token: token) }
                guard response.status == 200 else { throw RawSocket.Failure("\(target): \(response.status) \(response.body)") }
                return Harness.milliseconds(.now - started)
            }
        }
        let page = try await milliseconds("/api/entries?offset=\(entries / 2)&limit=100")
        let started = ContinuousClock.now
        _ = try await offPool { try RawHTTP.request("GET", "/api/entries?text=%22id%22%3A77&limit=100", port: port, token: token) }
        let filter = Harness.milliseconds(.now - started)
        let entry = try await milliseconds("/api/entry?seq=\(entries - 1_000)")
        let farEntry = try await milliseconds("/api/entry?seq=\(entries / 2)")
        await setup.stop()
        let latency = Harness.median(latencies)
        return [
            Scenario(name: "devtools.page_open_ratio_100k", value: pageRatio, unit: "×", goal: "≤ 1.2", pass: pageRatio <= 1.2),
            Scenario(name: "devtools.kept_vs_journal_ratio_100k", value: keptRatio, unit: "×", goal: "—", pass: nil),
            Scenario(name: "devtools.live_latency_ms", value: latency, unit: "ms", goal: "≤ 100", pass: latency <= 100),
            Scenario(name: "devtools.page_ms_100k", value: page, unit: "ms", goal: "≤ 50", pass: page <= 50),
            Scenario(name: "devtools.first_filter_ms_100k", value: filter, unit: "ms", goal: "≤ 1000", pass: filter <= 1000),
            Scenario(name: "devtools.entry_1k_back_ms", value: entry, unit: "ms", goal: "≤ 50", pass: entry <= 50),
            Scenario(name: "devtools.entry_50k_back_ms", value: farEntry, unit: "ms", goal: "—", pass: nil),
        ]
    }
}
