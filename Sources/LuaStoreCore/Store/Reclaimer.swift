import Dispatch
import Foundation
import Synchronization

/// Where a store's executor may send the actions it has reduced, a batch at a time, to be destroyed off its own
/// thread (`StoreConfiguration.reclaimer`; a store whose actions are mostly made anew per dispatch uses
/// `shared`).
///
/// Destroying an action made anew costs the thread that does it a good part of what reducing it did: a store of
/// fresh four-field dictionary actions spent ≈ 9 % of its executor's time in its release (the generic destruction of
/// its fields, and a `free` into the dispatching thread's heap). A busy store's executor is what bounds its
/// throughput, and the threads that dispatch to it usually have time to spare. So a batch of at least
/// `smallestBatch` actions made anew goes to a serial queue of utility priority, one for the process. What is
/// destroyed where it is, as before:
/// - smaller batches (a store that keeps up with its dispatchers takes one action at a time);
/// - values without heap storage;
/// - a batch in which most actions are the very value before them (one action dispatched again and again):
///   destroying those only counts references down, which from a third thread would contend for the one count
///   with the dispatching thread;
/// - any batch while `mostInFlight` batches wait already (a machine with no time to spare), so the memory
///   waiting stays bounded.
@usableFromInline
package final class Reclaimer: Sendable {
    /// The process's reclaimer.
    package static let shared = Reclaimer(queue: DispatchQueue(label: "LuaStore.reclaimer", qos: .utility))

    /// Batches smaller than this are destroyed in place: handing one over costs about what destroying a few
    /// dozen actions does.
    @usableFromInline let smallestBatch: Int
    let mostInFlight: Int
    private let queue: DispatchQueue
    private let inFlight = Atomic<Int>(0)

    init(queue: DispatchQueue, smallestBatch: Int = 64, mostInFlight: Int = 8) {
        self.queue = queue
        self.smallestBatch = smallestBatch
        self.mostInFlight = mostInFlight
    }

    /// Empties `values`: hands its elements over to the queue, leaving an empty array with room for as many,
    /// when they are worth it (see the type) and the queue has room; otherwise destroys them in place.
    @inlinable
    func removeAll<Value: Sendable>(from values: inout [Value]) {
        if values.count >= smallestBatch, !_isPOD(Value.self), Self.mostlyMadeAnew(values), handOver(&values) { return }
        values.removeAll(keepingCapacity: true)
    }

    /// Whether fewer than half of `values` are, bit for bit, the value before them (the same storage: the same
    /// value dispatched again).
    @usableFromInline
    static func mostlyMadeAnew<Value>(_ values: [Value]) -> Bool {
        let size = MemoryLayout<Value>.size, stride = MemoryLayout<Value>.stride
        return values.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress, size > 0 else { return false }
            var repeats = 0
            for index in 1..<values.count where memcmp(base + index * stride, base + (index - 1) * stride, size) == 0 {
                repeats += 1
            }
            return 2 * repeats < values.count
        }
    }

    @usableFromInline
    func handOver<Value: Sendable>(_ values: inout [Value]) -> Bool {
        guard inFlight.add(1, ordering: .relaxed).newValue <= mostInFlight else {
            inFlight.subtract(1, ordering: .relaxed)
            return false
        }
        let batch = Batch(values)
        values = []
        values.reserveCapacity(batch.values.count)
        queue.async {
            batch.values = []
            self.inFlight.subtract(1, ordering: .relaxed)
        }
        return true
    }

    /// Returns once every batch handed over before the call is destroyed: for a benchmark, which counts that
    /// work in the time of what made it.
    package func settle() { queue.sync {} }

    /// Batches handed over whose elements are not destroyed yet.
    var batchesInFlight: Int { inFlight.load(ordering: .relaxed) }

    /// A batch on its way: the queue's block empties it, so that its elements are gone before the count of
    /// batches in flight goes down.
    fileprivate final class Batch<Value: Sendable> {
        var values: [Value]
        init(_ values: [Value]) { self.values = values }
    }
}

// The executor makes a batch and hands it to the queue; only the queue's block touches it after.
extension Reclaimer.Batch: @unchecked Sendable {}
