-- The floor of the lists rows' ratios in stock Lua (`lists.rotate_vs_floor_ratio`, `lists.append_vs_floor_ratio`:
-- docs/benchmarks.md): what Debian's `lua5.4` needs for the rows' app logic — the very app the store runs, loaded
-- from its file: make the action and call the app's reducer protected, on plain tables (a rotation moves the last
-- item to the front with `table.remove` and `table.insert`: every entry shifts; an append stores a thousand new
-- items). No barrier, no store, no conversion. `scripts/bench` runs it; by hand:
-- `lua5.4 list_moves_floor.lua ACTIONS APP.lua [TYPE COUNTER]` (TYPE `rotate` and COUNTER `rotations` unless
-- given). It prints `TYPE=N` (ns per action).
local N = math.tointeger(tonumber(arg[1])) or 2000
local kind, counter = arg[3] or "rotate", arg[4] or "rotations"
local clock = os.clock

local app = dofile(assert(arg[2], "the app's file"))
local state = app.init()
local reduce = app.reduce
collectgarbage()
local t0 = clock()
for _ = 1, N do
  pcall(reduce, state, { type = kind })
end
local each = (clock() - t0) / N * 1e9
assert(state[counter] == N, "every action was reduced")
print(string.format("%s=%.0f", kind, each))
