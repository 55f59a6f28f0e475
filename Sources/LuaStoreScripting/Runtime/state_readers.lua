-- Readers: props, selectors, subscriptions. Part of the state runtime (`state_runtime.lua` says how the parts
-- fit; StateRuntime.swift loads them).

local S = ...
local next, select, error, pcall, tostring = next, select, error, pcall, tostring
local istable = istable
local B, M, holder, children, dependents, readers = S.B, S.M, S.holder, S.children, S.dependents, S.readers
local ALL, HOLDER_STATE, STATE_DEPTH, STALE = S.ALL, S.HOLDER_STATE, S.STATE_DEPTH, S.STALE
local note, proxy, unwrap, flushed = S.note, S.proxy, S.unwrap, S.flushed

-- A reader's record is a list: its function, its child store (nil for the app's own), its last record of reads,
-- how many reads that holds, the keys of the root its function can read (`true` until the barrier looks) and the
-- root its record holds every one of (`false`: none) — at the positions declared once in C (`CLUA_READER_SLOTS`,
-- clua_state_layouts.h), which the barrier gives (`barrierlayouts()`), taken when it is installed.
local FN, CHILD, READS, COUNT, KEYS, KEYS_ROOT
function S.takeReaderSlots(fn, child, reads, count, keys, keysRoot)
  FN, CHILD, READS, COUNT, KEYS, KEYS_ROOT = fn, child, reads, count, keys, keysRoot
end

-- Makes `recorded` (`count` reads) the record of what reader `id` read, in place of its last one: the index of
-- readers (`dependents`) follows.
local function index(reader, id, recorded, count)
  recorded[holder] = HOLDER_STATE
  local old = reader[READS]
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
  reader[READS], reader[COUNT], reader[KEYS_ROOT] = recorded, count, false
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
  local real = S.targets[value]
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

-- Ends the running read of reader `id` (the barrier closes): what it read is its record now, unless it read just
-- what its last record holds.
local function endRead(reader, id)
  local recorded, count = B.endread(reader[COUNT])
  if recorded ~= nil then index(reader, id, recorded, count) end
end

local function evaluate(id, ...)
  local reader = readers[id]
  B.setmode(B.READ, reader[READS])
  local value
  local fn, child = reader[FN], reader[CHILD]
  if child ~= nil then
    note(children, child)
    value = fn(proxy(children[child]), proxy(holder.state), ...)
  else
    value = fn(proxy(holder.state), ...)
  end
  -- Most results are flat (no table inside, not a proxy): nothing to depend on, nothing to strip.
  local flat = B.isflat(value)
  lastHeldState = not flat and dependOnResult(value, nil, false)
  endRead(reader, id)
  if flat then return value end
  return unwrap(value, "the value returned")
end

-- Ends the run of reader `id` that raised: what it read before the error is what its outcome depended on, so
-- that is its record now (a reader failing on its first run would otherwise depend on nothing and never run
-- again: props failing on the initial state would silence every later state's props).
local function endFailedRead(id)
  local reader = readers[id]
  if reader ~= nil and B.mode() == B.READ then endRead(reader, id) end
  B.setmode(B.CLOSED)
end

function M.register(id, fn, child)
  local old = readers[id]
  local reader = { false, false, false, false, true, false } -- (its six slots, made at once)
  reader[FN], reader[CHILD], reader[READS], reader[COUNT] = fn, child, old and old[READS], old and old[COUNT]
  readers[id] = reader
end

function M.unregister(id)
  local reader = readers[id]
  if reader then
    if reader[READS] then B.recycle(reader[READS], id) end
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
  B.setmode(B.CLOSED)
  if not ok then
    B.setdirty(true)
    error(value, 0)
  end
  return value or {}
end

-- Runs reader `id`, protected, and appends what it gave to `flushed`: its id, and its value, or its error's
-- message (`failed`). Returns whether the value holds a state table (`dependOnResult`).
local function runReader(id)
  lastHeldState = false
  local ok, value = pcall(evaluate, id)
  local count = B.flushedcount() + 1
  B.flushedcount(count)
  flushed.ids[count] = id
  if ok then -- (`evaluate` closed the barrier)
    flushed.values[count], flushed.failed[count] = value, false
    return lastHeldState
  end
  endFailedRead(id)
  flushed.values[count], flushed.failed[count] = tostring(value), true
  return false
end

-- What the barrier's flush within a run (`flushdue`, reads.c) leaves to this side: a reader it does not run
-- itself (a child's props), the end of a read whose value holds tables, a reader's new record of reads, the end
-- of a read that raised. It runs the rest — a reader that returns a flat value — as `evaluate` would.
S.runReader = runReader

function S.finishRead(id, value)
  local holdsState = dependOnResult(value, nil, false)
  endRead(readers[id], id)
  return unwrap(value, "the value returned"), holdsState
end

function S.indexReads(id, recorded, count)
  index(readers[id], id, recorded, count)
end

S.failedRead = endFailedRead

-- How many readers flushes ran by the keys they read (`B.bykeys`, reads.c's `run_by_keys`): for tests.
function M.readsByKeys()
  return B.bykeys()
end

-- Runs the readers whose inputs changed (all of them when `everything`) as a run's flush does (`B.flushdue`:
-- `subscriptions` excepted, as the store runs it; a reader gone since a write marked it skipped; a spent time
-- budget raised on); returns how many ran, their ids, their values or messages, and which failed
-- (`StateRuntime.FlushResult`).
function M.flush(everything)
  S.trimCaches(true)
  if B.flushedcount() > 0 then S.emptyFlushed() end
  if everything then B.markdue(readers) end
  B.flushdue()
  return B.flushresults()
end
