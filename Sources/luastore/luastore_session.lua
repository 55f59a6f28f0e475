-- `require("luastore.session")`: what the specs `luastore replay APP REC --write-spec FILE` writes call to replay a
-- recorded session against the app's reducer, one recorded action per test (SpecTest.swift preloads it). Each
-- step reduces its action from the state the recording had before it — every step starts from the recording,
-- whatever the step before found — and checks what it changed, its failure, and the props where they changed.
local session = {}

local concat = table.concat

-- The spec library's helpers (`bind`, called when `luastore test` preloads this module): how an assertion fails
-- (so that what a step finds wrong is a failure, not an error), how values are rendered in messages, and keys in
-- order.
local fail, render, sortedKeys
function session.bind(helpers)
  fail, render, sortedKeys = helpers.fail, helpers.render, helpers.sortedKeys
end

local function pathText(root, path)
  local parts = { root }
  for _, key in ipairs(path) do
    parts[#parts + 1] = type(key) == "string" and key:match("^[%a_][%w_]*$") and ("." .. key) or ("[" .. render(key) .. "]")
  end
  return concat(parts)
end

local function copy(value)
  if type(value) ~= "table" then return value end
  local result = {}
  for key, item in pairs(value) do result[key] = copy(item) end
  return result
end

-- Makes `target` (keeping its identity) hold what `source` holds.
local function restore(target, source)
  for key in pairs(target) do target[key] = nil end
  for key, item in pairs(source) do target[key] = copy(item) end
end

-- Applies recorded changes (`{path, value}`; a removal has no value; an empty path is the whole state, which a
-- reducer that returned a new state replaced) to `state`.
local function apply(state, changes)
  for _, change in ipairs(changes or {}) do
    local path, value = change[1], change[2]
    if #path == 0 then
      restore(state, value or {})
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

-- The first path (in key order) where `a` and `b` differ, with both values there; nil when they are equal.
local function firstDifference(a, b, path)
  path = path or {}
  if type(a) ~= "table" or type(b) ~= "table" then
    if a == b then return nil end
    return path, a, b
  end
  local union = {}
  for key in pairs(a) do union[key] = true end
  for key in pairs(b) do union[key] = true end
  local list = sortedKeys(union)
  for _, key in ipairs(list) do
    path[#path + 1] = key
    local found, x, y = firstDifference(a[key], b[key], path)
    if found then return found, x, y end
    path[#path] = nil
  end
  return nil
end

-- The recorded start state, as the steps' shared state (each step starts from the recording's state anyway).
function session.state(start)
  return copy(start)
end

-- Puts the recorded changes of an entry the spec does not reduce (a reload's migration, a child store's action).
function session.put(state, changes)
  apply(state, changes)
end

-- Reduces `action`, the recording's action `number`, on `state` and checks it against `expected`:
-- `changes` (what the recording says it changed: the state after it must be exactly the state before with those
-- changes), or `failure` (the message it failed with, `file:line: message`: the state stays as it was), and
-- `props` (the props after it, where they changed). After the step `state` is what the recording says, so the
-- next step checks its own action only.
function session.step(app, state, number, action, expected)
  local label = "action " .. number .. " " .. render(action)
  local before = copy(state)
  local wanted = copy(before)
  apply(wanted, expected.changes)
  local ok, result = pcall(app.reduce, state, copy(action))
  if expected.failure ~= nil then
    restore(state, before)
    if ok then fail(label .. ": it applied; the recording says it failed: " .. expected.failure, 2) end
    local message = tostring(result)
    if message ~= expected.failure and message:match("^[^\n]-:%d+: (.*)$") ~= expected.failure then
      fail(label .. ": it failed with " .. render(message) .. "; the recording says " .. render(expected.failure), 2)
    end
    return
  end
  if not ok then
    restore(state, wanted)
    fail(label .. ": it failed: " .. tostring(result) .. " (the recording says it applied)", 2)
  end
  if type(result) == "table" then restore(state, result) end -- (a reducer may return a new state)
  local path, now, recorded = firstDifference(state, wanted)
  restore(state, wanted)
  if path then
    fail(label .. ": " .. pathText("state", path) .. " is " .. render(now) .. "; the recording says " .. render(recorded), 2)
  end
  if expected.props ~= nil and type(app.props) == "function" then
    local props = app.props(copy(state))
    local where, value, recordedProps = firstDifference(props, expected.props)
    if where then
      fail(label .. ": " .. pathText("props", where) .. " is " .. render(value) .. "; the recording's replay gave "
        .. render(recordedProps), 2)
    end
  end
end

return session
