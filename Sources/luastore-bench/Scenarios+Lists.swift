import Foundation
import LuaKit
import LuaStoreScripting

/// Lists of tables in a reducer, as Lua code changes them: reordered (`table.remove`, `table.insert` at a position:
/// every entry shifted is a move, which the barrier journals and checks at commit), and grown by new items (each a
/// table the reducer made, with a table inside, stored: the state's own from then on). Against stock Lua running
/// the same app's reducer on plain tables.
extension Scenarios {
    static func rotatingListApp(items: Int) -> String {
        """
        local app = {}
        function app.init()
          local items = {}
          for i = 1, \(items) do items[i] = { id = i, title = "item " .. i, done = false } end
          return { items = items, rotations = 0 }
        end
        function app.reduce(state, action)
          if action.type == "rotate" then
            local items = state.items
            table.insert(items, 1, table.remove(items)) -- the last item to the front: every entry shifts
            state.rotations = state.rotations + 1
          end
        end
        function app.props(state) return { rotations = state.rotations, first = state.items[1].id } end
        return app
        """
    }

    /// An app whose `append` action adds a thousand new items to its list (each with a list of tags inside),
    /// starting the list over once it holds ten thousand.
    static let appendingListApp = """
        local app = {}
        function app.init() return { items = {}, appended = 0 } end
        function app.reduce(state, action)
          if action.type == "append" then
            local items = state.items
            if #items >= 10000 then
              items = {}
              state.items = items
            end
            local n = #items
            for i = n + 1, n + 1000 do items[i] = { id = i, title = "item " .. i, done = false, tags = { "new" } } end
            state.appended = state.appended + 1
          end
        end
        function app.props(state) return { appended = state.appended, count = #state.items } end
        return app
        """

    /// ms per action of type `kind` in the store of the app in `folder`, until the observer has the last props
    /// (whose field `counter` counts the actions).
    func listActionCost(_ folder: URL, kind: String, counter: String, actions: Int) async throws -> Double {
        let store = try await ScriptedStore(app: folder, options: options)
        let arrival = await Self.arrival(of: store, counting: counter)
        _ = await store.memory() // (the garbage init left is not collected in the measured window)
        let action: LuaValue = ["type": .string(kind)]
        let nanoseconds = await Harness.nanoseconds(operations: actions) {
            for _ in 0..<actions { store.dispatch(action) }
            await arrival.wait(for: Int64(actions))
        }
        store.shutdown()
        return nanoseconds / 1_000_000
    }

    /// `lists.ms_per_rotate_2000`: one rotation of a 2,000-item list of tables (1,999 moves, a key removed and one
    /// added); `lists.ms_per_append_1000`: a thousand new items stored, one by one (`appendingListApp`). Each
    /// `…_vs_floor_ratio`: that ÷ stock `lua5.4` running the same reducer on plain tables
    /// (`Workloads/list_moves_floor.lua`), the two alternated.
    func lists() async throws -> [Scenario] {
        let items = 2_000
        let rotating = try app("rotating\(items)", Self.rotatingListApp(items: items))
        let appending = try app("appending", Self.appendingListApp)
        return try await listRows(rotating, kind: "rotate", counter: "rotations", row: "rotate_2000", ratio: "rotate",
                                  actions: quick ? 40 : 400, floorActions: quick ? 400 : 4_000)
            + listRows(appending, kind: "append", counter: "appended", row: "append_1000", ratio: "append",
                       actions: quick ? 20 : 200, floorActions: quick ? 100 : 1_000)
    }

    /// `lists.ms_per_<row>`, and when stock Lua is here `lists.<ratio>_vs_floor_ratio` and `lists.<ratio>_floor_ms`:
    /// the app in `folder` reducing `actions` actions of type `kind`, against the floor reducing `floorActions`.
    private func listRows(_ folder: URL, kind: String, counter: String, row: String, ratio: String, actions: Int,
                          floorActions: Int) async throws -> [Scenario] {
        let storeRow = { (value: Double) in
            Scenario(name: "lists.ms_per_\(row)", value: value, unit: "ms", goal: "—", pass: nil)
        }
        let measureStore = { try await self.listActionCost(folder, kind: kind, counter: counter, actions: actions) }
        guard let (stock, script) = try floorScript(EmbeddedLua.listMovesFloor, rows: "lists.\(ratio)_…") else {
            var costs: [Double] = []
            for _ in 0..<max(1, rounds) { costs.append(try await measureStore()) }
            return [storeRow(Harness.median(costs))]
        }
        let path = folder.appendingPathComponent("app.lua").path
        let measureFloor = { () throws -> Double in
            let output = try Self.output(of: stock, [script.path, String(floorActions), path, kind, counter])
            guard let text = output.split(whereSeparator: \.isWhitespace).first(where: { $0.hasPrefix("\(kind)=") }),
                  let nanoseconds = Double(text.dropFirst(kind.count + 1)) else {
                throw BenchFailure("list_moves_floor.lua printed \(output.debugDescription), without \(kind)=N")
            }
            return nanoseconds / 1_000_000
        }
        let (store, floor, quotient) = try await Harness.alternate(rounds: rounds, measureStore, measureFloor)
        return [
            storeRow(store),
            Scenario(name: "lists.\(ratio)_vs_floor_ratio", value: quotient, unit: "×", goal: "—", pass: nil),
            Scenario(name: "lists.\(ratio)_floor_ms", value: floor, unit: "ms", goal: "—", pass: nil),
        ]
    }
}
