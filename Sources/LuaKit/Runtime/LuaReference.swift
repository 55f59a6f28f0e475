import Synchronization
internal import LuaStoreConcurrency

/// A Lua value kept alive in its VM's registry (a function, a table, a chunk), for as long as the
/// reference lives. Dropping the last copy releases the registry slot at the VM's next call.
///
/// References belong to one VM; passing one to another VM is a programming error.
public final class LuaReference {
    let id: Int32
    let ledger: ReferenceLedger

    init(id: Int32, ledger: ReferenceLedger) {
        self.id = id
        self.ledger = ledger
    }

    deinit {
        ledger.release(id)
    }
}

/// Registry slots whose `LuaReference` is gone, waiting for the VM's thread to free them.
final class ReferenceLedger: Sendable {
    private let released = Protected<[Int32]>([])
    private let pending = Atomic<Int>(0)

    func release(_ id: Int32) {
        released.withLock { $0.append(id) }
        pending.add(1, ordering: .releasing)
    }

    func drain() -> [Int32] {
        guard pending.load(ordering: .acquiring) > 0 else { return [] }
        return released.withLock { ids in
            pending.subtract(ids.count, ordering: .relaxed)
            guard !ids.isEmpty else { return [] }
            defer { ids.removeAll(keepingCapacity: true) }
            return ids
        }
    }
}

/// A module namespace of a VM (see `LuaVM.makeNamespace()`): a `require` with its own module cache.
public final class LuaNamespace {
    let requireFunction: LuaReference

    init(require: LuaReference) { requireFunction = require }

    /// The namespace's `require` function, to give to code that loads modules in it.
    public var require: LuaReference { requireFunction }
}
