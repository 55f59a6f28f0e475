import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// The one replayer (`luastore replay`, the devtools' import and replay use it): a store of its own replays
/// actions from a state, and each action's entry is compared with what was recorded — outcome, failure, changes,
/// commands, props, in that order.
@Suite struct ReplayerTests {
    static let app = """
        local luastore = require("luastore")
        local app = {}
        function app.init() return { count = 0 } end
        function app.reduce(state, action)
          if action.type == "add" then state.count = state.count + (action.by or 1)
          elseif action.type == "ask" then return nil, { luastore.log("asked " .. state.count) }
          elseif action.type == "boom" then error("boom " .. state.count) end
        end
        function app.props(state) return { count = state.count } end
        return app
        """

    @Test func eachActionIsComparedWithWhatWasRecorded() async throws {
        let folder = try AppFolder(["app.lua": Self.app])
        defer { folder.remove() }
        let replayer = try await Replayer(app: folder.url, from: ["count": 10], options: Recorder().options)
        defer { replayer.store.shutdown() }
        let now = await replayer.reduce([["type": "add"], ["type": "ask"], ["type": "boom"], ["type": "add", "by": 5]])
        #expect(now.count == 4)
        #expect(now.allSatisfy { $0 != nil })
        #expect(try await replayer.store.state() == ["count": 16], "it started from the given state, not init's")

        let count = StateChange(path: ["count"], value: 11)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [count]), now: now[0]) == nil)
        let changes = try #require(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [StateChange(path: ["count"], value: 12)]), now: now[0]))
        #expect(changes.aspect == .changes)
        #expect(changes.differences == [JournalComparison.Difference(path: "state.count", then: 12, now: 11)])

        let asked: LuaValue = ["kind": "log", "message": "asked 11"]
        #expect(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [], commands: [asked]), now: now[1]) == nil)
        let commands = try #require(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [], commands: []), now: now[1]))
        #expect(commands.aspect == .commands)

        let message = try #require(now[2]?.failure?.error.message)
        #expect(message.contains("boom 11"), "\(message)")
        #expect(try Replayer.divergence(Replayer.Recorded(failure: message), now: now[2]) == nil)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: "app.lua:7: boom 99"), now: now[2])?.aspect == .failure)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: []), now: now[2])?.aspect == .outcome)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: "no"), now: now[3])?.aspect == .outcome)
        #expect(try Replayer.divergence(Replayer.Recorded(failure: nil), now: nil)?.aspect == .outcome, "nothing heard")

        let props = try #require(try Replayer.divergence(Replayer.Recorded(failure: nil, changes: [StateChange(path: ["count"], value: 16)]),
                                                         now: now[3], props: (then: ["count": 15], now: ["count": 16])))
        #expect(props.aspect == .props)
        #expect(props.differences.first?.path == "props.count")
        // A recorded entry's own record of itself agrees.
        #expect(try Replayer.divergence(Replayer.Recorded(try #require(now[3])), now: now[3]) == nil)
    }
}
