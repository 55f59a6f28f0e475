-- The journal, read: what each action changed; and the history time travel moves through. Part of the state
-- runtime (`state_runtime.lua` says how the parts fit; StateRuntime.swift loads them).
--
-- After a transaction commits, its journal says what it wrote; `collect` turns that into changes — each
-- (table, key) written whose value now differs from the one before the transaction, named by its path from the
-- root, unless the table is no longer in the state (removed since, or a child store's) or a change further up
-- carries it (a table stored whole) — and appends them to `collected`, which the host reads once per run. The
-- cost is the transaction's writes times the depth of the state, never its size. Layout, for each action that
-- changed something: its position in the run, the number of changes, then each change: its depth d, the d keys
-- of its path, and the new value; a removal is written as -d, without a value (d = 0: the whole state).

local S = ...
local error = error
local istable = istable
local B, M, holder, children, journal, collected, dependents = S.B, S.M, S.holder, S.children, S.journal, S.collected, S.dependents
local same, MAX_DEPTH, noteChange = S.same, S.MAX_DEPTH, S.noteChange

local collectedCount = 0          -- the length of `collected` while `collect` appends (the barrier's, copied)
-- Where an entry of `collected` keeps its position and its number of changes, and its length; where an entry of
-- the journal keeps the table written, the key and the value it held, and its length (entry i follows slot i):
-- declared once in C (`CLUA_COLLECTED_ENTRY`, `CLUA_JOURNAL_ENTRY`, clua_state_layouts.h), which the barrier
-- gives (`barrierlayouts()`), taken when it is installed.
local ENTRY_POSITION, ENTRY_COUNT, ENTRY_LENGTH
local TABLE, KEY, OLD, WRITE_LENGTH
function S.takeJournalLayouts(position, count, length, t, key, old, writeLength)
  ENTRY_POSITION, ENTRY_COUNT, ENTRY_LENGTH = position, count, length
  TABLE, KEY, OLD, WRITE_LENGTH = t, key, old, writeLength
end
local written = {}                -- while collecting: real -> key -> where in the journal the key's first write is
local spareWritten, spareWrittenCount = {}, 0
local scratch = {}                -- a path's keys, leaf first

-- Whether the journaled write at `position` put a different value where it wrote (its table holds `value`).
local function changedAt(position, value)
  return position ~= nil and not same(value, journal[position + OLD])
end

-- Appends the change of `t[key]` (now `value`), unless it is not the root state's to report.
local function appendChange(t, key, value)
  local parents, parentKeys = S.parents, S.parentKeys
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
local function keepHistory(count, short)
  local entry, n = {}, 0
  for i = 0, count - 1, WRITE_LENGTH do
    local t, key = journal[i + TABLE], journal[i + KEY]
    local first
    if short then
      first = true
      for j = 0, i - 1, WRITE_LENGTH do
        if journal[j + TABLE] == t and journal[j + KEY] == key then first = false break end
      end
    else
      first = written[t][key] == i
    end
    if first then
      local after, before = t[key], journal[i + OLD]
      if not same(after, before) then
        entry[n + 1], entry[n + 2], entry[n + 3], entry[n + 4] = t, key, before, after
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
  if byKey ~= nil then noteChange(byKey, key, old == nil or value == nil) end
  if istable(old) or istable(value) then S.tablesLeft = true end
end

-- Appends what the last transaction (the action at `position`) changed; `historyOnly`: the barrier read its
-- changes itself (a short journal), only the history entry is to be kept; `forget`: the action fails after all
-- (what it changed cannot be recorded): the history entry kept for it goes.
function S.collect(position, historyOnly, forget)
  if forget then
    if historyLimit > 0 then M.dropNewestHistory() end
    return
  end
  local count = B.journalview()
  if historyOnly then
    if historyLimit > 0 then keepHistory(count, true) end
    return
  end
  if count == 0 then
    if historyLimit > 0 then keepHistory(0) end -- every committed action has an entry, empty or not
    return
  end
  for i = 0, count - 1, WRITE_LENGTH do
    local t, key = journal[i + TABLE], journal[i + KEY]
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
  collected[start + ENTRY_POSITION], collected[start + ENTRY_COUNT] = position, 0
  collectedCount = start + ENTRY_LENGTH
  local changes = 0
  for i = 0, count - 1, WRITE_LENGTH do
    local t, key = journal[i + TABLE], journal[i + KEY]
    if written[t][key] == i then
      local value = t[key]
      if not same(value, journal[i + OLD]) and appendChange(t, key, value) then changes = changes + 1 end
    end
  end
  spareWrittenCount = B.emptysets(written, spareWritten, spareWrittenCount, 64)
  if changes == 0 then
    collected[start + ENTRY_POSITION], collected[start + ENTRY_COUNT] = nil, nil
    collectedCount = start
  else
    collected[start + ENTRY_COUNT] = changes
  end
  B.collectedcount(collectedCount)
end

function M.setJournaling(on)
  S.journalingOn = on
  B.setjournaling(on, historyLimit > 0)
end

-- What the last transaction changed (as position 1), in `collected`'s layout: returns its length and it.
function M.changes()
  S.clearCollected()
  S.collect(1)
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
  B.setjournaling(S.journalingOn, limit > 0)
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
  S.trimCaches(false, true) -- tables moved: the records of where they are start afresh
  B.setdirty(true)
end

-- Drops the entries after the cursor (going on from a past point).
function M.truncateHistory()
  for i = cursor + 1, historyLast do history[i] = nil end
  historyLast = cursor
end

