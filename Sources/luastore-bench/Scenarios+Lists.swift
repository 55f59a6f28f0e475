import Foundation
import LuaKit
import LuaStoreScripting

/// Reordering a list of tables in a reducer, as Lua code does it (`table.remove`, `table.insert` at a position): every
/// entry shifted is a move, which the barrier journals and checks at commit. Against stock Lua running the same
/// app's reducer on plain tables.
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

    /// ms per rotation of a `items`-item list of tables in the store, until the observer has the last props.
    func rotationCost(_ folder: URL, actions: Int) async throws -> Double {
        let store = try await ScriptedStore(app: folder, options: options)
        let arrival = await Self.arrival(of: store, counting: "rotations")
        _ = await store.memory() // (the garbage init left is not collected in the measured window)
        let action: LuaValue = ["type": "rotate"]
        let nanoseconds = await Harness.nanoseconds(operations: actions) {
            for _ in 0..<actions { store.dispatch(action) }
            await arrival.wait(for: Int64(actions))
        }
        store.shutdown()
        return nanoseconds / 1_000_000
    }

    /// `lists.ms_per_rotate_2000`: one rotation of a 2,000-item list of tables (1,999 moves, a key removed and one
    /// added); `lists.rotate_vs_floor_ratio`: that ÷ stock `lua5.4` running the same reducer on plain tables
    /// (`Workloads/list_moves_floor.lua`), the two alternated.
    func lists() async throws -> [Scenario] {
        let items = 2_000, actions = quick ? 40 : 400
        let folder = try app("rotating\(items)", Self.rotatingListApp(items: items))
        let storeRow = { (value: Double) in
            Scenario(name: "lists.ms_per_rotate_2000", value: value, unit: "ms", goal: "—", pass: nil)
        }
        guard let (stock, script) = try floorScript(EmbeddedLua.listMovesFloor, rows: "lists.rotate_…") else {
            var costs: [Double] = []
            for _ in 0..<max(1, rounds) { costs.append(try await rotationCost(folder, actions: actions)) }
            return [storeRow(Harness.median(costs))]
        }
        let path = folder.appendingPathComponent("app.lua").path
        let floorActions = quick ? 400 : 4_000
        let measureFloor = { () throws -> Double in
            let output = try Self.output(of: stock, [script.path, String(floorActions), path])
            guard let text = output.split(whereSeparator: \.isWhitespace).first(where: { $0.hasPrefix("rotate=") }),
                  let nanoseconds = Double(text.dropFirst("rotate=".count)) else {
                throw BenchFailure("list_moves_floor.lua printed \(output.debugDescription), without rotate=N")
            }
            return nanoseconds / 1_000_000
        }
        let (store, floor, ratio) = try await Harness.alternate(
            rounds: rounds, { try await rotationCost(folder, actions: actions) }, measureFloor)
        return [
            storeRow(store),
            Scenario(name: "lists.rotate_vs_floor_ratio", value: ratio, unit: "×", goal: "—", pass: nil),
            Scenario(name: "lists.rotate_floor_ms", value: floor, unit: "ms", goal: "—", pass: nil),
        ]
    }
}
