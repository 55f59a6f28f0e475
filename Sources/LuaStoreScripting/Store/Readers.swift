import LuaKit
import LuaStoreCore

/// What a reader shows: the app's props, the value at a path in the state, or a child store's props.
enum ReaderKind {
    case props
    case path([LuaKey])
    case childProps(Int64)

    /// The stage a failure of this reader is reported at.
    var stage: ScriptFailure.Stage {
        switch self {
        case .props, .childProps: .props
        case .path: .selector
        }
    }

    /// How its value is named in errors (`props`, `state.todos[3]`).
    var rootName: String {
        switch self {
        case .props, .childProps: "props"
        case .path(let keys): LuaPath.render(root: "state", keys: keys)
        }
    }
}

/// The engine's readers, a part of the engine (`ScriptEngine.readers`): for each, what it shows and the
/// `ObserverDelivery` (LuaStoreCore's, the one every observer is told through) that its values go to; and whether
/// the last run left the readers settled. The runtime knows a reader by its ID; the engine's thread owns this.
struct Readers {
    /// An observer attached to a reader.
    struct Reader {
        let kind: ReaderKind
        let delivery: ObserverDelivery<LuaValue>
    }

    // (Kept by ID in two arrays, in order — IDs only grow, so a new reader is appended — and found by a binary
    // search: a value delivered finds its reader twice, and hashing an ID for a dictionary cost more than the
    // search among the few readers a store has.)
    private var ids: [Int64] = []
    private var entries: [Reader] = []
    private var lastID: Int64 = 0
    /// The VM's call count (`LuaVM.calls`) right after a run that ran the readers within it and left nothing for
    /// a flush: while nothing else has called into the VM since, a flush has nothing to do.
    private var settledCalls: UInt64?

    /// A fresh reader ID (positive: the runtime's one-off evaluations use negative ones).
    mutating func makeID() -> Int64 {
        lastID += 1
        return lastID
    }

    /// Where `id` is in `ids`, or where it would go.
    private func position(of id: Int64) -> (index: Int, found: Bool) {
        var low = 0, high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < id { low = middle + 1 } else { high = middle }
        }
        return (low, low < ids.count && ids[low] == id)
    }

    subscript(id: Int64) -> Reader? {
        get {
            let (index, found) = position(of: id)
            return found ? entries[index] : nil
        }
        set {
            let (index, found) = position(of: id)
            switch (found, newValue) {
            case (true, let reader?): entries[index] = reader
            case (true, nil): ids.remove(at: index); entries.remove(at: index)
            case (false, let reader?): ids.insert(id, at: index); entries.insert(reader, at: index)
            case (false, nil): break
            }
        }
    }

    /// Forgets the reader `id`; whether it was there.
    mutating func remove(_ id: Int64) -> Bool {
        guard self[id] != nil else { return false }
        self[id] = nil
        return true
    }

    /// What reader `id` shows (nil: no such reader).
    func kind(of id: Int64) -> ReaderKind? {
        let (index, found) = position(of: id)
        return found ? entries[index].kind : nil
    }

    /// The IDs and kinds of every reader.
    var all: [(id: Int64, kind: ReaderKind)] { zip(ids, entries).map { ($0, $1.kind) } }

    /// A run left the readers settled (nothing for a flush) when the VM's call count was `calls`, or not (`nil`).
    mutating func settled(atCalls calls: UInt64?) { settledCalls = calls }

    /// Whether the readers are settled while the VM's call count is `calls` (nothing called into it since).
    func areSettled(atCalls calls: UInt64) -> Bool { settledCalls == calls }
}
