import Dispatch
import Foundation
import LuaKit
import LuaStoreConcurrency
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// A scripted app seen as LuaStoreCore's `Store` (its state: the props): observers, scopes and presenters are
/// told as every observer is — one answer to "how are observers notified".
@Suite(.tags(.concurrency)) struct PropsAsStoreTests {
    struct Failure: Error, CustomStringConvertible { var description: String { "the observer gave up" } }

    @Test func observersScopesAndPresentersWorkOnAScriptedStore() async throws {
        let folder = try AppFolder(["app.lua": ChildStoreTests.app, "editor.lua": ChildStoreTests.editor])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        defer { store.shutdown() }
        let handle: Store<LuaValue, LuaValue> = store.store

        // An observer without an equating hears every value the props' reader gives (it runs again only when
        // what it read changed): a change of the state that props do not read gives nothing.
        let every = Protected<[LuaValue]>([])
        handle.subscribe(Observer { props in every.withLock { $0.append(props) }; return .active })
        // A scope with its own equating: the count's parity.
        let parities = Protected<[Bool]>([])
        handle.scope { ($0["count"].integer ?? 0) % 2 == 0 }
            .subscribe(Observer(removeDuplicates: .asEquatable) { even in parities.withLock { $0.append(even) }; return .active })
        // A presenter: props of the props, made on a presentation queue, delivered on a queue of the test's own.
        let labels = Protected<[String]>([])
        let delivery = DispatchQueue(label: "props-as-store-delivery")
        handle.subscribe(Presenter<LuaValue, String>(
            removePropsDuplicates: .asEquatable, props: { "count \($0["count"].integer ?? -1)" }, deliverOn: delivery
        ) { label in labels.withLock { $0.append(label) }; return .active })
        // An observer that stops after two values, and one whose body throws (reported; it stays subscribed).
        let twice = Protected(0)
        handle.subscribe(Observer { _ in twice.withLock { $0 += 1; return $0 == 2 ? .dead : .active } })
        let throwing = Protected(0)
        handle.subscribe(Observer { _ in throwing.withLock { $0 += 1 }; throw Failure() })

        handle.dispatch(["type": "increment"])
        handle.dispatch(["type": "noted"])
        _ = await store.send(["type": "increment"])
        _ = await store.send(["type": "increment"])
        await store.barrier()
        delivery.sync {}
        // (A burst may be notified once: the first two actions may come as one; each send waits for its own.)
        #expect(every.value == [["count": 0], ["count": 1], ["count": 2], ["count": 3]] ||
                every.value == [["count": 0], ["count": 2], ["count": 3]], "\(every.value)")
        #expect(parities.value.first == true && parities.value.last == false)
        #expect(zip(parities.value, parities.value.dropFirst()).allSatisfy { $0 != $1 }, "equal parities are skipped")
        #expect(await eventually { labels.value.last == "count 3" })
        #expect(twice.value == 2, "an observer that answered .dead hears nothing more")
        #expect(throwing.value == every.value.count, "a throwing observer stays subscribed")
        let failures = recorder.failures.value
        #expect(failures.count == throwing.value)
        #expect(failures.allSatisfy { $0.stage == .observer && $0.error.message.contains("the observer gave up") })
    }

    @Test func aChildStoreIsAStoreOfItsProps() async throws {
        let folder = try AppFolder(["app.lua": ChildStoreTests.app, "editor.lua": ChildStoreTests.editor])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        defer { store.shutdown() }
        let child = try await store.child(module: "editor")
        let texts = Protected<[String]>([])
        child.store.scope { $0["text"].string ?? "?" }
            .subscribe(Observer(removeDuplicates: .asEquatable) { text in texts.withLock { $0.append(text) }; return .active })
        child.store.dispatch(["type": "draftEdited", "text": "Buy milk"])
        store.dispatch(["type": "increment"]) // the child's props change (count), its text does not
        await store.barrier()
        #expect(await eventually { texts.value == ["", "Buy milk"] })
        await store.barrier()
        #expect(texts.value == ["", "Buy milk"])
    }
}
