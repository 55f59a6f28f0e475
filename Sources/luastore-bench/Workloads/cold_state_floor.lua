-- The floor of `state_size.cold_extra_vs_floor_ratio` in stock Lua (docs/benchmarks.md): what Debian's `lua5.4`
-- needs for the state_size rows' app logic — make the toggle action, call the list app's reducer protected — on a
-- list of 10 items and on one of 100,000 (toggle k reaching item k · 7919 mod n + 1, as the store's rows do), so
-- that the extra a large state adds (its items far apart in memory: cache misses no runtime avoids) can be
-- compared with the store's. No barrier, no store, no conversion. `scripts/bench` runs it; by hand:
-- `lua5.4 Sources/luastore-bench/Workloads/cold_state_floor.lua [ACTIONS] [ITEMS]`. It prints
-- `small=N large=N` (ns per toggle).
local N = math.tointeger(tonumber(arg and arg[1] or "")) or 300000
local LARGE = math.tointeger(tonumber(arg and arg[2] or "")) or 100000
local clock = os.clock

local function init(count)
  local items = {}
  for i = 1, count do items[i] = { id = i, title = "item " .. i, done = false } end
  return { items = items, toggles = 0 }
end

local function reduce(state, action)
  if action.type == "toggle" then
    local item = state.items[action.id]
    item.done = not item.done
    state.toggles = state.toggles + 1
  end
end

local function cost(count)
  local state = init(count)
  collectgarbage()
  local t0 = clock()
  for k = 0, N - 1 do
    pcall(reduce, state, { type = "toggle", id = k * 7919 % count + 1 })
  end
  return (clock() - t0) / N * 1e9
end

local small = cost(10)
local large = cost(LARGE)
print(string.format("small=%.0f large=%.0f", small, large))
