import Foundation
import LuaKit
import LuaStoreTesting
import XCTest

/// The test store under XCTest: a step that holds passes, one that does not throws, which fails the test.
final class ScriptedTestStoreXCTests: XCTestCase {
    func testStepsUnderXCTest() async throws {
        let folder = try ScriptedTestStoreTests.makeApp()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try await ScriptedTestStore(app: folder)
        try await store.send(["type": "add", "title": "Read"]) { $0["todos"][1] = ["title": "Read", "done": false] }
        do {
            try await store.send(["type": "toggle", "index": 1])
            XCTFail("an unstated change must throw")
        } catch let failure as TestStoreFailure {
            XCTAssertTrue(failure.message.hasSuffix("+ state.todos[1].done = true"), failure.message)
        }
        try await store.finish(timeout: .seconds(60))
    }
}
