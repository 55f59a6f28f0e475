import Foundation
import LuaStoreTestSupport
import Testing

/// `samples/swift-host`, the sample Swift host on samples/todos's generated types: its observable model renders every
/// distinct props, each `await send` of a `TodosAction` says what it did, and an action the contract does not declare
/// is refused naming why — run as a user runs it, from the package's root.
@Suite struct SwiftHostSampleTests {
    @Test func theSampleHostRendersAndSends() async throws {
        let host = CLI.buildFolder.appendingPathComponent("swift-host")
        let run = try await runChildProcess(host, [], directory: CLI.packageRoot)
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == """
            view: all: nothing — 0 items left
            sent todoAdded(title: "milk"): state.todos[1] = {done = false, id = 1, title = "milk"}, state.nextId = 2
            view: all: [ ] milk — 1 item left
            sent todoAdded(title: "bread"): state.todos[2] = {done = false, id = 2, title = "bread"}, state.nextId = 3
            view: all: [ ] milk, [ ] bread — 2 items left
            sent todoToggled(id: 1): state.todos[1].done = true
            view: all: [x] milk, [ ] bread — 1 item left
            sent filterChanged(filter: "active"): state.filter = "active"
            view: active: [ ] bread — 1 item left
            sent {title = 42, type = "todoAdded"}: refused: action.title is 42, not string
            props: 1 shown, 1 item left, can clear: true

            """)
        #expect(run.errors.isEmpty, "\(run.errors)")
    }
}
