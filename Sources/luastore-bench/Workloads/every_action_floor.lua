-- The floor of `counter.every_action_…` in stock Lua (docs/benchmarks.md, "Benchmarks"): what Debian's `lua5.4`
-- needs for the core of a dispatch whose every action is observed — call the counter's reducer protected, on a
-- state behind the simplest journaling barrier, with the one action table again and again; run `props` on the
-- state; skip a repeat of the last props; tell one observer — all in one loop: no store, no second thread, no
-- conversion to or from Swift, no record of what props read. `scripts/bench` runs it for
-- `counter.every_action_floor_vs_reswift_ratio`; by hand:
-- `lua5.4 Sources/luastore-bench/Workloads/every_action_floor.lua [ACTIONS]`. It prints one line: `every=N` (ns
-- per action).
local N = math.tointeger(tonumber(arg and arg[1] or "")) or 2000000
local clock = os.clock

local function reduce(state, action)
  local kind = action.type
  if kind == "increment" then state.count = state.count + 1 end
end

local function props(state) return { count = state.count } end

-- the barrier of fresh_action_floor.lua: every write journaled (table, key, old value), reads through __index
local real = { count = 0, note = "", flag = false }
local journal, n = {}, 0
local proxy = setmetatable({}, {
  __index = function(_, k) return real[k] end,
  __newindex = function(_, k, v)
    local old = real[k]
    if old == v then return end
    journal[n + 1], journal[n + 2], journal[n + 3] = real, k, old
    n = n + 3
    real[k] = v
  end,
})

local seen = 0
local function observer(given) seen = given.count end

local action = { type = "increment" }
local last
local t0 = clock()
for _ = 1, N do
  n = 0
  pcall(reduce, proxy, action)
  local given = props(real)
  if last == nil or given.count ~= last.count then
    last = given
    observer(given)
  end
end
local every = (clock() - t0) / N * 1e9
assert(seen == N, "the observer saw every action")
print(string.format("every=%.0f", every))
