import Foundation
import LuaKit
import LuaStoreCore
import LuaStoreScripting
import LuaStoreTestSupport
import Testing

/// A reader whose bytecode only reads named fields of the state is run with the state's root itself while none
/// of those fields holds a table (reads.c, `run_by_keys`): what its observers see must be exactly what the same
/// reader sees through the state's proxy. Each app here is run twice — its `props` as written, and the same body
/// behind `local state = state`, which copies the argument and so always runs through the proxy — and the two
/// must observe the same props, in the same order, and the same failures.
@Suite struct ReadersByKeysTests {
    static let reduce = """
        function app.reduce(state, action)
          local kind = action.type
          if kind == "a" then state.a = action.value
          elseif kind == "b" then state.b = action.value
          elseif kind == "flag" then state.flag = not state.flag
          elseif kind == "tablea" then state.a = { x = action.value }
          elseif kind == "deep" then state.a.x = action.value
          elseif kind == "other" then state.other = action.value
          elseif kind == "drop" then state.b = nil
          elseif kind == "replace" then return { a = 100, b = 200, flag = false, other = 0 }
          end
        end
        """

    /// Props functions that read the same named fields on every run (straight-line code), each with actions that
    /// move them between by keys and through the proxy: a field turned into a table and back, the root replaced, a
    /// key dropped, a props that raises (and on a number indexed as a table).
    static let cases: [(props: String, actions: [LuaValue])] = [
        ("return { a = state.a, b = state.b }",
         [["type": "a", "value": 1], ["type": "other", "value": 5], ["type": "b", "value": 2], ["type": "b", "value": 2],
          ["type": "replace"], ["type": "a", "value": 3], ["type": "drop"], ["type": "b", "value": 4]]),
        ("return { v = math.max(state.a, state.b) }",
         [["type": "a", "value": 1], ["type": "b", "value": 2], ["type": "flag"], ["type": "b", "value": 3],
          ["type": "a", "value": 4], ["type": "other", "value": 1], ["type": "a", "value": 5], ["type": "b", "value": 6]]),
        ("return { kind = type(state.a), b = state.b }",
         [["type": "tablea", "value": 1], ["type": "deep", "value": 2], ["type": "b", "value": 3], ["type": "a", "value": 4],
          ["type": "b", "value": 5], ["type": "tablea", "value": 6], ["type": "replace"], ["type": "b", "value": 7]]),
        ("return { b = state.b, n = state[1], q = 10 // state.b }",
         [["type": "b", "value": 12], ["type": "b", "value": 0], ["type": "a", "value": 1], ["type": "b", "value": 14],
          ["type": "b", "value": 0], ["type": "replace"], ["type": "b", "value": 15]]),
        ("return { x = state.a.x }",
         [["type": "a", "value": 1], ["type": "tablea", "value": 2], ["type": "deep", "value": 3], ["type": "deep", "value": 4],
          ["type": "a", "value": 5], ["type": "deep", "value": 6], ["type": "tablea", "value": 7], ["type": "deep", "value": 8]]),
    ]

    func observed(props: String, actions: [LuaValue]) async throws -> (props: [LuaValue], failures: [String]) {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { a = 0, b = 0, flag = false, other = 0 } end
            \(Self.reduce)
            function app.props(state) \(props) end
            return app
            """])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.everyActionOptions)
        defer { store.shutdown() }
        recorder.observe(store)
        for action in actions { store.dispatch(action) }
        await store.barrier()
        return (recorder.props.value, recorder.failures.value.map { "\($0.error.message)" })
    }

    @Test(arguments: cases.indices) func propsByKeysAreWhatTheProxyGives(index: Int) async throws {
        let (props, actions) = Self.cases[index]
        let byKeys = try await observed(props: props, actions: actions)
        let throughProxy = try await observed(props: "local state = state " + props, actions: actions)
        #expect(byKeys.props == throughProxy.props, "\(props)")
        #expect(byKeys.failures == throughProxy.failures, "\(props)")
        #expect(byKeys.props.count > 2, "\(props): \(byKeys.props)")
    }
}
