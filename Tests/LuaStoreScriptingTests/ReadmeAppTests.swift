import Foundation
import LuaKit
@testable import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The app in README's "Scripted apps" section, and the counter sample, run as written.
@Suite struct ReadmeAppTests {
    static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    @Test func readmeAppRunsAsWritten() async throws {
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "```lua\n-- app.lua\n"))
        let end = try #require(readme.range(of: "```", range: start.upperBound..<readme.endIndex))
        let folder = try AppFolder(["app.lua": String(readme[start.upperBound..<end.lowerBound])])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        recorder.observe(store)
        store.dispatch(["type": "increment"])
        store.dispatch(["type": "todoAdded", "title": "Buy milk"])
        #expect(await eventually { recorder.props.value.last == ["count": 1, "open": 1] })
        #expect(await eventually { recorder.logs.value.contains("added Buy milk") })
        store.dispatch(["type": "reset"])
        #expect(await eventually { recorder.props.value.last == ["count": 0, "open": 0] })
        #expect(recorder.failures.value.isEmpty)
    }

    @Test func counterSampleCounts() async throws {
        let recorder = Recorder()
        let store = try await ScriptedStore(app: Self.packageRoot.appendingPathComponent("samples/counter"), options: recorder.options)
        recorder.observe(store)
        store.dispatch(["type": "increment"])
        store.dispatch(["type": "increment", "by": 5])
        store.dispatch(["type": "decrement"])
        #expect(await eventually { recorder.props.value.last == ["count": 5, "label": "5 clicks"] })
    }
}

/// The stopwatch sample's `luastore.timer` subscription in a live store: launched by `start`, ticking on its
/// own, cancelled by `stop`.
@Suite struct LuaTimerTests {
    @Test func aTimerSubscriptionTicksWhileTheStateAsksForIt() async throws {
        let store = try await ScriptedStore(app: ReadmeAppTests.packageRoot.appendingPathComponent("samples/stopwatch"),
                                            options: Recorder().options)
        #expect(await store.root.runningSubscriptions().isEmpty)
        store.dispatch(["type": "start"])
        #expect(await eventually { (try? await store.state()["tenths"])?.integer.map { $0 >= 3 } == true },
                "three ticks of 0.1 s, sent by the timer")
        #expect(await store.root.runningSubscriptions().keys.sorted() == ["ticker"])
        store.dispatch(["type": "stop"])
        let stopped = try await store.state()["tenths"]
        #expect(await store.root.runningSubscriptions().isEmpty, "stop cancelled the timer")
        #expect(try await store.props()["running"] == false)
        #expect(stopped.integer.map { $0 >= 3 } == true)
        store.shutdown()
    }
}
