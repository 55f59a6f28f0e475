-- The state runtime: keeps a scripted app's state in the VM (StateRuntime.swift loads it, trusted, once per
-- app VM; embedded into the binary at build time by the EmbedLua plugin).
--
-- The write barrier this file builds on — proxies, the undo journal, the change set, the modes and what runs in
-- C — is explained once, at the top of `Sources/CLuaGuard/barrier.c`. Here: the Lua halves of the metamethods
-- (read tracking; a key or value that is a table; a key that appears or goes away; errors), the transactions
-- around reduce, migrate and init, child stores' local states, and the readers (props, selectors,
-- subscriptions): while one runs its reads are recorded (table → keys; `#t` reads the table's structure,
-- `pairs` all of it, and a state table it returns all of that subtree), and an inverted index from (table, key)
-- to readers finds, from the change set alone, exactly which must run again at a flush.
--
-- Receives: the proxies' `__metatable` marker (StateRuntime.metatableMarker, which the sandbox's `rawset`
-- refuses). Returns: the module `M`, whose functions StateRuntime.Function names.

local MARKER = ...
local rawget, rawset, rawlen, next, type, setmetatable, getmetatable, error, pcall =
  rawget, rawset, rawlen, next, type, setmetatable, getmetatable, error, pcall
local select, tostring = select, tostring
local istable = istable  -- type(v) == "table", without making a string
local makebarrier = makebarrier

local ALL, STRUCTURE = {}, {}          -- read markers: every key of a table; its length and set of keys
local HOLDER_STATE = { state = true }  -- what every reader reads of `holder` (shared; never written)
local targets = {}                                     -- proxy -> real table
local proxies = {}                                     -- real table -> its proxy
local WEAK_KEYS, WEAK_ALL = { __mode = "k" }, { __mode = "kv" }
local installBarrier                                   -- (below) makes the metamethods for the current caches
local tablesLeft = false                               -- a committed write replaced or removed a table
local reads = false                    -- while reading: real -> { key -> true }
local journal = {}                     -- (table, key, old value) triples of the open transaction
local dependents = setmetatable({}, { __mode = "k" })  -- real -> key -> { reader id -> true }
local readers = {}                     -- id -> { fn = function, reads = recorded reads }
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

-- Records that `real[key]` changed (`structural`: a key appeared or went away), for the readers that depend
-- on it: only tables some reader read are recorded (`byKey` is `dependents[real]`), so a write to a table
-- nobody reads (one item of a large list, say) costs the journal alone. Called by the barrier as the write
-- happens, so committing costs nothing; a write later rolled back may make a reader run once for nothing
-- (its result compares equal and is not delivered).
local function noteChange(real, byKey, key, structural)
  local changes = pending[1]
  local keys = changes[real]
  if keys == nil then
    keys = {}
    changes[real] = keys
  end
  keys[key] = true
  if structural then keys[STRUCTURE] = true end
  if not B.dirty() then
    local ids = byKey[key]
    if (ids and ids.subscriptions) or (byKey[ALL] and byKey[ALL].subscriptions)
        or (structural and byKey[STRUCTURE] and byKey[STRUCTURE].subscriptions) then
      B.setdirty(true)
    end
  end
end

-- The proxy of a real table, made (by the barrier, in C) if it has none. The caches are strong (cheaper to
-- fill and to collect) until 4,096 proxies were made since they were last emptied (props walking a large
-- list, say); then the barrier turns them weak until they are replaced, so proxies no one holds any more can
-- be collected. Either way, one table has one proxy while anyone holds it.
local function proxy(real)
  return proxies[real] or B.proxy(real)
end

-- Proxies live only while a function runs, so between calls the caches may start afresh; doing so once they
-- hold a few hundred entries keeps them small (a reducer touching a different item each time would otherwise
-- grow them without end). They are emptied in place, not replaced: a table keeps its slots when emptied, so
-- refilling it costs no rehashing (replacing them made every toggle of a not-recently-touched item dearer:
-- README, Benchmarks). Caches a large evaluation grew (and made weak) are replaced, to let their slots go.
-- The caches hold their tables strongly, so they are also emptied by a flush after a table left the state
-- (a write replaced or removed one): such a table (a list the reducer replaced) is released by the next
-- flush at the latest.
local function trimCaches(afterFlush)
  local made = B.made()
  if made > 512 or (afterFlush and tablesLeft and made > 0) then
    tablesLeft = false
    if made >= 4096 then
      targets, proxies = {}, {}
      installBarrier()
    else
      for p in next, targets do targets[p] = nil end
      for real in next, proxies do proxies[real] = nil end
    end
    B.made(0)
  end
end

-- Read records are recycled: when a reader runs again its previous record is emptied and kept for the
-- next one, so evaluating props allocates little more than the props themselves.
local spareKeys, spareKeysCount, spareReads = {}, 0, false

local function note(real, key)
  local keys = reads[real]
  if keys == nil then
    if spareKeysCount > 0 then
      keys = spareKeys[spareKeysCount]
      spareKeys[spareKeysCount] = nil
      spareKeysCount = spareKeysCount - 1
    else
      keys = {}
    end
    reads[real] = keys
  end
  keys[key] = true
end

-- The errors of a metamethod; `level` 2 is the metamethod's caller (3 for the barrier's Lua halves, which
-- its C halves call).
local function closed(level)
  error("state tables can be used only while reduce, props, a selector or subscriptions runs", level + 1)
end

local function stale(level)
  error("a state table kept from an earlier call was used: state tables can be used only during the call that received them", level + 1)
end

-- Strips proxies out of a value about to be stored or returned: the real state never holds a proxy. State
-- tables are plain data: one with a metatable is refused, which is what lets the barrier below index real
-- tables directly (`real[key]`, no `rawget` call) with raw semantics.
local function unwrap(value, storing)
  if not istable(value) then return value end
  local real = targets[value]
  if real ~= nil then return real end
  if not storing then
    -- The common case (props of plain values, no commands inside): nothing to strip, nothing to allocate.
    local flat = true
    for key, item in next, value do
      if istable(item) or istable(key) then flat = false break end
    end
    if flat then return value end
  end
  local seen = {}
  local function strip(t)
    if seen[t] then return end
    seen[t] = true
    if storing and getmetatable(t) ~= nil then
      error("state tables are plain data: a table with a metatable cannot be stored in the state", 0)
    end
    local proxyKeys
    for key, item in next, t do
      if istable(item) then
        local inner = targets[item]
        if inner ~= nil then rawset(t, key, inner) else strip(item) end
      end
      if istable(key) and targets[key] ~= nil then
        proxyKeys = proxyKeys or {}
        proxyKeys[#proxyKeys + 1] = key
      end
    end
    if proxyKeys then
      for i = 1, #proxyKeys do
        local key = proxyKeys[i]
        local item = rawget(t, key)
        rawset(t, key, nil)
        rawset(t, targets[key], item)
      end
    end
  end
  strip(value)
  return value
end

-- The barrier's `__index` and `__newindex` (`makebarrier`, trusted host code) do the common cases in C —
-- while writing: a read, or a write to a key that stays, of a value that is not a table — and hand every
-- other access, unchanged, to the Lua functions below, which are what the metamethods were before. So the
-- functions below are always called from C: the script that caused an error is at level 3, not 2.

local function indexFallback(p, key)
  if B.mode() == CLOSED then closed(3) end
  local real = targets[p]
  if real == nil then stale(3) end
  local keyTarget = targets[key] -- a proxy used as a key stands for its table (a lookup is cheaper than a type test)
  if keyTarget ~= nil then key = keyTarget end
  if reads then note(real, key) end
  local value = real[key]
  if istable(value) then return proxies[value] or proxy(value) end
  return value
end

local function newindexFallback(p, key, value)
  local mode = B.mode()
  if mode ~= WRITE then
    if mode == CLOSED then closed(3) end
    error("props, selectors and subscriptions cannot change the state", 3)
  end
  local real = targets[p]
  if real == nil then stale(3) end
  local keyTarget = targets[key]
  if keyTarget ~= nil then key = keyTarget end
  -- Refused before anything is journaled: undoing a journaled write to such a key would itself fail.
  if key == nil then error("table index is nil", 3) elseif key ~= key then error("table index is NaN", 3) end
  if istable(value) then value = unwrap(value, true) end
  local old = real[key]
  if old == value then return end
  B.record(real, key, old)
  real[key] = value
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
  local real = targets[p]
  if real == nil then stale(2) end
  if reads then note(real, STRUCTURE) end
  return rawlen(real)
end

meta.__pairs = function(p)
  if B.mode() == CLOSED then closed(2) end
  local real = targets[p]
  if real == nil then stale(2) end
  if reads then note(real, ALL) end
  local key
  return function()
    local value
    key, value = next(real, key)
    if istable(value) then value = proxy(value) end
    return key, value
  end
end

-- Transactions -------------------------------------------------------------------------------------

local M = {}

-- Ends a transaction. Nothing is left to record: the barrier (and `replace`, for the runtime's own writes)
-- recorded each change as it happened.
local function commit()
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
  replace(holder, "state", unwrap(result, true))
end

-- Makes the barrier over the current caches (again whenever they are replaced; its state carries over).
function installBarrier()
  B = makebarrier {
    control = B and B.control, targets = targets, proxies = proxies, meta = meta, weakkeys = WEAK_KEYS,
    weakall = WEAK_ALL, journal = journal, dependents = dependents, changes = pending, holder = holder,
    index = indexFallback, newindex = newindexFallback, note = noteChange, adopt = adopt,
  }
  meta.__index, meta.__newindex = B.index, B.newindex
  CLOSED, WRITE, READ = B.CLOSED, B.WRITE, B.READ
end

-- Reduces list[first..last] in order, each action its own transaction with its own time budget, in one call
-- from the host (the fixed cost of crossing into the VM is paid once per run, not per action), in the
-- barrier's C loop. Stops after an action the host must look at before the next one: one that returned
-- commands (the host validates them and may undo it), one that made the declared subscriptions stale (the
-- store diffs them), or one refused for having no string `type` (the host words the error); returns its
-- position, its commands (proxies stripped), whether `subscriptions` must run again, and whether it was
-- refused. Returns `last` alone when every action ran without any of those. A failing action raises;
-- `runPosition` then says which one it was (the ones before it are committed, its own writes are in the
-- journal for the host to roll back). Proxies a run makes are trimmed before the next one.
function M.reduceRun(reduce, list, first, last)
  if B.made() > 512 then trimCaches() end
  reads = false
  local position, commands, dirty, refused = B.run(reduce, list, first, last, readers.subscriptions ~= nil)
  if commands ~= nil then commands = unwrap(commands) end
  return position, commands, dirty, refused
end

function M.runPosition() return B.position() end

-- One action (a run of one), with reduceRun's results: 1, its commands, whether `subscriptions` must run
-- again, whether it was refused.
local single = {}
function M.reduce(reduce, action)
  if not istable(action) then return 1, nil, false, true end
  single[1] = action
  local _, commands, _, refused = M.reduceRun(reduce, single, 1, 1)
  single[1] = nil
  return 1, commands, B.dirty(), refused
end

-- Undoes the open or last transaction, newest write first.
function M.rollback()
  tablesLeft = true -- tables the undone writes had added leave the state
  B.rollback()
  reads = false
end

-- Runs `fn(state, ...)` as a transaction that is not an action (init's result, migrate).
function M.transform(fn, ...)
  begin()
  local state = proxy(holder.state)
  local result = fn(state, ...)
  if result ~= nil and result ~= state then
    if not istable(result) then error("the function must return a state table or nothing", 0) end
    replace(holder, "state", unwrap(result, true))
  end
  commit()
end

function M.setState(state)
  if not istable(state) then error("init must return a table (it returned a " .. type(state) .. ")", 0) end
  begin()
  replace(holder, "state", unwrap(state, true))
  commit()
end

function M.state() return holder.state end

-- Child stores: local state of their own, reduced by their own module, never writing the root's.

function M.setChild(id, state)
  if not istable(state) then error("a child's init must return a table (it returned a " .. type(state) .. ")", 0) end
  begin()
  replace(children, id, unwrap(state, true))
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
    replace(children, id, unwrap(result, true))
  end
  commands = unwrap(commands)
  commit()
  return commands
end

-- Readers: props, selectors, subscriptions ---------------------------------------------------------

local function index(id, recorded)
  local reader = readers[id]
  local old = reader.reads
  if old then
    for real, keys in next, old do
      local byKey = dependents[real]
      if byKey then
        for key in next, keys do
          local ids = byKey[key]
          if ids then ids[id] = nil end
        end
      end
      if keys ~= HOLDER_STATE and spareKeysCount < 256 then
        for key in next, keys do keys[key] = nil end
        spareKeysCount = spareKeysCount + 1
        spareKeys[spareKeysCount] = keys
      end
      old[real] = nil
    end
    spareReads = old
  end
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
  reader.reads = recorded
end

-- A state table a reader returns is converted whole, so the reader depends on all of it. Tables the reader
-- made itself (the props table, say) are not state: only the state tables inside them count. (Noting those
-- fresh tables would add an entry to `dependents`, a weak-keyed table, on every evaluation, and weak tables
-- full of dead keys make every collection slower.)
local function dependOnResult(value, seen, inState)
  if not istable(value) then return end
  local real = targets[value]
  if real ~= nil then inState = true else real = value end
  if seen ~= nil then
    if seen[real] then return end
    seen[real] = true
  end
  if inState then note(real, ALL) end
  for _, item in next, real do
    if istable(item) then
      -- The cycle guard is made only once there is something to recurse into: a flat result allocates nothing.
      seen = seen or { [real] = true }
      dependOnResult(item, seen, inState)
    end
  end
end

local function evaluate(id, ...)
  local reader = readers[id]
  local recorded = spareReads or {}
  spareReads = false
  recorded[holder] = HOLDER_STATE
  B.setmode(READ)
  reads = recorded
  local value
  if reader.child ~= nil then
    note(children, reader.child)
    value = reader.fn(proxy(children[reader.child]), proxy(holder.state), ...)
  else
    value = reader.fn(proxy(holder.state), ...)
  end
  dependOnResult(value, nil, false)
  B.setmode(CLOSED)
  reads = false
  index(id, recorded)
  return unwrap(value)
end

function M.register(id, fn, child)
  local old = readers[id]
  readers[id] = { fn = fn, child = child, reads = old and old.reads }
end

function M.unregister(id)
  if readers[id] then
    index(id, {})
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
  return evaluate(id, ...)
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

-- Evaluates the readers whose inputs changed since the last flush (all of them when `everything`).
-- Returns how many ran, then (when any did) their ids and values in two lists (a value may be nil), and
-- id -> message for the ones that failed. The lists are reused: read them before the next flush.
local due, dueCount, isDue = {}, 0, {}   -- the readers a flush will run, in order (reused, emptied after)

local function markDue(id)
  if not isDue[id] then
    isDue[id] = true
    dueCount = dueCount + 1
    due[dueCount] = id
  end
end

local function addDue(ids)
  if ids then
    for id in next, ids do markDue(id) end
  end
end

local function clearDue()
  for i = 1, dueCount do
    isDue[due[i]] = nil
    due[i] = nil
  end
  dueCount = 0
end

local outIds, outValues, outCount = {}, {}, 0  -- what the last flush evaluated (reused)

function M.flush(everything)
  trimCaches(true)
  if dueCount > 0 then clearDue() end -- left by a flush the time budget cut short
  for i = 1, outCount do outIds[i], outValues[i] = nil, nil end
  outCount = 0
  if everything then
    for id in next, readers do markDue(id) end
  else
    for real, keys in next, pending[1] do
      local byKey = dependents[real]
      if byKey then
        addDue(byKey[ALL])
        for key in next, keys do addDue(byKey[key]) end
      end
    end
  end
  if next(pending[1]) ~= nil then pending[1] = {} end
  B.flushed()
  if dueCount == 0 then return 0 end
  local failures
  for i = 1, dueCount do
    local id = due[i]
    if id ~= "subscriptions" then
      local ok, value = pcall(evaluate, id)
      B.setmode(CLOSED)
      reads = false
      if ok then
        outCount = outCount + 1
        outIds[outCount], outValues[outCount] = id, value
      else
        failures = failures or {}
        failures[id] = tostring(value)
      end
    end
  end
  clearDue()
  return outCount, outIds, outValues, failures
end

-- Puts the runtime back to rest after a failed call.
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
