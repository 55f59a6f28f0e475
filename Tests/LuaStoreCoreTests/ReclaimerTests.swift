import Dispatch
import Foundation
@testable import LuaStoreCore
import LuaStoreTestSupport
import Testing

/// Counts its instances' ends: where each ended (on a queue carrying `Tracked.marker`, or not), and whether it
/// had been reduced by then.
final class Tracked: Sendable {
    static let marker = DispatchSpecificKey<String>()
    let id: Int
    let ends: Protected<[(id: Int, marked: String?)]>

    init(id: Int, ends: Protected<[(id: Int, marked: String?)]>) {
        self.id = id
        self.ends = ends
    }

    deinit {
        let marked = DispatchQueue.getSpecific(key: Tracked.marker)
        ends.withLock { $0.append((id, marked)) }
    }
}

/// How a store's executor gets rid of the actions it reduced (`Reclaimer`): big batches of actions holding heap
/// storage are destroyed on the reclaimer's queue, the rest where they are, and never more batches wait than
/// the bound.
@Suite(.tags(.concurrency)) struct ReclaimerTests {
    func trackedValues(_ count: Int, ends: Protected<[(id: Int, marked: String?)]>) -> [Tracked] {
        (0..<count).map { Tracked(id: $0, ends: ends) }
    }

    func reclaimerQueue(_ name: String) -> DispatchQueue {
        let queue = DispatchQueue(label: name)
        queue.setSpecific(key: Tracked.marker, value: name)
        return queue
    }

    @Test func aBigBatchEndsOnTheQueueAndLeavesAnEmptyArrayWithItsCapacity() async {
        let ends = Protected<[(id: Int, marked: String?)]>([])
        let reclaimer = Reclaimer(queue: reclaimerQueue("reclaimer"), smallestBatch: 64, mostInFlight: 8)
        var values = trackedValues(100, ends: ends)
        reclaimer.removeAll(from: &values)
        #expect(values.isEmpty)
        #expect(values.capacity >= 100, "the array keeps room for the next batch")
        #expect(await eventually { ends.value.count == 100 && reclaimer.batchesInFlight == 0 })
        #expect(Set(ends.value.map(\.id)) == Set(0..<100), "each value ends once")
        #expect(ends.value.allSatisfy { $0.marked == "reclaimer" }, "on the reclaimer's queue")
    }

    @Test func smallBatchesAndPlainValuesEndInPlace() {
        let ends = Protected<[(id: Int, marked: String?)]>([])
        let reclaimer = Reclaimer(queue: reclaimerQueue("reclaimer"), smallestBatch: 64, mostInFlight: 8)
        var values = trackedValues(63, ends: ends)
        reclaimer.removeAll(from: &values)
        #expect(values.isEmpty)
        #expect(ends.value.count == 63, "a batch smaller than smallestBatch ends before removeAll returns")
        #expect(ends.value.allSatisfy { $0.marked == nil })
        var numbers = Array(0..<1_000)
        reclaimer.removeAll(from: &numbers)
        #expect(numbers.isEmpty && numbers.capacity >= 1_000)
        #expect(reclaimer.batchesInFlight == 0, "values without heap storage are never handed over")
    }

    @Test func pastTheBoundTheCallerDestroysItsBatchItself() async {
        let ends = Protected<[(id: Int, marked: String?)]>([])
        let queue = reclaimerQueue("blocked reclaimer")
        let reclaimer = Reclaimer(queue: queue, smallestBatch: 4, mostInFlight: 2)
        queue.suspend() // (it runs nothing until resumed: what is handed over waits)
        var first = trackedValues(4, ends: ends)
        var second = trackedValues(4, ends: ends)
        reclaimer.removeAll(from: &first)
        reclaimer.removeAll(from: &second)
        #expect(reclaimer.batchesInFlight == 2)
        #expect(ends.value.isEmpty, "both batches wait behind the blocked queue")
        var third = (10..<14).map { Tracked(id: $0, ends: ends) }
        reclaimer.removeAll(from: &third)
        #expect(third.isEmpty)
        #expect(reclaimer.batchesInFlight == 2, "no third batch waits")
        #expect(ends.value.map(\.id).sorted() == Array(10..<14), "the third ended in place")
        #expect(ends.value.allSatisfy { $0.marked == nil })
        queue.resume()
        #expect(await eventually { ends.value.count == 12 && reclaimer.batchesInFlight == 0 })
    }

    @Test func aBatchOfOneValueDispatchedAgainEndsInPlace() {
        let ends = Protected<[(id: Int, marked: String?)]>([])
        let queue = reclaimerQueue("blocked reclaimer")
        let reclaimer = Reclaimer(queue: queue, smallestBatch: 4, mostInFlight: 8)
        queue.suspend() // (it runs nothing until resumed: what is handed over waits)
        defer { queue.resume() }
        let again = Tracked(id: 0, ends: ends)
        var values = [again, again, again, Tracked(id: 1, ends: ends), again, again]
        reclaimer.removeAll(from: &values)
        #expect(values.isEmpty)
        #expect(reclaimer.batchesInFlight == 0, "most of the batch repeats the value before: not handed over")
        #expect(ends.value.map(\.id) == [1], "the one value made anew ended in place")
        var fresh = (2..<8).map { Tracked(id: $0, ends: ends) } + [again]
        reclaimer.removeAll(from: &fresh)
        #expect(reclaimer.batchesInFlight == 1, "values made anew are handed over")
    }

    /// A store's executor hands a big batch of the actions it reduced over to its reclaimer, not a lone action.
    @Test func aStoreHandsABigBatchOfReducedActionsOver() async {
        struct Reduced: Sendable, Equatable { var ids: [Int] = [] }
        let ends = Protected<[(id: Int, marked: String?)]>([])
        let executor = reclaimerQueue("executor")
        var configuration = StoreConfiguration<Reduced, Tracked>(executor: executor)
        configuration.reclaimer = Reclaimer(queue: reclaimerQueue("store's reclaimer"))
        let root = RootStore(
            initialState: Reduced(),
            reducer: Reduce<Reduced, Tracked, Never> { state, action in
                state.ids.append(action.id)
                return []
            },
            configuration: configuration)
        // Queued while the executor is busy, so that the drain takes them as one batch.
        executor.sync {
            for id in 0..<500 { root.dispatch(Tracked(id: id, ends: ends)) }
        }
        #expect(await root.state().ids == Array(0..<500))
        #expect(await eventually { ends.value.count == 500 })
        #expect(Set(ends.value.map(\.id)) == Set(0..<500), "each action ends once")
        #expect(ends.value.allSatisfy { $0.marked == "store's reclaimer" })
        root.dispatch(Tracked(id: 500, ends: ends))
        #expect(await root.state().ids.count == 501)
        #expect(await eventually { ends.value.count == 501 })
        // (It ends on the executor, or on this thread if the executor let it go before this thread did.)
        #expect(ends.value.last?.marked != "store's reclaimer", "a batch of one is not handed over")
        root.shutdown()
    }

    /// A store configured without a reclaimer (a Swift store's default) destroys every batch itself.
    @Test func aStoreWithoutAReclaimerDestroysItsActionsItself() async {
        struct Reduced: Sendable, Equatable { var count = 0 }
        let ends = Protected<[(id: Int, marked: String?)]>([])
        let executor = reclaimerQueue("executor")
        let root = RootStore(
            initialState: Reduced(),
            reducer: Reduce<Reduced, Tracked, Never> { state, _ in
                state.count += 1
                return []
            },
            configuration: StoreConfiguration(executor: executor))
        executor.sync {
            for id in 0..<200 { root.dispatch(Tracked(id: id, ends: ends)) }
        }
        #expect(await root.state().count == 200)
        #expect(await eventually { ends.value.count == 200 })
        #expect(ends.value.allSatisfy { $0.marked == "executor" })
        root.shutdown()
    }
}
