import Dispatch
import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTestSupport
import Observation
import Testing

/// `ObservedProps`: an app's (or a child store's) props as an `@Observable` model, tracked with
/// `withObservationTracking` as views track it.
@Suite(.tags(.concurrency)) struct ObservedPropsTests {
    struct Counter: Decodable, Equatable, Sendable { var count: Int }
    struct Draft: Decodable, Equatable, Sendable { var text: String; var count: Int }

    /// Tracks `read` on `queue` (where the model is set); returns how many changes it heard of since.
    final class Tracker: Sendable {
        let changes = Protected(0)
        func track(on queue: DispatchQueue, _ read: @escaping @Sendable () -> Void) {
            queue.sync {
                withObservationTracking { read() } onChange: { [changes] in changes.withLock { $0 += 1 } }
            }
        }
    }

    @Test func changesOncePerDistinctPropsAndNeverForEqualOnes() async throws {
        let folder = try AppFolder(["app.lua": ChildStoreTests.app, "editor.lua": ChildStoreTests.editor])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let queue = DispatchQueue(label: "observed-props-tests")
        let model = ObservedProps(store, as: Counter.self, on: queue)
        #expect(await eventually { queue.sync { model.value } == Counter(count: 0) })
        let tracker = Tracker()
        tracker.track(on: queue) { _ = model.value }
        store.dispatch(["type": "increment"])
        #expect(await eventually { queue.sync { model.value } == Counter(count: 1) })
        #expect(tracker.changes.value == 1, "one change for one new props")

        let quiet = Tracker()
        quiet.track(on: queue) { _ = model.value }
        store.dispatch(["type": "noted"]) // changes the state, not the props
        _ = await store.send(["type": "noted"])
        queue.sync {}
        #expect(quiet.changes.value == 0, "equal props change nothing")
        #expect(queue.sync { model.updates } == 2)
        #expect(queue.sync { model.failure } == nil)
    }

    @Test func childStorePropsAndDecodingFailures() async throws {
        let folder = try AppFolder(["app.lua": ChildStoreTests.app, "editor.lua": ChildStoreTests.editor])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let child = try await store.child(module: "editor")
        let queue = DispatchQueue(label: "observed-child-props-tests")
        let draft = ObservedProps(child, as: Draft.self, on: queue)
        let wrong = ObservedProps(store, as: Draft.self, on: queue) // the app's props have no text
        let tracker = Tracker()
        #expect(await eventually { queue.sync { draft.value } == Draft(text: "", count: 0) })
        tracker.track(on: queue) { _ = draft.value }
        child.dispatch(["type": "draftEdited", "text": "Buy milk"])
        #expect(await eventually { queue.sync { draft.value } == Draft(text: "Buy milk", count: 0) })
        #expect(tracker.changes.value == 1)
        #expect(await eventually { queue.sync { wrong.failure } != nil })
        #expect(queue.sync { wrong.value } == nil)
        #expect(queue.sync { wrong.failure?.error.message }?.contains("text") == true)
    }
}
