-- A stopwatch: a timer subscription that exists exactly while the state says it is running.
local luastore = require("luastore")

local app = {}

function app.init()
  return { running = false, tenths = 0, laps = {} }
end

function app.reduce(state, action)
  local kind = action.type
  if kind == "start" then
    state.running = true
  elseif kind == "stop" then
    state.running = false
  elseif kind == "reset" then
    state.running = false
    state.tenths = 0
    state.laps = {}
  elseif kind == "tick" then
    if state.running then state.tenths = state.tenths + 1 end
  elseif kind == "lap" then
    table.insert(state.laps, state.tenths)
  end
end

local function clock(tenths)
  return string.format("%d:%02d.%d", tenths // 600, (tenths // 10) % 60, tenths % 10)
end

function app.props(state)
  local laps = {}
  for index, lap in ipairs(state.laps) do laps[index] = clock(lap) end
  return { time = clock(state.tenths), running = state.running, laps = laps }
end

function app.subscriptions(state)
  if state.running then
    return { ticker = luastore.timer(0.1, { type = "tick" }) }
  end
  return {}
end

return app
