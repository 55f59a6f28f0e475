// A Swift program hosting a scripted app (docs/swift-api.md, "Swift API"): the app's props as an `@Observable` model that a
// "view" draws a frame of whenever it changed, and actions sent with `await store.send`, which says what each did.
//
//     swift run swift-host [APP_DIR]        (default: samples/counter)
import Dispatch
import Foundation
import LuaKit
import LuaStoreScripting
import Observation

/// The counter's props, decoded.
struct CounterProps: Decodable, Sendable, Equatable {
    var count: Int
    var label: String
}

/// A view that draws a frame when the model it shows changed (as a UI toolkit's render loop does), on the
/// queue the model is set on.
final class CounterView: @unchecked Sendable { // (touched on `queue` only)
    let model: ObservedProps<CounterProps>
    let queue: DispatchQueue
    private var dirty = true

    init(_ model: ObservedProps<CounterProps>, on queue: DispatchQueue) {
        self.model = model
        self.queue = queue
    }

    /// Draws, if the model changed since the last frame, and watches it again.
    func frame() {
        queue.sync {
            guard dirty else { return }
            dirty = false
            withObservationTracking {
                if let props = model.value { print("view: \(props.label)") }
            } onChange: { [self] in dirty = true }
        }
    }
}

let app = URL(fileURLWithPath: CommandLine.arguments.dropFirst().first ?? "samples/counter")
let store: ScriptedStore
do {
    // (A reducer's failure comes back from `send`; other failures — props, effects — are said here.)
    let options = ScriptedStoreOptions(failures: { failure in
        if failure.stage != .reduce { FileHandle.standardError.write(Data("swift-host: \(failure)\n".utf8)) }
    })
    store = try await ScriptedStore(app: app, options: options)
} catch {
    FileHandle.standardError.write(Data("swift-host: \(error)\n".utf8))
    exit(2)
}
let queue = DispatchQueue(label: "view")
let model = ObservedProps(store, as: CounterProps.self, on: queue)
let view = CounterView(model, on: queue)
while queue.sync(execute: { model.updates }) == 0 { try await Task.sleep(for: .milliseconds(1)) } // (the first props)
view.frame()

let actions: [LuaValue] = [["type": "increment"], ["type": "increment", "by": 4], ["type": "reset"], ["type": "decrement", "by": "two"]]
for action in actions {
    // `send` returns once the props after the action were set on the model: the next frame shows them.
    switch await store.send(action) {
    case .applied(let entry):
        let changes = entry.changes.map { "\(LuaPath.render(root: "state", keys: $0.path)) = \($0.value ?? .nil)" }
        print("sent \(action): \(changes.isEmpty ? "no change" : changes.joined(separator: ", "))")
    case .failed(let failure):
        print("sent \(action): failed: \(failure.error)")
    case .held, .dropped:
        print("sent \(action): not reduced")
    }
    view.frame()
}
store.shutdown()
