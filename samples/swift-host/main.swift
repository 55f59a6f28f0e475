// A Swift program hosting a scripted app on the Swift types of its contract (docs/contracts.md, docs/swift-api.md):
// samples/todos's props as an `@Observable` model of `TodosProps` that a "view" draws a frame of whenever it changed,
// and `TodosAction` cases sent with `await store.send`, which says what each did. The types are written at build time
// from the app's LuaLS annotations by the LuaStoreSwiftTypes plugin (`luastore-types.json` beside this file names
// the app): rename a props field in samples/todos and this file no longer compiles.
//
//     swift run swift-host        (from the package's root)
import Dispatch
import Foundation
import LuaKit
import LuaStoreScripting
import Observation

/// A view that draws a frame when the model it shows changed (as a UI toolkit's render loop does), on the
/// queue the model is set on.
final class TodosView: @unchecked Sendable { // (touched on `queue` only)
    let model: ObservedProps<TodosProps>
    let queue: DispatchQueue
    private var dirty = true

    init(_ model: ObservedProps<TodosProps>, on queue: DispatchQueue) {
        self.model = model
        self.queue = queue
    }

    /// Draws, if the model changed since the last frame, and watches it again.
    func frame() {
        queue.sync {
            guard dirty else { return }
            dirty = false
            withObservationTracking {
                guard let props = model.value else { return }
                let items = props.items.map { "[\($0.done ? "x" : " ")] \($0.title)" }
                print("view: \(props.filter.rawValue): \(items.isEmpty ? "nothing" : items.joined(separator: ", ")) — \(props.left)")
            } onChange: { [self] in dirty = true }
        }
    }
}

// (The app saves its list through the storage effect: into a folder of this run's own.)
let storage = FileManager.default.temporaryDirectory.appendingPathComponent("swift-host-\(getpid())")
defer { try? FileManager.default.removeItem(at: storage) }
let store: ScriptedStore
do {
    // (What a reducer did, or why an action was refused, comes back from `send`; other failures are said here.)
    var options = ScriptedStoreOptions(failures: { failure in
        if failure.stage != .reduce && failure.stage != .undeclared {
            FileHandle.standardError.write(Data("swift-host: \(failure)\n".utf8))
        }
    })
    options.storageFolder = storage
    store = try await ScriptedStore(app: URL(fileURLWithPath: "samples/todos"), options: options)
} catch {
    FileHandle.standardError.write(Data("swift-host: \(error)\n".utf8))
    exit(2)
}
let queue = DispatchQueue(label: "view")
let model = ObservedProps<TodosProps>(store, on: queue)
let view = TodosView(model, on: queue)
while queue.sync(execute: { model.updates }) == 0 { try await Task.sleep(for: .milliseconds(1)) } // (the first props)
view.frame()

/// What became of an action, in a line.
func report(_ result: SendResult, of action: String) {
    switch result {
    case .applied(let entry):
        let changes = entry.changes.map { "\(LuaPath.render(root: "state", keys: $0.path)) = \($0.value ?? .nil)" }
        print("sent \(action): \(changes.isEmpty ? "no change" : changes.joined(separator: ", "))")
    case .failed(let failure):
        print("sent \(action): \(failure.stage == .undeclared ? "refused" : "failed"): \(failure.error.message)")
    case .held, .dropped:
        print("sent \(action): not reduced")
    }
}

let actions: [TodosAction] = [.todoAdded(title: "milk"), .todoAdded(title: "bread"), .todoToggled(id: 1), .filterChanged(filter: "active")]
for action in actions {
    // `send` returns once the props after the action were set on the model: the next frame shows them.
    report(await store.send(action), of: "\(action)")
    view.frame()
}
// An action the contract does not declare, as a host without the generated types could send it: refused, naming why.
let untyped: LuaValue = ["type": "todoAdded", "title": 42]
report(await store.send(untyped), of: "\(untyped)")
view.frame()
let props = try await store.decodedProps()
print("props: \(props.items.count) shown, \(props.left), can clear: \(props.canClear)")
store.shutdown()
