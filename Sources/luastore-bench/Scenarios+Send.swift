import Foundation
import LuaKit
import LuaStoreCore
import LuaStorePersistence
import LuaStoreScripting

/// Actions sent and answered one by one (`ScriptedStore.submit`, which `send` and `luastore serve` use), on a
/// durable store, against the same store taking the same actions dispatched: what answering each action costs.
extension Scenarios {
    /// How actions reach the store in a `send` row.
    enum Sending { case submitted, dispatched }

    /// ns per action of a counter on a durable (`batch`) store whose observers hear every action, as a server's
    /// store is kept: each sent with `submit` (an id of its own) and `inFlight` of them unanswered at a time — the
    /// next one sent as each is answered, until `actions` were — or all dispatched at once; until the last is
    /// answered (committed, for the dispatched ones).
    func sendCost(_ sending: Sending, actions: Int, inFlight: Int = 16) async throws -> Double {
        let folder = try app("send-counter", Self.countingApp)
        var options = self.options
        options.notification = .everyAction
        let database = try StoreDatabase(path: databasePath("send.db"), app: "send-counter", durability: .batch)
        options.persistence = database
        let store = try await ScriptedStore(app: folder, options: options)
        try database.waitUntilCommitted(through: 0)
        let answered = Arrival()
        let result = try await Harness.nanoseconds(operations: actions) {
            switch sending {
            case .submitted:
                let sent = Protected(0)
                // (Each answer sends the next: on the store's thread, as a server's event loop would right after.)
                @Sendable func sendNext() {
                    guard let number = sent.withLock({ count -> Int? in
                        guard count < actions else { return nil }
                        count += 1
                        return count
                    }) else { return }
                    store.submit(["type": "increment"], id: "a\(number)") { _ in
                        answered.count()
                        sendNext()
                    }
                }
                for _ in 0..<inFlight { sendNext() }
                await answered.wait(for: Int64(actions))
            case .dispatched:
                for _ in 0..<actions { store.dispatch(["type": "increment"]) }
                try database.waitUntilCommitted(through: UInt64(actions))
            }
        }
        if sending == .submitted { try database.waitUntilCommitted(through: UInt64(actions)) }
        store.shutdown()
        await store.barrier()
        if let failure = database.close() { throw failure }
        return result
    }

    func send() async throws -> [Scenario] {
        let actions = quick ? 2_000 : 40_000
        let (submitted, dispatched, ratio) = try await Harness.alternate(
            rounds: rounds, sides: sides,
            { try await sendCost(.submitted, actions: actions) },
            { try await sendCost(.dispatched, actions: actions) })
        return [
            Scenario(name: "send.submitted_ns_per_action", value: submitted, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "send.dispatched_ns_per_action", value: dispatched, unit: "ns", goal: "—", pass: nil),
            Scenario(name: "send.submitted_vs_dispatched_ratio", value: ratio, unit: "×", goal: "—", pass: nil),
        ]
    }
}
