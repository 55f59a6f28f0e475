-- `require("luastore.session")`: what the specs `luastore replay APP REC --write-spec FILE` writes call to replay a
-- recorded session, one recorded action per test (SpecTest.swift preloads it). Each step sends its action to a
-- store of the app's own (`SessionReplays.swift`: the state's rules, refused commands and each action's budget are
-- a store's, so a spec passes exactly where `luastore replay` does) and checks what it changed, its failure, and
-- the props where they changed. Every step starts from the state the recording had before it, whatever the step
-- before found: after a divergence the next step's store starts over from the recorded state.
local session = {}

-- The spec library's helpers (`bind`, called when `luastore test` preloads this module): how an assertion fails
-- (so that what a step finds wrong is a failure, not an error) and how values are rendered in messages.
local fail, render
function session.bind(helpers)
  fail, render = helpers.fail, helpers.render
end

local function copy(value)
  if type(value) ~= "table" then return value end
  local result = {}
  for key, item in pairs(value) do result[key] = copy(item) end
  return result
end

-- Applies recorded changes (`{path, value}`; a removal has no value; an empty path is the whole state, which a
-- reducer that returned a new state replaced) to `state`.
local function apply(state, changes)
  for _, change in ipairs(changes or {}) do
    local path, value = change[1], change[2]
    if #path == 0 then
      for key in pairs(state) do state[key] = nil end
      for key, item in pairs(value or {}) do state[key] = copy(item) end
      goto continue
    end
    local t = state
    for i = 1, #path - 1 do
      if type(t[path[i]]) ~= "table" then t[path[i]] = {} end
      t = t[path[i]]
    end
    t[path[#path]] = copy(value)
    ::continue::
  end
end

-- The host's (`connect`, called when `luastore test` preloads this module): `open(state)` starts a store from
-- `state` and answers its handle; `step(handle, action, expected)` reduces the action there and answers where it
-- differs from `expected` (nil when it does not; the store is closed then).
local open, reduce
function session.connect(opener, stepper)
  open, reduce = opener, stepper
end

-- A session from the recorded start state: the state as the recording has it (kept by applying the recorded
-- changes), and the store replaying it (opened at the first step, and again after a divergence). `options`:
-- `time_budget_ms`, each action's budget (the replay's that wrote the spec; else `run`'s default); `clock`, the
-- recording's (`{started = milliseconds, utc_offset =, env =}`): each step's action then runs at its `time`.
function session.state(start, options)
  return { recorded = copy(start), budget = options and options.time_budget_ms, clock = options and options.clock }
end

-- Puts the recorded changes of an entry the spec does not reduce (a reload's migration, a child store's action):
-- the next step starts a store from the state they make.
function session.put(run, changes)
  apply(run.recorded, changes)
  run.store = nil
end

-- Sends `action`, the recording's action `number`, to the session's store and checks it against `expected`:
-- `changes` (what the recording says it changed: the state after it must be exactly the state before with those
-- changes), or `failure` (the message it failed with: the state stays as it was), and `props` (the props after it,
-- where they changed). After the step the session's state is what the recording says.
function session.step(app, run, number, action, expected)
  local label = "action " .. number .. " " .. render(action)
  if run.store == nil then run.store = open(run.recorded, run.budget, run.clock) end
  local found = reduce(run.store, action, expected)
  apply(run.recorded, expected.changes)
  if found == nil then return end
  run.store = nil
  local aspect, now, recorded = found.aspect, found.now, found.recorded
  if aspect == "outcome" and expected.failure ~= nil then
    fail(label .. ": it applied; the recording says it failed: " .. expected.failure, 2)
  elseif aspect == "outcome" then
    fail(label .. ": it failed: " .. tostring(now):gsub("^failed: ", "") .. " (the recording says it applied)", 2)
  elseif aspect == "failure" then
    fail(label .. ": it failed with " .. render(now) .. "; the recording says " .. render(recorded), 2)
  elseif aspect == "props" then
    fail(label .. ": " .. found.path .. " is " .. render(now) .. "; the recording's replay gave " .. render(recorded), 2)
  else
    fail(label .. ": " .. found.path .. " is " .. render(now) .. "; the recording says " .. render(recorded), 2)
  end
end

return session
