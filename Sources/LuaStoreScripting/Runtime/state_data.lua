-- State is data: the rules that keep a scripted app's state data and a tree, and the records of where its tables
-- are. Part of the state runtime (`state_runtime.lua` says how the parts fit; StateRuntime.swift loads them).
--
-- The state holds only UTF-8 strings, booleans, finite numbers and tables of those (no metatables), under keys that
-- are strings, booleans or finite numbers; and it is a tree: a table is in one place of it. So every state
-- converts exactly (to Swift, to a recording, to JSON), and every table has one path, which the journal names
-- changes by. Anything else is refused at the write, with the script's line, and the transaction rolls back.
--
-- Where each table is: `parents[t]` holds t under `parentKeys[t]`, recorded when t's proxy is made (the
-- script reached t from there) or when t is stored. Records may be stale (t was removed or replaced since):
-- `attached` checks each link. They live as long as the proxy caches and are renewed with them; the roots
-- (the app's state, children's states) need none.

local S = ...
local next, type, tostring, error, rawset, getmetatable = next, type, tostring, error, rawset, getmetatable
local istable, modeguard = istable, modeguard
local B, holder, children = S.B, S.holder, S.children
local MARKER, STATE_DEPTH, STALE = S.MARKER, S.STATE_DEPTH, S.STALE
local huge, mathtype = math.huge, math.type

-- Whether storing `b` where `a` is changes nothing: equal, and for numbers of the same subtype and, for a zero,
-- the same sign (Lua stores `1.0` over `1`; the state keeps what the script stored).
local function same(a, b)
  if a ~= b then return false end
  if type(a) ~= "number" then return true end
  local kind = mathtype(a)
  if kind ~= mathtype(b) then return false end
  return kind == "integer" or a ~= 0 or 1 / a == 1 / b
end
S.same = same
local MAX_DEPTH = 1000 -- deeper than any state converts: only a cycle in the records goes further
S.MAX_DEPTH = MAX_DEPTH

-- The level of the real table `t` in its state, from the records: a root is 1 (`holder` and `children`, which
-- hold the roots, are 0). Costs the depth of `t`.
local function levelOf(t)
  local parents, root = S.parents, holder.state
  local level = 0
  while t ~= nil and t ~= holder and t ~= children and level <= MAX_DEPTH do
    level = level + 1
    if t == root then return level end -- (its record may be a place it is stored in for a moment: `s.me = s`)
    t = parents[t]
  end
  return level
end

-- Whether the real table `t` is in a state now: each recorded link up to a root still holds it.
local function attached(t)
  local parents, parentKeys = S.parents, S.parentKeys
  for _ = 1, MAX_DEPTH do
    if t == holder.state then return true end
    local parent = parents[t]
    if parent == nil then return false end
    local key = parentKeys[t]
    if parent[key] ~= t then return false end
    if parent == children then return true end
    t = parent
  end
  return false
end

local KEYWORDS = {}
for word in ("and break do else elseif end false for function goto if in local nil not or repeat return then true until while"):gmatch("%a+") do
  KEYWORDS[word] = true
end

-- A string key as a Lua literal, escaped as LuaPath.quoted (Swift) escapes it.
local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
local function escape(c)
  local code = tostring(c:byte())
  return ESCAPES[c] or ("\\" .. ("0"):rep(3 - #code) .. code)
end

-- One step of a path as Lua names it: `.title`, `[3]`, `["first name"]` — the rules of LuaPath.render (Swift),
-- which the devtools use too (a test compares them).
local function renderKey(key)
  if type(key) == "string" then
    if key:match("^[%a_][%w_]*$") and not KEYWORDS[key] then return "." .. key end
    return '["' .. key:gsub('[%c"\\]', escape) .. '"]'
  end
  return "[" .. tostring(key) .. "]"
end
S.M.renderKey = renderKey -- (for the host's other trusted chunks, such as mounts.lua)

-- How a message names the real table `t` (and `key` inside it): `state.todos[3]`, from the records.
local function describe(t, key)
  local parents, parentKeys = S.parents, S.parentKeys
  local parts = {}
  if key ~= nil then parts[1] = renderKey(key) end
  while t ~= holder.state do
    if #parts > MAX_DEPTH then return "a table inside itself" end
    local parent = parents[t]
    if parent == nil then return "a table no longer in the state" .. table.concat(parts) end
    if parent == holder or parent == children then break end
    table.insert(parts, 1, renderKey(parentKeys[t]))
    t = parent
  end
  table.insert(parts, 1, parents[t] == children and "the child store's state" or "state")
  if #parts > 16 then -- a message names a deep place by its ends
    return table.concat(parts, "", 1, 8) .. "…(" .. (#parts - 16) .. " more keys)…" .. table.concat(parts, "", #parts - 7)
  end
  return table.concat(parts)
end

local DATA = "the state holds only data: UTF-8 strings, booleans, finite numbers and tables of those"


-- The first bytes of a string that is not text, as a Lua literal would escape them (`"\255\254"`).
local function quoteBytes(s)
  local shown = s:sub(1, 24):gsub("[^\32-\126]", function(c) return "\\" .. c:byte() end)
  return '"' .. shown .. (#s > 24 and '"…' or '"')
end

-- The functions below return a message for what they refuse (nil when all is well); the caller raises it
-- where the script's line is known.

-- A key that is not data, new in `t`.
function S.badKey(key, t)
  local kind = type(key)
  if kind == "string" then
    if B.istext(key) then return nil end
    return describe(t) .. ": a key that is not UTF-8 text (" .. quoteBytes(key) .. ") cannot be in the state (" .. DATA .. ")"
  end
  if kind == "boolean" then return nil end
  if kind == "number" then
    if key ~= huge and key ~= -huge then return nil end -- (a NaN key never gets here: Lua refuses it first)
    return describe(t) .. ": " .. tostring(key) .. " cannot be a key in the state (" .. DATA .. ")"
  end
  return describe(t) .. ": a " .. kind .. " cannot be a key in the state (" .. DATA .. ")"
end

-- A value that is not data (tables are `prepare`'s), about to be stored at `t[key]`.
local function badValue(value, t, key)
  local kind = type(value)
  if kind == "string" then
    if B.istext(value) then return nil end
    return describe(t, key) .. ": a string that is not UTF-8 text (" .. quoteBytes(value) .. ") cannot be stored in the state ("
      .. DATA .. ")"
  end
  if kind == "boolean" or kind == "nil" then return nil end
  if kind == "number" then
    if value == value and value ~= huge and value ~= -huge then return nil end
    return describe(t, key) .. ": " .. (value == value and tostring(value) or "NaN") .. " cannot be stored in the state (" .. DATA .. ")"
  end
  return describe(t, key) .. ": a " .. kind .. " cannot be stored in the state (" .. DATA .. ")"
end

S.badValue = badValue

local function tooDeep(t, key, level)
  return describe(t, key) .. ": tables in the state nest at most " .. STATE_DEPTH .. " levels deep (this would be level "
    .. level .. "; what is deeper could not be saved, recorded or shown)"
end

local function badTable(item, t, key)
  -- (A state table this call was handed is in `targets`, and moves; one that is not is a slice read through
  -- `reads` — or the host's view of one —, read-only, or a proxy kept from an earlier call.)
  if getmetatable(item) == MARKER then
    return describe(t, key) .. ": cannot store a table read through `reads` (another's slice, read-only) or kept from an earlier call: store a copy of it"
  end
  if getmetatable(item) == modeguard then
    -- (Lua reads a metatable's fields raw: as a table of the state, whose fields the store's barrier keeps, it
    -- would show the table it serves none of them.)
    return describe(t, key) .. ": a table that is another table's metatable cannot be stored in the state (Lua "
      .. "reads a metatable's fields raw, and the state's fields are the store's): store a copy of it"
  end
  return describe(t, key) .. ": a table with a metatable cannot be stored in the state (" .. DATA .. ")"
end

-- Claims the new tables of a value `prepare` checked, from the top (`t`, to be held by `parent` under `key`):
-- each one's contents move to a new real table and the script's table becomes that table's proxy (`B.claim`),
-- so no script holds a table of the state itself (one it kept would write past the journal). `seen` marks the
-- new tables `FRESH` (the others are state tables the value moves); `claimed`, when the value moves any, maps
-- each claimed table to its real one; `returned`: the function that made the value has returned (a state it
-- returned), so no proxy of this call is handed to it — the claimed tables are not stamped. Returns the real
-- table. (For a moment both tables of each are held: a large state built by `init` needs room for two copies
-- while it is placed.)
local FRESH = 2
local function claim(t, parent, key, seen, claimed, returned)
  local parents, parentKeys = S.parents, S.parentKeys
  local real = B.claim(t, returned)
  if claimed then claimed[t] = real end
  parents[t], parentKeys[t] = nil, nil
  parents[real], parentKeys[real] = parent, key
  for k, item in next, real do
    if seen[item] == FRESH then rawset(real, k, claim(item, real, k, seen, claimed, returned)) end
  end
  return real
end

-- The keys of a table in a fixed order — booleans, numbers, strings, then the rest by type — whatever the order of
-- its hash part: `inOrder(t, k)` is the key after `k` (the first for nil) and its value, as `next` gives them.
-- (For the failures `prepare` names: a table's order is made at its first key, kept in `orders` until the walk
-- ends, `forgetOrders`.)
local typeOrder = { boolean = 1, number = 2, string = 3 }
local function before(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then
    local ra, rb = typeOrder[ta] or 4, typeOrder[tb] or 4
    if ra ~= rb then return ra < rb end
    return ta < tb
  end
  if ta == "boolean" then return not a and b end
  if ta == "number" or ta == "string" then return a < b end
  return false
end
local orders = {} -- table -> { keys in order, key -> its position, key -> its value }
local function inOrder(t, k)
  local order = orders[t]
  if order == nil then
    local keys, values, positions = {}, {}, {}
    for key, value in next, t do
      keys[#keys + 1], values[key] = key, value
    end
    table.sort(keys, before)
    for i = 1, #keys do positions[keys[i]] = i end
    order = { keys, positions, values }
    orders[t] = order
  end
  local key = order[1][k == nil and 1 or order[2][k] + 1]
  if key == nil then return nil end
  return key, order[3][key]
end
local function forgetOrders()
  for t in next, orders do orders[t] = nil end
end

-- Prepares a table about to be stored at `real[key]`: strips proxies (the real state never holds one), checks
-- that it is data, recording where each new table goes, and claims the new tables (`claim`: `owned` says the
-- host made the value, and no script holds it). Returns the real table, the state tables it moves (tables
-- already in the state, now placed somewhere new) as (table, new parent, new key) triples for `settle` to
-- check once the write is made, and a message when something is refused. Costs the size of the new part,
-- never of the tables it moves.
function S.prepare(value, real, key, owned, returned)
  local targets, parents, parentKeys = S.targets, S.parents, S.parentKeys
  local badKey = S.badKey
  local inner = targets[value]
  if inner ~= nil or parents[value] ~= nil or value == holder.state then
    if inner ~= nil and not B.fresh(value) then return value, nil, STALE end
    return inner or value, { inner or value, real, key }
  end
  if getmetatable(value) ~= nil then return value, nil, badTable(value, real, key) end
  local moves, seen, failure = nil, { [value] = FRESH }, nil -- the tables met: FRESH (new), or true (moved)
  local level = levelOf(real) + 1
  if level > STATE_DEPTH then return value, nil, tooDeep(real, key, level) end
  parents[value], parentKeys[value] = real, key
  local placed = S.placed + 1
  local swaps -- (table, key, real table) triples: the proxies in the value, swapped for their tables once it passed
  local ordered = false -- (walking in the keys' order: `inOrder`)
  local function walk(t, level)
    for k, item in (ordered and inOrder or next), t do
      failure = badKey(k, t)
      if failure then return end
      if istable(item) then
        local target = targets[item]
        if target ~= nil then
          if not B.fresh(item) then failure = STALE return end
          swaps = swaps or {}
          swaps[#swaps + 1], swaps[#swaps + 2], swaps[#swaps + 3] = t, k, target
          item = target
        end
        if seen[item] then
          failure = describe(t, k) .. ": the same table is in two places of the value stored (the state is a tree: store a copy)"
        elseif target ~= nil or parents[item] ~= nil or item == holder.state then
          seen[item] = true
          moves = moves or {}
          moves[#moves + 1], moves[#moves + 2], moves[#moves + 3] = item, t, k
        elseif getmetatable(item) ~= nil then
          failure = badTable(item, t, k)
        elseif level >= STATE_DEPTH then
          failure = tooDeep(t, k, level + 1)
        else
          seen[item] = FRESH
          parents[item], parentKeys[item] = t, k
          placed = placed + 1
          walk(item, level + 1)
        end
      else
        failure = badValue(item, t, k)
      end
      if failure then return end
    end
  end
  walk(value, level)
  S.placed = placed
  if failure then
    -- Nothing of a refused value is left changed or recorded: its tables are still the script's (a record would
    -- let one be stored later as if it were in the state already, unclaimed), and hold no real table of the state.
    local function forget()
      for t, mark in next, seen do
        if mark == FRESH then parents[t], parentKeys[t] = nil, nil end
      end
    end
    forget()
    -- The walk went in the tables' hash order, which differs from run to run: which of two places a shared table
    -- is named at, or which of two bad values is named, with it. The value is walked again in its keys' order, so
    -- that it is refused in the same words every time (a recording's replay compares them).
    ordered, moves, swaps, failure, seen = true, nil, nil, nil, { [value] = FRESH }
    parents[value], parentKeys[value] = real, key
    walk(value, level)
    forgetOrders()
    forget()
    return value, nil, failure
  end
  if swaps ~= nil then
    for i = 1, #swaps, 3 do rawset(swaps[i], swaps[i + 1], swaps[i + 2]) end
  end
  if owned then return value, moves, nil end
  local claimed = moves ~= nil and {} or nil
  value = claim(value, real, key, seen, claimed, returned)
  if moves ~= nil then -- a moved table's new parent is a claimed table's real one
    for i = 2, #moves, 3 do moves[i] = claimed[moves[i]] or moves[i] end
  end
  return value, moves, nil
end

-- Places a whole new state a function returned (`S.placeRoot`) in one pass of C when it is all new data
-- (`B.placefresh`, proxies.c: "A whole new state, placed at once"), and returns its real table; nil when it is
-- not, for `prepare` to place it or name what is wrong (nothing was changed then).
function S.placeFresh(value, real, key, owned)
  local level = levelOf(real) + 1
  if level > STATE_DEPTH or not istable(value) then return nil end
  local placed = B.placefresh(value, STATE_DEPTH - level, owned, holder.state)
  if placed ~= nil then S.parents[placed], S.parentKeys[placed] = real, key end
  return placed
end

-- A transaction's moves: the tables a write placed somewhere new although they were in the state, and the places
-- they left. Checked once, when the transaction commits: in the middle of one a table may well be in two places
-- (`table.remove`, `table.sort` and `table.insert` shift entries one write at a time; a reducer moves a table by
-- storing it first and removing it after). The barrier keeps them (moves.c), each once: `moved` holds each moved
-- table with the place it was in before its first move (`MOVED_*`: triples), `left` each place they left
-- (`LEFT_*`: pairs); `B.movecounts()` says how many. Its `__newindex` notes the moves it makes itself; the
-- others are noted here.
local moved, movedIndex, left, leftSeen = {}, {}, {}, {}
S.moved, S.movedIndex, S.left, S.leftSeen = moved, movedIndex, left, leftSeen
local MOVED_TABLE, MOVED_PARENT, MOVED_KEY, MOVED_LENGTH, LEFT_PARENT, LEFT_KEY, LEFT_LENGTH
function S.takeMoveLayouts(movedTable, movedParent, movedKey, movedLength, leftParent, leftKey, leftLength)
  MOVED_TABLE, MOVED_PARENT, MOVED_KEY, MOVED_LENGTH = movedTable, movedParent, movedKey, movedLength
  LEFT_PARENT, LEFT_KEY, LEFT_LENGTH = leftParent, leftKey, leftLength
end

-- After a write stored tables `prepare` found already in the state: noted, and their records point at their new
-- places.
function S.recordMoves(moves)
  if moves == nil then return end
  local parents, parentKeys = S.parents, S.parentKeys
  for i = 1, #moves, 3 do
    local t = moves[i]
    local oldParent, oldKey = parents[t], parentKeys[t]
    if t == holder.state then oldParent, oldKey = holder, "state" end
    B.recordmove(t, oldParent, oldKey, moves[i + 1], moves[i + 2])
  end
end

-- Whether tables inside `t` nest more than `room` levels below it.
local function nestsDeeper(t, room)
  for _, item in next, t do
    if istable(item) and (room <= 0 or nestsDeeper(item, room - 1)) then return true end
  end
  return false
end

-- What is wrong with the transaction's moves, or nil: a table moved inside itself or too deep for what it holds,
-- or a place it left holding it still (a table in two places). Costs the moves, times the depth of the state.
local function misplaced()
  local parents, parentKeys = S.parents, S.parentKeys
  local movedCount, leftCount = B.movecounts()
  for i = 0, movedCount - 1 do
    local at = i * MOVED_LENGTH
    local t, oldParent, oldKey = moved[at + MOVED_TABLE], moved[at + MOVED_PARENT], moved[at + MOVED_KEY]
    -- A table back in the parent it had (a list's entries shifted, sorted, swapped) is at its level, and in no
    -- cycle of its own: a cycle's links were a tree before, so one of them is a table whose parent changed, and
    -- that table's walk finds it; a move deeper is checked on the table that moved.
    local up, depth = parents[t], 0
    if up == oldParent then up = nil end
    -- A move undone within the action (`t.me = t` then `t.me = nil`: the new place no longer holds the table) left
    -- it where it was, as in Lua, in no cycle: its record is pointed back there.
    if up ~= nil and up[parentKeys[t]] ~= t then
      if oldParent ~= nil and oldParent[oldKey] == t then parents[t], parentKeys[t] = oldParent, oldKey end
      up = nil
    end
    while up ~= nil and up ~= holder and up ~= children do
      depth = depth + 1
      if up == t or depth > MAX_DEPTH then
        local newParent, newKey = parents[t], parentKeys[t]
        parents[t], parentKeys[t] = oldParent, oldKey -- (described from where it was: its new record is the cycle)
        return describe(newParent, newKey) .. ": a table cannot be stored inside itself (the state is a tree)"
      end
      up = parents[up]
    end
    -- A table moved deeper than it was: what it holds must still fit (its subtree is walked, only then).
    local level = depth + 1
    if depth > 0 and level > levelOf(oldParent) + 1 and nestsDeeper(t, STATE_DEPTH - level) then
      return tooDeep(parents[t], parentKeys[t], STATE_DEPTH + 1)
    end
  end
  -- A place a table left holds a table whose record says it is elsewhere, and both places are in the state.
  for i = 0, leftCount - 1 do
    local at = i * LEFT_LENGTH
    local parent, key = left[at + LEFT_PARENT], left[at + LEFT_KEY]
    local t = parent[key]
    if istable(t) and (parents[t] ~= parent or parentKeys[t] ~= key) and attached(parent) and attached(t) then
      return "after the action, one table is both at " .. describe(t) .. " and at " .. describe(parent, key)
        .. ": a table can be in one place of the state only (remove it from the old place, or store a copy)"
    end
  end
  return nil
end

-- At commit: what is wrong with the tables the transaction moved — one in two places, or inside itself —, or nil
-- when each is in one place. (The run of actions raises it, placed where the reducer is: runs.c.)
function S.movesFailure()
  if B.movecounts() == 0 then return nil end
  local failure = misplaced()
  B.clearmoves()
  return failure
end

-- The same, raised (the host rolls the transaction back).
function S.settleMoves()
  local failure = S.movesFailure()
  if failure then error(failure, 0) end
end

-- Forgets the moves of a transaction (checked, or undone).
function S.clearMoves()
  B.clearmoves()
end
