import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import LuaStoreConcurrency
import Testing
import LuaStoreCore

/// Child stores declared by an app's modules.
@Suite(.tags(.concurrency)) struct ChildStoreTests {
    static let app = #"""
    local app = {}
    function app.init() return { count = 0, seen = {} } end
    function app.reduce(state, action)
      table.insert(state.seen, action.type)
      if action.type == "increment" then state.count = state.count + 1 end
    end
    function app.props(state) return { count = state.count } end
    return app
    """#

    static let editor = #"""
    local editor = {}
    function editor.init() return { text = "", edits = 0 } end
    function editor.reduce(draft, action)
      if action.type == "draftEdited" then
        draft.text = action.text
        draft.edits = draft.edits + 1
      end
    end
    function editor.props(draft, root) return { text = draft.text, edits = draft.edits, count = root.count } end
    return editor
    """#

    @Test func childStoresFollowTheFlowRules() async throws {
        let folder = try AppFolder(["app.lua": Self.app, "editor.lua": Self.editor])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        let first = try await store.child(module: "editor")
        let second = try await store.child(module: "editor")
        let seen = Protected<[LuaValue]>([])
        first.observeProps { props in
            seen.withLock { $0.append(props) }
            return .active
        }
        first.dispatch(["type": "draftEdited", "text": "Buy milk"])
        store.dispatch(["type": "draftEdited", "text": "from the root"])
        second.dispatch(["type": "draftEdited", "text": "from a sibling"])
        store.dispatch(["type": "increment"])
        #expect(await eventually { seen.value.last == ["text": "Buy milk", "edits": 1, "count": 1] })
        #expect(try await first.state() == ["text": "Buy milk", "edits": 1], "only its own actions reached its reducer")
        #expect(try await second.state() == ["text": "from a sibling", "edits": 1])
        #expect(try await store.state()["seen"] == ["draftEdited", "draftEdited", "draftEdited", "increment"],
                "every action reached the root's reducer")
        #expect(recorder.failures.value.isEmpty)
    }

    /// A child's action whose commands cannot even be converted (bytes that are not UTF-8) is undone, as one whose
    /// commands are invalid: its write was committed in the VM before they were read, and stayed.
    @Test func aChildsCommandsThatCannotBeConvertedUndoItsAction() async throws {
        let editor = #"""
        local editor = {}
        function editor.init() return { text = "", edits = 0 } end
        function editor.reduce(draft, action)
          if action.type == "draftEdited" then
            draft.text = action.text
            draft.edits = draft.edits + 1
          elseif action.type == "bad" then
            draft.edits = draft.edits + 100
            return nil, { { kind = "log", message = "\xff" } }
          end
        end
        function editor.props(draft) return { text = draft.text } end
        return editor
        """#
        let folder = try AppFolder(["app.lua": Self.app, "editor.lua": editor])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.options)
        let child = try await store.child(module: "editor")
        child.dispatch(["type": "draftEdited", "text": "one"])
        child.dispatch(["type": "bad"])
        child.dispatch(["type": "draftEdited", "text": "two"])
        #expect(await eventually { (try? await child.state())?["text"] == "two" })
        #expect(try await child.state() == ["text": "two", "edits": 2])
        #expect(await eventually { recorder.failures.value.contains { "\($0)".contains("editor.lua:3:") && "\($0)".contains("not valid UTF-8") } },
                "\(recorder.failures.value)")
    }

    /// Under `.everyAction`, a child's action is reduced by the root's reducer, then the child's: the child's
    /// props, which read both, see the action once, with both changes — never the root's alone.
    @Test func everyActionChildPropsSeeARoutedActionOnceWithBothChanges() async throws {
        let folder = try AppFolder(["app.lua": """
            local app = {}
            function app.init() return { count = 0 } end
            function app.reduce(state, action) state.count = state.count + 1 end
            function app.props(state) return state end
            return app
            """, "editor.lua": Self.editor])
        defer { folder.remove() }
        let recorder = Recorder()
        let store = try await ScriptedStore(app: folder.url, options: recorder.everyActionOptions)
        let child = try await store.child(module: "editor")
        let seen = Protected<[LuaValue]>([])
        child.observeProps { props in
            seen.withLock { $0.append(props) }
            return .active
        }
        store.thread.sync {
            for text in ["a", "ab", "abc"] { child.dispatch(["type": "draftEdited", "text": .string(text)]) }
        }
        #expect(await eventually { seen.value.count >= 4 })
        await store.barrier()
        #expect(seen.value == [
            ["text": "", "edits": 0, "count": 0], ["text": "a", "edits": 1, "count": 1],
            ["text": "ab", "edits": 2, "count": 2], ["text": "abc", "edits": 3, "count": 3],
        ])
        #expect(recorder.failures.value.isEmpty)
    }

    @Test func missingChildModulesAreReported() async throws {
        let folder = try AppFolder(["app.lua": Self.app, "broken.lua": "return { init = function() return {} end }"])
        defer { folder.remove() }
        let store = try await ScriptedStore(app: folder.url, options: Recorder().options)
        do {
            _ = try await store.child(module: "broken")
            Issue.record("expected a failure")
        } catch {
            #expect(error.error.message == "the child module 'broken' must export a function 'reduce'")
        }
        do {
            _ = try await store.child(module: "absent")
            Issue.record("expected a failure")
        } catch {
            #expect(error.error.message.hasPrefix("module 'absent' not found:\n\tno field package.preload['absent']\n\tno file './absent.lua'"))
        }
    }
}
