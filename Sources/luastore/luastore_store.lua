-- `require("luastore.store")` in a spec (`luastore test`): the project's app in a real store — its barrier, its rules,
-- its time budget — so that what only a store does shows in a test: a table stored in two places, a metatable in the
-- state, a proxy kept past its call, a refused action, an action past its budget (SessionReplays.swift holds the
-- stores; effects are data there, none is performed).
--
--   local store = require("luastore.store")
--   local s <close> = store.open()                 -- from the app's `init` (or `{ state = {...} }`)
--   assert.is_true(s:dispatch({ type = "add" }))
--   local ok, failure = s:dispatch({ type = "bad" }) -- false, { stage = "reduce", message = …, location = "app.lua:7" }
--   assert.are.same({ count = 1 }, s:state())
--   s:set_time(os.time({ year = 2026, month = 3, day = 1 })) -- what the app's os.time() reads from now on
local store = {}

-- The host's functions (`connect`, called when `luastore test` preloads this module).
local host
function store.connect(open, dispatch, state, props, close, settime)
  host = { open = open, dispatch = dispatch, state = state, props = props, close = close, settime = settime }
end

local Store = {}
Store.__index = Store

-- `store.open([options])`: a new store of the project's app, from its `init`, or from `options.state`; each action
-- within `options.time_budget_ms` milliseconds (else `run`'s default). The store's clock — what the app's `os.time()`,
-- `os.date()` and `os.clock()` read — stands at `options.time` (seconds since 1970, as `os.time` counts; by default
-- 2000-01-01 00:00:00 UTC) until `s:set_time` moves it; `options.utc_offset` (seconds east of UTC) is the time zone
-- `os.date` reads, `options.env` (a table of strings) what `os.getenv` finds.
function store.open(options)
  if options ~= nil and type(options) ~= "table" then
    error("bad argument #1 to 'open' (a table of options expected, got " .. type(options) .. ")", 2)
  end
  options = options or {}
  local clock = { time = options.time, utc_offset = options.utc_offset, env = options.env }
  return setmetatable({ handle = host.open(options.state, options.time_budget_ms, clock) }, Store)
end

-- `s:set_time(seconds)`: the store's clock stands at `seconds` since 1970 (a float for milliseconds) from the next
-- action on.
function Store:set_time(seconds)
  host.settime(self.handle, seconds)
end

-- `s:dispatch(action)`: true once the store applied it; else false and its failure (`stage`, `message`,
-- `location` where the script named one), as the store's journal has it — the state is then as it was.
function Store:dispatch(action)
  return host.dispatch(self.handle, action)
end

-- `s:state()`, `s:props()`: a copy of the state, and the props, as the store has them now.
function Store:state()
  return host.state(self.handle)
end

function Store:props()
  return host.props(self.handle)
end

-- `s:close()` (also `local s <close> = …`): the store stops; what it held is released.
function Store:close()
  host.close(self.handle)
end
Store.__close = Store.close

return store
