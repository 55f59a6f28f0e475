-- The floors of `counter.fresh_actions_…` and `counter.every_action_…` in stock Lua (docs/benchmarks.md,
-- "Benchmarks"): what Debian's `lua5.4` needs for the core of a dispatch, on a state behind the simplest journaling
-- barrier; no store, no second thread, no conversion from or to Swift. `scripts/bench` runs it; by hand:
-- `lua5.4 Sources/luastore-bench/Workloads/dispatch_floor.lua [ACTIONS [fresh|every]]`. It prints one line:
-- - `fresh` (the default): make the four-field action, call the counter's reducer protected, on a plain state and
--   behind the barrier, then the same action table again and again — `plain=N barrier=N reused=N`;
-- - `every`: a dispatch whose every action is observed — call the reducer protected behind the barrier with the
--   one action table, run `props` on the state, skip a repeat of the last props, tell one observer, all in one
--   loop (no record of what `props` read) — `every=N`
-- (ns per action).
local N = math.tointeger(tonumber(arg and arg[1] or "")) or 2000000
local mode = arg and arg[2] or "fresh"
local clock = os.clock

local function reduce(state, action)
  local kind = action.type
  if kind == "increment" then state.count = state.count + 1
  elseif kind == "add" then state.count = state.count + action.by; state.note = action.note; state.flag = action.flag
  end
end

-- a minimal journaling barrier: every write journaled (table, key, old value), reads through __index (written as
-- C functions over the Lua API it measures the same, within 3 %)
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

if mode == "every" then
  local function props(state) return { count = state.count } end
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
  return
end
assert(mode == "fresh", "the mode is fresh or every")

local notes = {}
for i = 0, 15 do notes[i] = "note " .. i end

-- plain
local state = { count = 0, note = "", flag = false }
local t0 = clock()
for i = 1, N do
  local action = { type = "add", by = 1, note = notes[i & 15], flag = (i & 1) == 0 }
  pcall(reduce, state, action)
end
local plain = (clock() - t0) / N * 1e9

-- behind the barrier
t0 = clock()
for i = 1, N do
  local action = { type = "add", by = 1, note = notes[i & 15], flag = (i & 1) == 0 }
  n = 0
  pcall(reduce, proxy, action)
end
local barrier = (clock() - t0) / N * 1e9

-- the same action table again and again, behind the barrier
local action = { type = "add", by = 1, note = "note 1", flag = true }
t0 = clock()
for _ = 1, N do
  n = 0
  pcall(reduce, proxy, action)
end
local reused = (clock() - t0) / N * 1e9
print(string.format("plain=%.0f barrier=%.0f reused=%.0f", plain, barrier, reused))
