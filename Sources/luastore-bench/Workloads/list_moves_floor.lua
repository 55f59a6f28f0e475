-- The floor of `lists.rotate_vs_floor_ratio` in stock Lua (docs/benchmarks.md): what Debian's `lua5.4` needs for
-- the lists rows' app logic — the very app the store runs, loaded from its file: make the rotate action and call the
-- app's reducer protected, on its list of tables (each rotation moves the last item to the front with
-- `table.remove` and `table.insert`: every entry shifts). No barrier, no store, no conversion. `scripts/bench` runs
-- it; by hand: `lua5.4 list_moves_floor.lua ACTIONS APP.lua`. It prints `rotate=N` (ns per action).
local N = math.tointeger(tonumber(arg[1])) or 2000
local clock = os.clock

local app = dofile(assert(arg[2], "the app's file"))
local state = app.init()
local reduce = app.reduce
collectgarbage()
local t0 = clock()
for _ = 1, N do
  pcall(reduce, state, { type = "rotate" })
end
local rotate = (clock() - t0) / N * 1e9
assert(state.rotations == N, "every rotation was made")
print(string.format("rotate=%.0f", rotate))
