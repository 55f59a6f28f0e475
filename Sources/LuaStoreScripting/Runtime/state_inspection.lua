-- Inspecting (the devtools): reads of the real tables, outside any transaction; nothing is recorded or written.
-- Part of the state runtime (`state_runtime.lua` says how the parts fit; StateRuntime.swift loads them).

local S = ...
local next, type, tostring, rawlen = next, type, tostring, rawlen
local istable = istable
local M, holder = S.M, S.holder

-- The value at `path` (a list of keys) in the state, or nil (and the depth where the path ended) when absent.
local function at(path)
  local value = holder.state
  for i = 1, #path do
    if not istable(value) then return nil, i end
    value = value[path[i]]
  end
  return value
end

function M.valueAt(path) return (at(path)) end

-- Keys in a stable order for display: numbers ascending, then strings, then booleans (false first).
local RANK = { number = 1, string = 2, boolean = 3 }
local function before(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return RANK[ta] < RANK[tb] end
  if ta == "boolean" then return (not a) and b end
  return a < b
end

-- A shallow look at the table at `path`: how many keys it has, and for the keys in positions
-- offset+1…offset+limit (in display order) the key, whether its value is a table, and the value (a table's
-- number of keys). A sequence 1…n is not sorted; other tables' keys are, on each look.
-- Returns count, keys, values, tables (false when the path does not lead to a table).
function M.peek(path, offset, limit)
  local t = at(path)
  if not istable(t) then return false end
  local count, keys = 0, {}
  for key in next, t do
    count = count + 1
    keys[count] = key
  end
  local length = rawlen(t)
  if length ~= count then table.sort(keys, before) else
    for i = 1, count do keys[i] = i end
  end
  local shownKeys, shownValues, shownTables, n = {}, {}, {}, 0
  for i = offset + 1, math.min(count, offset + limit) do
    local key = keys[i]
    local value = t[key]
    n = n + 1
    shownKeys[n] = key
    if istable(value) then
      local size = 0
      for _ in next, value do size = size + 1 end
      shownValues[n], shownTables[n] = size, true
    else
      shownValues[n], shownTables[n] = value, false
    end
  end
  return count, shownKeys, shownValues, shownTables
end

-- Paths (at most `limit`) whose key or scalar value contains `text` (plain, case-insensitive), depth first in
-- display order, and the scalar found there (nil for a table). Walks the whole state: asked for, never per action.
function M.search(text, limit)
  text = string.lower(text)
  local paths, values, n = {}, {}, 0
  local seen = {}
  local function matches(x)
    local kind = type(x)
    if kind ~= "string" and kind ~= "number" and kind ~= "boolean" then return false end
    return string.find(string.lower(tostring(x)), text, 1, true) ~= nil
  end
  local function walk(t, path, depth)
    if seen[t] or n >= limit then return end
    seen[t] = true
    local keys, count = {}, 0
    for key in next, t do
      count = count + 1
      keys[count] = key
    end
    table.sort(keys, before)
    for i = 1, count do
      if n >= limit then return end
      local key, value = keys[i], t[keys[i]]
      local here = { table.unpack(path, 1, depth) }
      here[depth + 1] = key
      if matches(key) or (not istable(value) and matches(value)) then
        n = n + 1
        paths[n] = here
        if not istable(value) then values[n] = value end
      end
      if istable(value) then walk(value, here, depth + 1) end
    end
  end
  if istable(holder.state) then walk(holder.state, {}, 0) end
  return n, paths, values
end

