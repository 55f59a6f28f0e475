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

/// The engine's readers: for each, what it shows and the `ObserverDelivery` (LuaStoreCore's, the one every
/// observer is told through) that its values go to. The runtime knows a reader by its ID; the engine's thread
/// owns this table.
struct ReaderTable {
    /// An observer attached to a reader.
    struct Reader {
        let kind: ReaderKind
        let delivery: ObserverDelivery<LuaValue>
    }

    private var readers: [Int64: Reader] = [:]
    private var lastID: Int64 = 0

    /// A fresh reader ID (positive: the runtime's one-off evaluations use negative ones).
    mutating func makeID() -> Int64 {
        lastID += 1
        return lastID
    }

    subscript(id: Int64) -> Reader? {
        get { readers[id] }
        set { readers[id] = newValue }
    }

    /// Forgets the reader `id`; whether it was there.
    mutating func remove(_ id: Int64) -> Bool { readers.removeValue(forKey: id) != nil }

    /// The IDs and kinds of every reader.
    var all: [(id: Int64, kind: ReaderKind)] { readers.map { ($0.key, $0.value.kind) } }
}
