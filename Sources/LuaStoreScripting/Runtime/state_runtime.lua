-- The state runtime: keeps a scripted app's state in the VM (StateRuntime.swift loads it, trusted, once per
-- app VM; embedded into the binary at build time by the EmbedLua plugin).
--
-- The write barrier this file builds on — proxies, the undo journal, the change set, the modes and what runs in
-- C — is explained once, at the top of `Sources/CLuaState/barrier.c`. Here: the Lua halves of the metamethods
-- (read tracking; a key or value that is a table; a key that appears or goes away; errors), the transactions
-- around reduce, migrate and init, child stores' local states, and the readers (props, selectors,
-- subscriptions): while one runs its reads are recorded (table → keys; `#t` reads the table's structure,
-- `pairs` all of it, and a state table it returns all of that subtree), and an inverted index from (table, key)
-- to readers finds, from the change set alone, exactly which must run again at a flush. Also here: the rules
-- that keep the state data and a tree ("State is data"), reading what each committed action changed from its
-- journal ("The journal, read"; the barrier's C half does short journals), and the history time travel moves
-- through ("History").
--
-- Receives: the proxies' `__metatable` marker (StateRuntime.metatableMarker, which the sandbox's `rawset`
-- refuses) and how deep the state's tables may nest (LuaLimits.conversionDepth: what converts, saves and
-- records). Returns: the module `M`, whose functions StateRuntime.Function names.

local MARKER, STATE_DEPTH = ...
local rawget, rawset, rawlen, next, type, setmetatable, getmetatable, error, pcall =
  rawget, rawset, rawlen, next, type, setmetatable, getmetatable, error, pcall
local select, tostring = select, tostring
local istable = istable  -- type(v) == "table", without making a string
local makebarrier = makebarrier

local ALL, STRUCTURE = {}, {}          -- read markers: every key of a table; its length and set of keys
local EMPTY = {}                       -- never written: an empty set or map where there is none
local HOLDER_STATE = { state = true }  -- what every reader reads of `holder` (shared; never written)
local targets = {}                                     -- proxy -> real table
local proxies = {}                                     -- real table -> its proxy
local parents, parentKeys = {}, {}                     -- real table -> the table holding it, and the key (below)
local WEAK_KEYS, WEAK_ALL = { __mode = "k" }, { __mode = "kv" }
local installBarrier                                   -- (below) makes the metamethods for the current caches
local collect                                          -- (below) reads a committed action's changes
local keepHistory                                      -- (below) keeps a committed action's befores and afters
-- What `collect` read: the list (layout: "The journal, read"); its length is the barrier's
-- (`B.collectedcount`), copied into `collectedCount` while `collect` appends. (The barrier writes short
-- journals' changes as JSON itself, and this list's too when it can: changes.c, `changes_record`.)
local collected, collectedCount = {}, 0
local encodedRecords = {}                              -- [1]: the barrier's buffer of journal records

local tablesLeft = false                               -- a committed write replaced or removed a table
local reads = false                    -- whether a reader runs (its reads are noted: `note`)
local journal = {}                     -- (table, key, old value) triples of the open transaction
local dependents = setmetatable({}, { __mode = "k" })  -- real -> key -> { reader id -> true }
local readers = {}                     -- id -> { fn = function, reads = its last record, count = its reads }
local holder = { state = false }       -- holder.state is the app's state table
local children = {}                    -- child store id -> its local state table

local meta = { __metatable = MARKER }
local pending = { {} }                 -- pending[1]: real -> { key -> true }, the changes since the last flush
-- The barrier (`makebarrier`, in C; made by `installBarrier` below): the proxies' `__index` and `__newindex`,
-- the loop over a run of actions, and the state they share — the mode (CLOSED; WRITE for reduce and migrate;
-- READ for props, selectors, subscriptions), the journal's length, whether `subscriptions` must run again
-- before its result is used — which the functions here read and set through it.
local B
local CLOSED, WRITE, READ  -- the modes, as barrier.c numbers them (B.CLOSED, …: set by installBarrier)

local function clearCollected()
  for i = 1, B.collectedcount() do collected[i] = nil end
  B.collectedcount(0)
end

-- Records that `real[key]` changed (`structural`: a key appeared or went away), for the readers that depend
-- on it (`byKey` is `dependents[real]`): the barrier's `note_change` (journal.c), which its `__newindex` calls itself as the
-- write happens, so committing costs nothing.
local function noteChange(real, byKey, key, structural)
  B.notechange(real, byKey, key, structural)
end

-- The proxy of a real table, made (by the barrier, in C) if it has none. The caches are strong (cheaper to
-- fill and to collect) until 4,096 proxies were made since they were last emptied (props walking a large
-- list, say); then the barrier turns them weak until they are replaced, so proxies no one holds any more can
-- be collected. Either way, one table has one proxy while anyone holds it.
local function proxy(real)
  return B.proxy(real)
end

-- The proxy of `real`, reached as `parent[key]`: a proxy made now records where its table is.
local function proxyAt(real, parent, key)
  if proxies[real] == nil then parents[real], parentKeys[real] = parent, key end
  return B.proxy(real)
end

-- Proxies live only while a function runs, so between calls the caches may start afresh; doing so once they
-- hold a few hundred entries keeps them small (a reducer touching a different item each time would otherwise
-- grow them without end). They are emptied in place, not replaced: a table keeps its slots when emptied, so
-- refilling it costs no rehashing (replacing them made every toggle of a not-recently-touched item dearer:
-- docs/benchmarks.md). Caches a large evaluation grew (and made weak) are replaced, to let their slots go.
-- The caches hold their tables strongly, so they are also emptied by a flush after a table left the state
-- (a write replaced or removed one): such a table (a list the reducer replaced) is released by the next
-- flush at the latest.
--
-- The records of where tables are (`parents`, "State is data" below) go with the caches: a record is kept as
-- long as its table's proxy, so every table with a proxy has one. Tables a write stored count like proxies
-- made (a large init records every table once). `force` empties everything (after a rollback, which may have
-- put tables back where their records no longer say).
local placed = 0 -- tables stored since the caches were last emptied (each has a record)

local function trimCaches(afterFlush, force)
  local made = B.made()
  if force or made + placed > 512 or (afterFlush and tablesLeft and made + placed > 0) then
    tablesLeft = false
    if made >= 4096 or placed >= 512 then -- (cheaper to let large caches go than to empty them)
      targets, proxies, parents, parentKeys = {}, {}, {}, {}
      installBarrier()
    else
      B.clear(targets, proxies, parents, parentKeys)
    end
    B.made(0)
    placed = 0
  end
end

-- The barrier notes a reader's reads itself (its `__index`, and `B.note` for the markers the functions here
-- note), against the record of what the reader read last time (`B.setmode(READ, last)`): mostly a reader reads
-- just that, and then `B.endread` says so and nothing is allocated; otherwise it gives the new record, and the
-- old one's key sets are kept for the next records (`B.recycle`).
local function note(real, key)
  B.note(real, key)
end

-- The errors of a metamethod; `level` 2 is the metamethod's caller (3 for the barrier's Lua halves, which
-- its C halves call).
local function closed(level)
  error("state tables can be used only while reduce, props, a selector or subscriptions runs", level + 1)
end

local STALE = "a state table kept from an earlier call was used: state tables (those a function received, and those"
  .. " it stored) can be used only during that call"

local function stale(level)
  error(STALE, level + 1)
end

-- The real table of the proxy `p`, or nil when `p` is not a proxy; a proxy kept from an earlier call is an
-- error (the barrier stamps every proxy it hands out with the running call).
local function current(p, level)
  local real = targets[p]
  if real ~= nil and not B.fresh(p) then stale(level + 1) end
  return real
end

-- Strips proxies out of a value about to be returned (props, commands): the host converts real tables. `what`
-- names the value in the error for one nested deeper than anything converts.
local function unwrap(value, what)
  if not istable(value) then return value end
  local real = targets[value]
  if real ~= nil then
    if not B.fresh(value) then error(what .. ": " .. STALE, 0) end
    return real
  end
  -- The common case (props of plain values, no commands inside): nothing to strip, nothing to allocate.
  local flat = true
  for key, item in next, value do
    if istable(item) or istable(key) then flat = false break end
  end
  if flat then return value end
  local seen = {}
  local function strip(t, depth)
    if seen[t] then return end
    if depth >= STATE_DEPTH then error(what .. ": tables nested deeper than " .. STATE_DEPTH .. " levels", 0) end
    seen[t] = true
    for key, item in next, t do
      if istable(item) then
        local inner = targets[item]
        if inner ~= nil and not B.fresh(item) then error(what .. ": " .. STALE, 0) end
        if inner ~= nil then rawset(t, key, inner) else strip(item, depth + 1) end
      end
    end
  end
  strip(value, 1)
  return value
end

-- State is data ------------------------------------------------------------------------------------
--
-- The state holds only strings, booleans, finite numbers and tables of those (no metatables), under keys that
-- are strings, booleans or finite numbers; and it is a tree: a table is in one place of it. So every state
-- converts exactly (to Swift, to a recording, to JSON), and every table has one path, which the journal names
-- changes by. Anything else is refused at the write, with the script's line, and the transaction rolls back.
--
-- Where each table is: `parents[t]` holds t under `parentKeys[t]`, recorded when t's proxy is made (the
-- script reached t from there) or when t is stored. Records may be stale (t was removed or replaced since):
-- `attached` checks each link. They live as long as the proxy caches and are emptied with them; the roots
-- (the app's state, children's states) need none.

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
local MAX_DEPTH = 1000 -- deeper than any state converts: only a cycle in the records goes further

-- The level of the real table `t` in its state, from the records: a root is 1 (`holder` and `children`, which
-- hold the roots, are 0). Costs the depth of `t`.
local function levelOf(t)
  local level = 0
  while t ~= nil and t ~= holder and t ~= children and level <= MAX_DEPTH do
    level = level + 1
    t = parents[t]
  end
  return level
end

-- Whether the real table `t` is in a state now: each recorded link up to a root still holds it.
local function attached(t)
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

-- How a message names the real table `t` (and `key` inside it): `state.todos[3]`, from the records.
local function describe(t, key)
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

local DATA = "the state holds only data: strings, booleans, finite numbers and tables of those"

-- The functions below return a message for what they refuse (nil when all is well); the caller raises it
-- where the script's line is known.

-- A key that is not data, new in `t`.
local function badKey(key, t)
  local kind = type(key)
  if kind == "string" or kind == "boolean" then return nil end
  if kind == "number" then
    if key ~= huge and key ~= -huge then return nil end -- (a NaN key never gets here: Lua refuses it first)
    return describe(t) .. ": " .. tostring(key) .. " cannot be a key in the state (" .. DATA .. ")"
  end
  return describe(t) .. ": a " .. kind .. " cannot be a key in the state (" .. DATA .. ")"
end

-- A value that is not data (tables are `prepare`'s), about to be stored at `t[key]`.
local function badValue(value, t, key)
  local kind = type(value)
  if kind == "string" or kind == "boolean" or kind == "nil" then return nil end
  if kind == "number" then
    if value == value and value ~= huge and value ~= -huge then return nil end
    return describe(t, key) .. ": " .. (value == value and tostring(value) or "NaN") .. " cannot be stored in the state (" .. DATA .. ")"
  end
  return describe(t, key) .. ": a " .. kind .. " cannot be stored in the state (" .. DATA .. ")"
end

local function tooDeep(t, key, level)
  return describe(t, key) .. ": tables in the state nest at most " .. STATE_DEPTH .. " levels deep (this would be level "
    .. level .. "; what is deeper could not be saved, recorded or shown)"
end

local function badTable(item, t, key)
  if getmetatable(item) == MARKER then return STALE end
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
  local real = B.claim(t, returned)
  if claimed then claimed[t] = real end
  parents[t], parentKeys[t] = nil, nil
  parents[real], parentKeys[real] = parent, key
  for k, item in next, real do
    if seen[item] == FRESH then rawset(real, k, claim(item, real, k, seen, claimed, returned)) end
  end
  return real
end

-- Prepares a table about to be stored at `real[key]`: strips proxies (the real state never holds one), checks
-- that it is data, recording where each new table goes, and claims the new tables (`claim`: `owned` says the
-- host made the value, and no script holds it). Returns the real table, the state tables it moves (tables
-- already in the state, now placed somewhere new) as (table, new parent, new key) triples for `settle` to
-- check once the write is made, and a message when something is refused. Costs the size of the new part,
-- never of the tables it moves.
local function prepare(value, real, key, owned, returned)
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
  placed = placed + 1
  local function walk(t, level)
    for k, item in next, t do
      failure = badKey(k, t)
      if failure then return end
      if istable(item) then
        local target = targets[item]
        if target ~= nil then
          if not B.fresh(item) then failure = STALE return end
          rawset(t, k, target)
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
  if failure or owned then return value, moves, failure end
  local claimed = moves ~= nil and {} or nil
  value = claim(value, real, key, seen, claimed, returned)
  if moves ~= nil then -- a moved table's new parent is a claimed table's real one
    for i = 2, #moves, 3 do moves[i] = claimed[moves[i]] or moves[i] end
  end
  return value, moves, nil
end

-- A transaction's moves: each table a write placed somewhere new although it was in the state, with the
-- place it left ((table, old parent, old key) triples). Checked once, when the transaction commits: in the
-- middle of one a table may well be in two places (`table.remove`, `table.sort` and `table.insert` shift
-- entries one write at a time; a reducer moves a table by storing it first and removing it after).
local moved, movedCount = {}, 0

-- After a write stored tables `prepare` found already in the state: their records point at their new places,
-- and the places they left are noted for `settleMoves`.
local function recordMoves(moves)
  if moves == nil then return end
  for i = 1, #moves, 3 do
    local t = moves[i]
    local oldParent, oldKey = parents[t], parentKeys[t]
    if t == holder.state then oldParent, oldKey = holder, "state" end
    moved[movedCount + 1], moved[movedCount + 2], moved[movedCount + 3] = t, oldParent, oldKey
    movedCount = movedCount + 3
    parents[t], parentKeys[t] = moves[i + 1], moves[i + 2]
  end
  B.setmoved()
end

-- Whether tables inside `t` nest more than `room` levels below it.
local function nestsDeeper(t, room)
  for _, item in next, t do
    if istable(item) and (room <= 0 or nestsDeeper(item, room - 1)) then return true end
  end
  return false
end

-- At commit: every table the transaction moved is in one place, and not inside itself; raises otherwise
-- (the host rolls the transaction back). Costs the moves, times the depth of the state.
local function settleMoves()
  local count = movedCount
  movedCount = 0
  for i = 1, count, 3 do
    local t, oldParent, oldKey = moved[i], moved[i + 1], moved[i + 2]
    moved[i], moved[i + 1], moved[i + 2] = nil, nil, nil
    local up, depth = parents[t], 0
    while up ~= nil and up ~= holder and up ~= children do
      depth = depth + 1
      if up == t or depth > MAX_DEPTH then
        for j = i + 3, count do moved[j] = nil end
        local newParent, newKey = parents[t], parentKeys[t]
        parents[t], parentKeys[t] = oldParent, oldKey -- (described from where it was: its new record is the cycle)
        error(describe(newParent, newKey) .. ": a table cannot be stored inside itself (the state is a tree)", 0)
      end
      up = parents[up]
    end
    -- A table moved deeper than it was: what it holds must still fit (its subtree is walked, only then).
    local level = depth + 1
    if level > levelOf(oldParent) + 1 and nestsDeeper(t, STATE_DEPTH - level) then
      for j = i + 3, count do moved[j] = nil end
      error(tooDeep(parents[t], parentKeys[t], STATE_DEPTH + 1), 0)
    end
    if oldParent ~= nil and (oldParent ~= parents[t] or oldKey ~= parentKeys[t]) and oldParent[oldKey] == t
        and attached(oldParent) and attached(t) then
      for j = i + 3, count do moved[j] = nil end
      error("after the action, one table is both at " .. describe(t) .. " and at " .. describe(oldParent, oldKey)
        .. ": a table can be in one place of the state only (remove it from the old place, or store a copy)", 0)
    end
  end
end

-- The barrier's `__index` and `__newindex` (`makebarrier`, trusted host code) do the common cases in C —
-- while writing: a read, or a write to a key that stays, of a value that is not a table — and hand every
-- other access, unchanged, to the Lua functions below, which are what the metamethods were before. So the
-- functions below are always called from C: the script that caused an error is at level 3, not 2.

local function indexFallback(p, key)
  if B.mode() == CLOSED then closed(3) end
  local real = current(p, 3)
  if real == nil then stale(3) end
  local keyTarget = targets[key] -- a proxy used as a key stands for its table (a lookup is cheaper than a type test)
  if keyTarget ~= nil then key = keyTarget end
  if reads then note(real, key) end
  local value = real[key]
  if istable(value) then return proxyAt(value, real, key) end
  return value
end

local function newindexFallback(p, key, value)
  local mode = B.mode()
  if mode ~= WRITE then
    if mode == CLOSED then closed(3) end
    error("props, selectors and subscriptions cannot change the state", 3)
  end
  local real = current(p, 3)
  if real == nil then stale(3) end
  -- Refused before anything is journaled: undoing a journaled write to such a key would itself fail.
  if key == nil then error("table index is nil", 3) elseif key ~= key then error("table index is NaN", 3) end
  local moves, failure
  if istable(value) then
    value, moves, failure = prepare(value, real, key)
  else
    failure = badValue(value, real, key)
  end
  if failure then error(failure, 3) end
  local old = real[key]
  if same(old, value) then return end
  if old == nil then
    failure = badKey(key, real)
    if failure then error(failure, 3) end
  end
  B.record(real, key, old)
  real[key] = value
  recordMoves(moves)
  local byKey = dependents[real]
  if byKey ~= nil then
    -- Often the change is already recorded (the same field written again since the last flush).
    local keys = pending[1][real]
    if keys == nil or not keys[key] or old == nil or value == nil or not B.dirty() then
      noteChange(real, byKey, key, old == nil or value == nil)
    end
  end
  if istable(old) then tablesLeft = true end
end

meta.__len = function(p)
  if B.mode() == CLOSED then closed(2) end
  local real = current(p, 2)
  if real == nil then stale(2) end
  if reads then note(real, STRUCTURE) end
  return rawlen(real)
end

meta.__pairs = function(p)
  if B.mode() == CLOSED then closed(2) end
  local real = current(p, 2)
  if real == nil then stale(2) end
  if reads then note(real, ALL) end
  local key
  return function()
    local value
    key, value = next(real, key)
    if istable(value) then value = proxyAt(value, real, key) end
    return key, value
  end
end

-- Transactions -------------------------------------------------------------------------------------

local M = {}

-- Ends a transaction. Nothing is left to record: the barrier (and `replace`, for the runtime's own writes)
-- recorded each change as it happened.
local function commit()
  if movedCount > 0 then settleMoves() end
  B.setmode(CLOSED)
end

-- Replaces `tbl[key]` (the root state in `holder`, a child's state in `children`) as a journaled write.
local function replace(tbl, key, value)
  local old = tbl[key]
  B.record(tbl, key, old)
  tbl[key] = value
  local byKey = dependents[tbl]
  if byKey ~= nil then noteChange(tbl, byKey, key, old == nil or value == nil) end
  if istable(old) then tablesLeft = true end
end

-- Stores a whole state (`holder.state`, a child's in `children`) that `what` (init, reduce, migrate) gave,
-- checked as any stored table is.
local function placeRoot(tbl, key, value, what, owned)
  local real, moves, failure = prepare(value, tbl, key, owned, true) -- (a root is placed once its maker returned)
  if failure then error(what .. ": " .. failure, 0) end
  replace(tbl, key, real)
  recordMoves(moves)
end

-- The journal is kept until the next transaction begins, so the host can still undo the last one (when
-- what the reducer returned turns out to be invalid, or a reload fails after its migration ran).
local function begin()
  B.begin()
  reads = false
end

-- Installs a state table a reducer returned instead of changing the one it received.
local function adopt(result)
  if not istable(result) then
    error("reduce must return the state table, a new state table, or nothing (it returned a " .. type(result) .. ")", 0)
  end
  placeRoot(holder, "state", result, "the state reduce returned")
end

-- Makes the barrier over the current caches (again whenever they are replaced; its state carries over).
function installBarrier()
  B = makebarrier {
    control = B and B.control, targets = targets, proxies = proxies, meta = meta, weakkeys = WEAK_KEYS,
    weakall = WEAK_ALL, parents = parents, parentkeys = parentKeys, journal = journal, dependents = dependents, changes = pending, holder = holder,
    index = indexFallback, newindex = newindexFallback, all = ALL, structure = STRUCTURE, adopt = adopt, settle = settleMoves,
    collect = collect, collected = collected, children = children, encoded = encodedRecords,
    holderstate = HOLDER_STATE,
  }
  meta.__index, meta.__newindex = B.index, B.newindex
  CLOSED, WRITE, READ = B.CLOSED, B.WRITE, B.READ
end

-- Whether runs collect each action's changes (the host journals: `setJournaling`).
local journalingOn = false

-- Reduces list[first..last] in order, each action its own transaction with its own time budget, in one call
-- from the host (the fixed cost of crossing into the VM is paid once per run, not per action), in the
-- barrier's C loop. Stops after an action the host must look at before the next one: one that returned
-- commands (the host validates them and may undo it), one that made the declared subscriptions stale (the
-- store diffs them), or one refused for having no string `type` (the host words the error). Returns (the
-- layout `StateRuntime.RunResult` names) its position, its commands (proxies stripped), whether
-- `subscriptions` must run again, whether it was refused; while journaling, the run's journal records
-- (`B.records()`: the buffer and its length, read in the same crossing); then what the readers gave
-- (`flushWhenObserved`, below). A failing action raises; `runPosition` then says which one it was (the ones
-- before it are committed, its own writes are in the journal for the host to roll back) and hands over what
-- the readers gave before it. Proxies a run makes are trimmed before the next one.
--
-- `flushWhenObserved` (a store whose observers hear of every action): after an action that changed what a
-- reader read, or replaced the state, the readers due run there and then (`flushInRun`), in the same call,
-- and the run goes on — unless a value holds a state table (a path observer's, say), which the next action
-- could change before the host converts it: the run stops there. Their values (`flushed`) are handed over
-- with the results, in order, for the host to deliver before anything else happens. Then also whether nothing is left for a flush (`settled`: no change
-- a reader read since the last of them, no table left for the caches to let go), and the message of a flush
-- that failed (the run stopped after its action) and whether it ran out of time.
local flushed = { count = 0, ids = {}, values = {}, failed = {} } -- what readers gave, in order (reused)

local function emptyFlushed()
  local ids, values, failed = flushed.ids, flushed.values, flushed.failed
  for i = 1, flushed.count do ids[i], values[i], failed[i] = nil, nil, nil end
  flushed.count = 0
end

local markDueReaders, evaluateDue -- (below, with the readers)

-- Returns whether the run must stop after this action: a value holds a state table, which the next action
-- could change before the host converts it.
local function flushInRun()
  markDueReaders(false)
  return evaluateDue()
end

-- Whether a flush has nothing to do: no change since the last one (a change a reader read is in the change
-- set too), no table left for the caches to let go.
local function settled()
  return next(pending[1]) == nil and not tablesLeft
end

function M.reduceRun(reduce, list, first, last, flushWhenObserved)
  if B.made() + placed > 512 then trimCaches() end
  if B.collectedcount() > 0 then clearCollected() end
  if flushed.count > 0 then emptyFlushed() end
  reads = false
  local position, commands, dirty, refused, flushFailure, flushTimedOut = B.run(reduce, list, first, last,
    readers.subscriptions ~= nil, flushWhenObserved and flushInRun or false)
  if commands ~= nil then commands = unwrap(commands, "the commands") end
  local records, length
  if journalingOn then records, length = B.records() end
  if not flushWhenObserved then return position, commands, dirty, refused, records, length end
  return position, commands, dirty, refused, records, length,
    flushFailure == nil and settled(), flushed.count, flushed.ids, flushed.values, flushed.failed, flushFailure,
    flushTimedOut
end

-- Which action of the last run was being reduced, and what the readers gave before it (a run that raised).
function M.runPosition()
  return B.position(), flushed.count, flushed.ids, flushed.values, flushed.failed
end

-- One action (a run of one), with reduceRun's results.
local single = {}
function M.reduce(reduce, action, flushWhenObserved)
  if not istable(action) then return 1, nil, false, true end
  single[1] = action
  local position, commands, _, refused, records, length, isSettled, count, ids, values, failed, failure, timedOut =
    M.reduceRun(reduce, single, 1, 1, flushWhenObserved)
  single[1] = nil
  return position, commands, B.dirty(), refused, records, length, isSettled, count, ids, values, failed, failure,
    timedOut
end

-- Undoes the open or last transaction, newest write first.
function M.rollback()
  B.rollback()
  reads = false
  for i = 1, movedCount do moved[i] = nil end
  movedCount = 0
  trimCaches(false, true)
end

-- Runs `fn(state, ...)` as a transaction that is not an action (init's result, migrate).
function M.transform(fn, ...)
  begin()
  local state = proxy(holder.state)
  local result = fn(state, ...)
  if result ~= nil and result ~= state then
    if not istable(result) then error("the function must return a state table or nothing", 0) end
    placeRoot(holder, "state", result, "the state it returned")
  end
  commit()
end

function M.setState(state, owned)
  if not istable(state) then error("init must return a table (it returned a " .. type(state) .. ")", 0) end
  begin()
  placeRoot(holder, "state", state, "init's state", owned)
  commit()
  trimCaches(false, true) -- the records of a whole new state are not needed past its transaction
end

function M.state() return holder.state end

-- Child stores: local state of their own, reduced by their own module, never writing the root's.

function M.setChild(id, state)
  if not istable(state) then error("a child's init must return a table (it returned a " .. type(state) .. ")", 0) end
  begin()
  placeRoot(children, id, state, "the child's init state")
  commit()
end

function M.removeChild(id)
  children[id] = nil
  tablesLeft = true
end

function M.childState(id) return children[id] end

function M.reduceChild(id, reduce, action)
  begin()
  local state = proxy(children[id])
  local result, commands = reduce(state, action)
  if result ~= nil and result ~= state then
    if not istable(result) then
      error("a child's reduce must return its state table, a new table, or nothing (it returned a " .. type(result) .. ")", 0)
    end
    placeRoot(children, id, result, "the state the child's reduce returned")
  end
  commands = unwrap(commands, "the commands")
  commit()
  return commands
end

-- The journal, read: what each action changed -------------------------------------------------------
--
-- After a transaction commits, its journal says what it wrote; `collect` turns that into changes — each
-- (table, key) written whose value now differs from the one before the transaction, named by its path from the
-- root, unless the table is no longer in the state (removed since, or a child store's) or a change further up
-- carries it (a table stored whole) — and appends them to `collected`, which the host reads once per run. The
-- cost is the transaction's writes times the depth of the state, never its size. Layout, for each action that
-- changed something: its position in the run, the number of changes, then each change: its depth d, the d keys
-- of its path, and the new value; a removal is written as -d, without a value (d = 0: the whole state).

local written = {}                -- while collecting: real -> key -> the journal position of the key's first write
local spareWritten, spareWrittenCount = {}, 0
local scratch = {}                -- a path's keys, leaf first

-- Whether the journaled write at `position` put a different value where it wrote (its table holds `value`).
local function changedAt(position, value)
  return position ~= nil and not same(value, journal[position + 2])
end

-- Appends the change of `t[key]` (now `value`), unless it is not the root state's to report.
local function appendChange(t, key, value)
  local depth = 0
  if t == holder then
    if key ~= "state" then return false end
  else
    depth = 1
    scratch[1] = key
    while t ~= holder.state do
      if depth > MAX_DEPTH then return false end
      local parent = parents[t]
      if parent == nil or parent == holder or parent == children then return false end
      local parentKey = parentKeys[t]
      if parent[parentKey] ~= t then return false end
      local positions = written[parent]
      if positions ~= nil and changedAt(positions[parentKey], t) then return false end
      depth = depth + 1
      scratch[depth] = parentKey
      t = parent
    end
    local positions = written[holder]
    if positions ~= nil and changedAt(positions.state, t) then return false end
  end
  local c = collectedCount + 1
  collected[c] = value == nil and -depth or depth
  for i = depth, 1, -1 do
    c = c + 1
    collected[c] = scratch[i]
    scratch[i] = nil
  end
  if value ~= nil then
    c = c + 1
    collected[c] = value
  end
  collectedCount = c
  return true
end

-- History (time travel): for each committed transaction while it is on, each (table, key) it changed with the
-- value before and after — (table, key, before, after) quads, tables kept by identity. Going back writes the
-- befores, going forward the afters: no reducer runs again, nothing is converted, and the cost is what the
-- entries between the two points changed. The newest `historyLimit` entries are kept; `cursor` is the entry
-- the state is at (`historyLast` when at the present).
local history, historyFirst, historyLast, historyLimit, cursor = {}, 1, 0, 0, 0

-- Keeps the entry of the transaction just committed: each (table, key) its journal wrote, with the value the
-- first write found and the value now, unless they are the same. `written` (filled by `collect`) says which write
-- was the first; without it (`short`: the barrier read a short journal itself) the writes before are looked
-- through.
function keepHistory(count, short)
  local entry, n = {}, 0
  for i = 1, count, 3 do
    local t, key = journal[i], journal[i + 1]
    local first
    if short then
      first = true
      for j = 1, i - 3, 3 do
        if journal[j] == t and journal[j + 1] == key then first = false break end
      end
    else
      first = written[t][key] == i
    end
    if first then
      local after = t[key]
      if not same(after, journal[i + 2]) then
        entry[n + 1], entry[n + 2], entry[n + 3], entry[n + 4] = t, key, journal[i + 2], after
        n = n + 4
      end
    end
  end
  entry.n = n -- (not `#entry`: a value before or after may be nil, a hole in the list)
  historyLast = historyLast + 1
  history[historyLast] = entry
  cursor = historyLast
  while historyLast - historyFirst + 1 > historyLimit do
    history[historyFirst] = nil
    historyFirst = historyFirst + 1
  end
end

-- Writes `value` at real[key] outside any transaction (history only), telling the readers.
local function restore(real, key, value)
  local old = real[key]
  real[key] = value
  local byKey = dependents[real]
  if byKey ~= nil then noteChange(real, byKey, key, old == nil or value == nil) end
  if istable(old) or istable(value) then tablesLeft = true end
end

-- Appends what the last transaction (the action at `position`) changed; `historyOnly`: the barrier read its
-- changes itself (a short journal), only the history entry is to be kept.
function collect(position, historyOnly)
  local count = B.count()
  if historyOnly then
    if historyLimit > 0 then keepHistory(count, true) end
    return
  end
  if count == 0 then
    if historyLimit > 0 then keepHistory(0) end -- every committed action has an entry, empty or not
    return
  end
  for i = 1, count, 3 do
    local t, key = journal[i], journal[i + 1]
    local positions = written[t]
    if positions == nil then
      if spareWrittenCount > 0 then
        positions = spareWritten[spareWrittenCount]
        spareWritten[spareWrittenCount] = nil
        spareWrittenCount = spareWrittenCount - 1
      else
        positions = {}
      end
      written[t] = positions
    end
    if positions[key] == nil then positions[key] = i end
  end
  if historyLimit > 0 then keepHistory(count) end
  collectedCount = B.collectedcount()
  local start = collectedCount
  collected[start + 1], collected[start + 2] = position, 0
  collectedCount = start + 2
  local changes = 0
  for i = 1, count, 3 do
    local t, key = journal[i], journal[i + 1]
    if written[t][key] == i then
      local value = t[key]
      if not same(value, journal[i + 2]) and appendChange(t, key, value) then changes = changes + 1 end
    end
  end
  spareWrittenCount = B.emptysets(written, spareWritten, spareWrittenCount, 64)
  if changes == 0 then
    collected[start + 1], collected[start + 2] = nil, nil
    collectedCount = start
  else
    collected[start + 2] = changes
  end
  B.collectedcount(collectedCount)
end

function M.setJournaling(on)
  journalingOn = on
  B.setjournaling(on, historyLimit > 0)
end

-- What the last transaction changed (as position 1), in `collected`'s layout: returns its length and it.
function M.changes()
  clearCollected()
  collect(1)
  return B.collectedcount(), collected
end

-- What the last run collected: its length and the list (read it before the next run).
function M.collected() return B.collectedcount(), collected end

-- The journal records of the last run (its committed actions' changes, as a recording's JSON), in one string
-- (`changes_record` in changes.c says how; `ScriptEngine.encodedJournal` reads it).
function M.encoded() return B.records() end

-- Keeps the newest `limit` history entries (0: none, and what was kept goes). Returns the first and last.
function M.setHistory(limit)
  historyLimit = limit
  B.setjournaling(journalingOn, limit > 0)
  while historyLast - historyFirst + 1 > limit do
    history[historyFirst] = nil
    historyFirst = historyFirst + 1
  end
  if historyLast < historyFirst then cursor = historyLast end
  return historyFirst, historyLast
end

-- Forgets the `count` oldest entries (the host keeps the history within a size).
function M.dropOldestHistory(count)
  for _ = 1, count do
    if historyFirst > historyLast then break end
    history[historyFirst] = nil
    historyFirst = historyFirst + 1
  end
  if cursor < historyFirst - 1 then cursor = historyFirst - 1 end
end

-- Forgets the newest entry (its transaction was undone after it committed).
function M.dropNewestHistory()
  if historyLast >= historyFirst then
    history[historyLast] = nil
    historyLast = historyLast - 1
    cursor = historyLast
  end
end

-- Moves the state to just after entry `target` (historyFirst - 1: before the first one kept), undoing or
-- redoing the entries between; the readers of what moved run again at the next flush.
function M.travel(target)
  if target < historyFirst - 1 or target > historyLast then error("history entry " .. target .. " is not kept", 0) end
  while cursor > target do
    local entry = history[cursor]
    for i = entry.n - 3, 1, -4 do restore(entry[i], entry[i + 1], entry[i + 2]) end
    cursor = cursor - 1
  end
  while cursor < target do
    cursor = cursor + 1
    local entry = history[cursor]
    for i = 1, entry.n, 4 do restore(entry[i], entry[i + 1], entry[i + 3]) end
  end
  trimCaches(false, true) -- tables moved: the records of where they are start afresh
  B.setdirty(true)
end

-- Drops the entries after the cursor (going on from a past point).
function M.truncateHistory()
  for i = cursor + 1, historyLast do history[i] = nil end
  historyLast = cursor
end

-- Inspecting (the devtools): reads of the real tables, outside any transaction; nothing is recorded or written.

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

-- Readers: props, selectors, subscriptions ---------------------------------------------------------

-- Makes `recorded` (`count` reads) the record of what reader `id` read, in place of its last one: the index of
-- readers (`dependents`) follows.
local function index(reader, id, recorded, count)
  recorded[holder] = HOLDER_STATE
  local old = reader.reads
  if old then B.recycle(old, id) end
  for real, keys in next, recorded do
    local byKey = dependents[real]
    if byKey == nil then
      byKey = {}
      dependents[real] = byKey
    end
    for key in next, keys do
      local ids = byKey[key]
      if ids == nil then
        ids = {}
        byKey[key] = ids
      end
      ids[id] = true
    end
  end
  reader.reads, reader.count = recorded, count
end

-- A state table a reader returns is converted whole, so the reader depends on all of it. Tables the reader
-- made itself (the props table, say) are not state: only the state tables inside them count. (Noting those
-- fresh tables would add an entry to `dependents`, a weak-keyed table, on every evaluation, and weak tables
-- full of dead keys make every collection slower.) Returns whether the value holds a state table: such a value
-- changes with the state, so it must be converted before the next action writes.
local function dependOnResult(value, seen, inState, depth)
  if not istable(value) then return false end
  depth = depth or 1
  if depth > STATE_DEPTH then error("the value returned: tables nested deeper than " .. STATE_DEPTH .. " levels", 0) end
  local real = targets[value]
  if real ~= nil then
    if not B.fresh(value) then error("the value returned: " .. STALE, 0) end
    inState = true
  else
    real = value
  end
  if seen ~= nil then
    if seen[real] then return false end
    seen[real] = true
  end
  if inState then note(real, ALL) end
  local holdsState = inState
  for _, item in next, real do
    if istable(item) then
      -- The cycle guard is made only once there is something to recurse into: a flat result allocates nothing.
      seen = seen or { [real] = true }
      if dependOnResult(item, seen, inState, depth + 1) then holdsState = true end
    end
  end
  return holdsState
end

-- Whether a value the last `evaluate` gave holds a state table (`dependOnResult`).
local lastHeldState = false

local function evaluate(id, ...)
  local reader = readers[id]
  B.setmode(READ, reader.reads)
  reads = true
  local value
  if reader.child ~= nil then
    note(children, reader.child)
    value = reader.fn(proxy(children[reader.child]), proxy(holder.state), ...)
  else
    value = reader.fn(proxy(holder.state), ...)
  end
  -- Most results are flat (no table inside, not a proxy): nothing to depend on, nothing to strip.
  local flat = B.isflat(value)
  lastHeldState = not flat and dependOnResult(value, nil, false)
  local recorded, count = B.endread(reader.count)
  reads = false
  if recorded ~= nil then index(reader, id, recorded, count) end
  if flat then return value end
  return unwrap(value, "the value returned")
end

-- Ends the run of reader `id` that raised: what it read before the error is what its outcome depended on, so
-- that is its record now (a reader failing on its first run would otherwise depend on nothing and never run
-- again: props failing on the initial state would silence every later state's props).
local function endFailedRead(id)
  local reader = readers[id]
  if reader ~= nil and B.mode() == READ then
    local recorded, count = B.endread(reader.count)
    if recorded ~= nil then index(reader, id, recorded, count) end
  end
  B.setmode(CLOSED)
  reads = false
end

function M.register(id, fn, child)
  local old = readers[id]
  readers[id] = { fn = fn, child = child, reads = old and old.reads, count = old and old.count }
end

function M.unregister(id)
  local reader = readers[id]
  if reader then
    if reader.reads then B.recycle(reader.reads, id) end
    readers[id] = nil
  end
end

function M.path(...)
  local keys, n = { ... }, select("#", ...)
  return function(state)
    local value = state
    for i = 1, n do
      if not istable(value) then return nil end
      value = value[keys[i]]
    end
    return value
  end
end

function M.evaluate(id, ...)
  local ok, value = pcall(evaluate, id, ...)
  if ok then return value end
  endFailedRead(id)
  error(value, 0)
end

-- The subscriptions function, run only when its inputs changed; returns nil when they did not.
function M.subscriptions(force)
  if not force and not B.dirty() then return nil end
  B.setdirty(false)
  local ok, value = pcall(evaluate, "subscriptions")
  B.setmode(CLOSED)
  reads = false
  if not ok then
    B.setdirty(true)
    error(value, 0)
  end
  return value or {}
end

-- The readers a flush will run, in order, and the set of them (reused, emptied after).
local due, dueCount, isDue = {}, 0, {}

local function markDue(id)
  if not isDue[id] then
    isDue[id] = true
    dueCount = dueCount + 1
    due[dueCount] = id
  end
end

local function clearDue()
  for i = 1, dueCount do
    isDue[due[i]] = nil
    due[i] = nil
  end
  dueCount = 0
end

-- Marks the readers due that the changes since the last flush make due (all of them when `everything`), and
-- starts the change set afresh.
function markDueReaders(everything)
  if dueCount > 0 then clearDue() end -- left by a flush the time budget cut short
  if everything then
    for id in next, readers do markDue(id) end
  end
  -- The change set is emptied in place and its key sets kept for the next changes (a flush after every action
  -- made two tables each time, for the collector).
  dueCount = B.takechanges(pending[1], everything and EMPTY or dependents, ALL, isDue, due, dueCount)
end

-- Runs the readers due (`subscriptions` excepted: the store runs it), each protected, and appends what each gave
-- to `flushed`: its id, and its value, or its error's message (`failed`). Returns whether a value holds a state
-- table (`dependOnResult`).
function evaluateDue()
  if dueCount == 0 then return false end
  local ids, values, failed = flushed.ids, flushed.values, flushed.failed
  local count, holdsState = flushed.count, false
  for i = 1, dueCount do
    local id = due[i]
    if id ~= "subscriptions" then
      lastHeldState = false
      local ok, value = pcall(evaluate, id)
      count = count + 1
      ids[count] = id
      if ok then -- (`evaluate` closed the barrier)
        values[count], failed[count] = value, false
        if lastHeldState then holdsState = true end
      else
        endFailedRead(id)
        values[count], failed[count] = tostring(value), true
      end
    end
  end
  flushed.count = count
  clearDue()
  return holdsState
end

-- Runs the readers whose inputs changed (all of them when `everything`); returns how many ran, their ids,
-- their values or messages, and which failed (`StateRuntime.FlushResult`).
function M.flush(everything)
  trimCaches(true)
  if flushed.count > 0 then emptyFlushed() end
  markDueReaders(everything)
  evaluateDue()
  if flushed.count == 0 then return 0 end
  return flushed.count, flushed.ids, flushed.values, flushed.failed
end

-- Puts the runtime back to rest after a failed call.
M.renderKey = renderKey -- (for the host's other trusted chunks, such as mounts.lua)

function M.reset()
  if B.mode() == WRITE then M.rollback() end
  B.setmode(CLOSED)
  reads = false
end

function M.markAllDirty()
  B.setdirty(true)
end

installBarrier()

return M
