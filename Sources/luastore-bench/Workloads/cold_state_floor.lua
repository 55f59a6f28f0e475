-- The floor of `state_size.cold_extra_vs_floor_ratio` in stock Lua (docs/benchmarks.md): what Debian's `lua5.4`
-- needs for the state_size rows' app logic — the very apps the store runs, loaded from their files: make the
-- toggle action, call the app's reducer protected — on its 10-item list and on its large one (toggle k reaching
-- item k · 7919 mod n + 1, as the store's rows do), so that the extra a large state adds (its items far apart in
-- memory: cache misses no runtime avoids) can be compared with the store's. No barrier, no store, no conversion.
-- `scripts/bench` runs it; by hand: `lua5.4 cold_state_floor.lua ACTIONS SMALL_APP.lua LARGE_APP.lua`. It prints
-- `small=N large=N` (ns per toggle).
local N = math.tointeger(tonumber(arg[1])) or 300000
local clock = os.clock

local function cost(path)
  local app = dofile(path)
  local state = app.init()
  local count = #state.items
  collectgarbage()
  local reduce = app.reduce
  local t0 = clock()
  for k = 0, N - 1 do
    pcall(reduce, state, { type = "toggle", id = k * 7919 % count + 1 })
  end
  return (clock() - t0) / N * 1e9
end

local small = cost(assert(arg[2], "the 10-item app's file"))
local large = cost(assert(arg[3], "the large app's file"))
print(string.format("small=%.0f large=%.0f", small, large))
