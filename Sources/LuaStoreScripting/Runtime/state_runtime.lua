-- The state runtime: keeps a scripted app's state in the VM (StateRuntime.swift loads it, trusted, once per
-- app VM; embedded into the binary at build time by the EmbedLua plugin).
--
-- The write barrier this builds on — proxies, the undo journal, the readers due, the modes and what runs in C —
-- is explained once, in docs/design.md ("The write barrier"). The Lua half is six chunks, one concern each,
-- loaded in this order into the same VM, sharing one table (`S`, below: the state they share, and what each
-- offers the others):
--
-- - this file: proxies and their caches, the Lua halves of the metamethods (read tracking; a key or value that
--   is a table; a key that appears or goes away; errors), and transactions;
-- - `state_data.lua`: the rules that keep the state data and a tree ("State is data"), and where tables are;
-- - `state_runs.lua`: runs of actions, init, migrate, child stores' local states;
-- - `state_journal.lua`: what each committed action changed, read from its journal (the barrier's C half does
--   short journals), and the history time travel moves through;
-- - `state_inspection.lua`: the devtools' reads of the state;
-- - `state_readers.lua`: props, selectors, subscriptions — while one runs its reads are recorded (table → keys;
--   `#t` reads the table's structure, `pairs` all of it, and a state table it returns all of that subtree), and
--   an inverted index from (table, key) to readers lets each write mark due exactly the readers that must run
--   again at a flush.
--
-- Receives: the proxies' `__metatable` marker (StateRuntime.metatableMarker, which the sandbox's `rawset`
-- refuses) and how deep the state's tables may nest (LuaLimits.conversionDepth: what converts, saves and
-- records). Returns `S`; once every chunk has added its part, `S.start()` makes the barrier and returns the
-- module `M`, whose functions StateRuntime.Function names.

local MARKER, STATE_DEPTH = ...
local rawget, rawset, rawlen, next, type, setmetatable, getmetatable, error, pcall =
  rawget, rawset, rawlen, next, type, setmetatable, getmetatable, error, pcall
local select, tostring = select, tostring
local istable = istable  -- type(v) == "table", without making a string
local makebarrier = makebarrier

local ALL, STRUCTURE = {}, {}          -- read markers: every key of a table; its length and set of keys
local HOLDER_STATE = { state = true }  -- what every reader reads of `holder` (shared; never written)
local targets = {}                                     -- proxy -> real table
local proxies = {}                                     -- real table -> its proxy
local parents, parentKeys = {}, {}                     -- real table -> the table holding it, and the key (below)
local WEAK_KEYS, WEAK_ALL = { __mode = "k" }, { __mode = "kv" }
local installBarrier                                   -- (below) makes the metamethods for the current caches
-- What `collect` (state_journal.lua) read: the list (layout: "The journal, read"); its length is the barrier's
-- (`B.collectedcount`). (The barrier writes short journals' changes as JSON itself, and this list's too when it
-- can: changes.c, `changes_record`.)
local collected = {}
local encodedRecords = {}                              -- [1]: the barrier's buffer of journal records
local journal = {}                     -- (table, key, old value) triples of the open transaction
local dependents = setmetatable({}, { __mode = "k" })  -- real -> key -> { reader id -> true }
local readers = {}                     -- id -> { fn = function, reads = its last record, count = its reads }
local holder = { state = false }       -- holder.state is the app's state table
local children = {}                    -- child store id -> its local state table

local meta = { __metatable = MARKER }
local due, isDue = {}, {}              -- the readers a write marked due since the last flush, in order (the
                                       -- barrier keeps how many), and the set of them
-- The barrier (`makebarrier`, in C; made by `installBarrier` below): the proxies' `__index` and `__newindex`,
-- the loop over a run of actions, and the state they share — the mode (CLOSED; WRITE for reduce and migrate;
-- READ for props, selectors, subscriptions), the journal's length, whether `subscriptions` must run again
-- before its result is used — which the functions here read and set through it. One table for good: a new
-- barrier's functions are put into it, so every chunk may keep it.
local B = {}
local CLOSED, WRITE, READ  -- the modes, as barrier.c numbers them (B.CLOSED, …: set by installBarrier)

-- What the chunks share. Tables that stay for good are fields the others keep; what changes (the caches, which
-- `trimCaches` may replace, and the counters and flags below) they read here each time.
local S = {
  MARKER = MARKER, STATE_DEPTH = STATE_DEPTH, B = B, ALL = ALL, STRUCTURE = STRUCTURE,
  HOLDER_STATE = HOLDER_STATE, holder = holder, children = children, journal = journal, dependents = dependents,
  readers = readers, collected = collected, meta = meta, M = {},
  targets = targets, proxies = proxies, parents = parents, parentKeys = parentKeys,
  tablesLeft = false,  -- a committed write replaced or removed a table
  placed = 0,          -- tables stored since the caches were last renewed (each has a record: state_data.lua)
  journalingOn = false, -- whether runs collect each action's changes (the host journals: `setJournaling`)
}
local M = S.M

function S.clearCollected()
  for i = 1, B.collectedcount() do collected[i] = nil end
  B.collectedcount(0)
end

-- Notes that `key` of a table changed (`structural`: a key appeared or went away): its readers — `byKey`, the
-- table's entry in `dependents` — are marked due by the barrier's `note_change` (journal.c), which its
-- `__newindex` calls itself as the write happens, so committing costs nothing.
local function noteChange(byKey, key, structural)
  B.notechange(byKey, key, structural)
end
S.noteChange = noteChange

-- The proxy of a real table, made (by the barrier, in C) if it has none. The caches are strong (cheaper to
-- fill and to collect) until 4,096 proxies were made since they were last renewed (props walking a large
-- list, say); then the barrier turns them weak until they are replaced, so proxies no one holds any more can
-- be collected. Either way, one table has one proxy while anyone holds it.
local function proxy(real)
  return B.proxy(real)
end
S.proxy = proxy

-- The proxy of `real`, reached as `parent[key]`: a proxy made now records where its table is.
local function proxyAt(real, parent, key)
  if proxies[real] == nil then parents[real], parentKeys[real] = parent, key end
  return B.proxy(real)
end
S.proxyAt = proxyAt

-- Proxies live only while a function runs, so between calls the caches may start afresh; doing so once they
-- hold a few hundred entries keeps them small (a reducer touching a different item each time would otherwise
-- grow them without end). They are replaced by tables made with room for as many entries as the old ones took
-- in (at most 4,096: `B.renew`, which puts them in every function of the barrier): a reducer that reaches a new
-- table every action fills about as many again, without a rehash. Emptying them in place rehashed 4 times to
-- 512 keys (cleared slots keep their keys, so Lua finds no free slot at the first collision and shrinks the
-- table to what it holds, at about 64 keys, before it grows again), and a table made empty 10 times; at
-- 100,000 items, a toggle of an item not touched lately cost ≈ 15 % more either way (docs/benchmarks.md).
-- The caches hold their tables strongly, so they are also renewed by a flush after a table left the state
-- (a write replaced or removed one): such a table (a list the reducer replaced) is released by the next
-- flush at the latest.
--
-- The records of where tables are (`parents`, "State is data" below) go with the caches: a record is kept as
-- long as its table's proxy, so every table with a proxy has one. Tables a write stored count like proxies
-- made (a large init records every table once). `force` empties everything (after a rollback, which may have
-- put tables back where their records no longer say).
function S.trimCaches(afterFlush, force)
  local made, placed = B.made(), S.placed
  if force or made + placed > 512 or (afterFlush and S.tablesLeft and made + placed > 0) then
    S.tablesLeft = false
    targets, proxies, parents, parentKeys = B.renew(B, math.min(made + placed, 4096))
    S.targets, S.proxies, S.parents, S.parentKeys = targets, proxies, parents, parentKeys
    S.placed = 0
  end
end

-- The barrier notes a reader's reads itself (its `__index`, and `B.note` for the markers the functions here
-- note), against the record of what the reader read last time (`B.setmode(READ, last)`): mostly a reader reads
-- just that, and then `B.endread` says so and nothing is allocated; otherwise it gives the new record, and the
-- old one's key sets are kept for the next records (`B.recycle`).
local function note(real, key)
  B.note(real, key)
end
S.note = note

-- The errors of a metamethod; `level` 2 is the metamethod's caller (3 for the barrier's Lua halves, which
-- its C halves call).
local CLOSED_MESSAGE = "state tables can be used only while reduce, props, a selector or subscriptions runs"

local function closed(level)
  error(CLOSED_MESSAGE, level + 1)
end

local STALE = "a state table kept from an earlier call was used: state tables (those a function received, and those"
  .. " it stored) can be used only during that call"

S.STALE = STALE

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

-- Strips proxies out of a value about to be returned (props, subscriptions, commands): the host converts real
-- tables. A table of the script's that holds a proxy, at any depth, is copied with the real table in the proxy's
-- place — never changed in place: the script may have kept it (a props table in an upvalue), and a real table in
-- its hands could be written past the journal, read past the reads recorded, and stored in the state again as if
-- it were new. `what` names the value in the error for one nested deeper than anything converts.
function S.unwrap(value, what)
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
  local stripped = {} -- each table met -> what stands for it (itself, or its copy once one was needed)
  local function strip(t, depth)
    local done = stripped[t]
    if done ~= nil then return done end
    if depth >= STATE_DEPTH then error(what .. ": tables nested deeper than " .. STATE_DEPTH .. " levels", 0) end
    stripped[t] = t -- (a table met again inside itself stands for itself)
    local copy
    for key, item in next, t do
      if istable(item) then
        local inner = targets[item]
        if inner ~= nil and not B.fresh(item) then error(what .. ": " .. STALE, 0) end
        local replacement = inner or strip(item, depth + 1)
        if replacement ~= item then
          if copy == nil then
            copy = {}
            for k, v in next, t do copy[k] = v end
            stripped[t] = copy
          end
          copy[key] = replacement
        end
      end
    end
    return copy or t
  end
  return strip(value, 1)
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
  B.note(real, key) -- (noted only while a reader runs: the barrier knows)
  local value = real[key]
  if istable(value) then return proxyAt(value, real, key) end
  return value
end

local function newindexFallback(p, key, value)
  local mode = B.mode()
  if mode ~= WRITE then
    if mode == CLOSED then closed(3) end
    error("props, selectors and subscriptions cannot change the state", B.scriptlevel(3))
  end
  local real = current(p, 3)
  if real == nil then stale(3) end
  -- Refused before anything is journaled: undoing a journaled write to such a key would itself fail.
  if key == nil then error("table index is nil", 3) elseif key ~= key then error("table index is NaN", 3) end
  local moves, failure
  if istable(value) then
    value, moves, failure = S.prepare(value, real, key)
  else
    failure = S.badValue(value, real, key)
  end
  if failure then error(failure, B.scriptlevel(3)) end
  local old = real[key]
  if S.same(old, value) then return end
  if old == nil then
    failure = S.badKey(key, real)
    if failure then error(failure, B.scriptlevel(3)) end
  end
  B.record(real, key, old)
  real[key] = value
  S.recordMoves(moves)
  local byKey = dependents[real]
  if byKey ~= nil then noteChange(byKey, key, old == nil or value == nil) end
  if istable(old) then S.tablesLeft = true end
end

meta.__len = function(p)
  if B.mode() == CLOSED then closed(2) end
  local real = current(p, 2)
  if real == nil then stale(2) end
  B.note(real, STRUCTURE) -- (noted only while a reader runs: the barrier knows)
  return rawlen(real)
end

meta.__pairs = function(p)
  if B.mode() == CLOSED then closed(2) end
  local real = current(p, 2)
  if real == nil then stale(2) end
  B.note(real, ALL) -- (noted only while a reader runs: the barrier knows)
  local key
  return function()
    local value
    key, value = next(real, key)
    if istable(value) then value = proxyAt(value, real, key) end
    return key, value
  end
end

-- `next(p, key)`: the sandbox's `next` on a sealed table takes its metatable's `__next` when it has one
-- (base.lua): Lua's `next` on the real table — a key cleared while the table is walked stays valid, as in Lua —, a
-- table value through its proxy. Answers true, the key and the value; or false and why not, for `next` to raise.
meta.__next = function(p, key)
  if B.mode() == CLOSED then return false, CLOSED_MESSAGE end
  local real = targets[p]
  if real == nil or not B.fresh(p) then return false, STALE end
  B.note(real, ALL) -- (noted only while a reader runs: the barrier knows)
  local ok, found, value = pcall(next, real, key)
  if not ok then return false, "invalid key to 'next'" end
  if istable(value) then value = proxyAt(value, real, found) end
  return true, found, value
end

-- Transactions -------------------------------------------------------------------------------------

-- Ends a transaction. Nothing is left to record: the barrier (and `replace`, for the runtime's own writes)
-- recorded each change as it happened.
function S.commit()
  S.settleMoves()
  B.commit()
end

-- Replaces `tbl[key]` (the root state in `holder`, a child's state in `children`) as a journaled write.
local function replace(tbl, key, value)
  local old = tbl[key]
  B.record(tbl, key, old)
  tbl[key] = value
  local byKey = dependents[tbl]
  if byKey ~= nil then noteChange(byKey, key, old == nil or value == nil) end
  if istable(old) then S.tablesLeft = true end
end

-- Stores a whole state (`holder.state`, a child's in `children`) that `what` (init, reduce, migrate) gave,
-- checked as any stored table is; or, changing nothing, says what is wrong with it.
local function placedRoot(tbl, key, value, what, owned)
  local real, moves, failure = S.placeFresh(value, tbl, key, owned), nil, nil
  if real == nil then -- (not all new: the walk, which places it as any stored table, or says why not)
    real, moves, failure = S.prepare(value, tbl, key, owned, true) -- (a root is placed once its maker returned)
  end
  if failure then return what .. ": " .. failure end
  replace(tbl, key, real)
  S.recordMoves(moves)
  return nil
end

-- The same, raising what is wrong.
function S.placeRoot(tbl, key, value, what, owned)
  local failure = placedRoot(tbl, key, value, what, owned)
  if failure then error(failure, 0) end
end

-- The journal is kept until the next transaction begins, so the host can still undo the last one (when
-- what the reducer returned turns out to be invalid, or a reload fails after its migration ran).
function S.begin()
  B.begin()
end

-- Installs a state table a reducer returned instead of changing the one it received.
-- (What is wrong is returned: the run raises it, placed where the reducer is — runs.c.)
local function adopt(result)
  if not istable(result) then
    return "reduce must return the state table, a new state table, or nothing (it returned a " .. type(result) .. ")"
  end
  return placedRoot(holder, "state", result, "the state reduce returned")
end

-- Makes the barrier over the current caches (again whenever they are replaced; its state carries over).
function installBarrier()
  local made = makebarrier {
    control = B.control, targets = targets, proxies = proxies, meta = meta, weakkeys = WEAK_KEYS,
    weakall = WEAK_ALL, parents = parents, parentkeys = parentKeys, journal = journal, dependents = dependents, due = due, isdue = isDue, holder = holder,
    index = indexFallback, newindex = newindexFallback, all = ALL, structure = STRUCTURE, adopt = adopt, settle = S.movesFailure,
    collect = S.collect, collected = collected, children = children, encoded = encodedRecords,
    holderstate = HOLDER_STATE, unwrap = S.unwrap, flushed = S.flushed, flushedids = S.flushed.ids,
    flushedvalues = S.flushed.values, flushedfailed = S.flushed.failed, settled = S.settled, readers = readers,
    runreader = S.runReader, finishread = S.finishRead, indexreads = S.indexReads, failedread = S.failedRead,
    moved = S.moved, movedindex = S.movedIndex, left = S.left, leftseen = S.leftSeen, shared = S,
    statedepth = STATE_DEPTH,
  }
  for name, value in next, made do B[name] = value end
  meta.__index, meta.__newindex = B.index, B.newindex
  CLOSED, WRITE, READ = B.CLOSED, B.WRITE, B.READ
  -- The positions the C declares (clua_state_layouts.h), in its order: a reader's slots; an entry of `collected`
  -- and its length; an entry of the journal and its length; a moved table's and a left place's, and their lengths.
  local fn, child, reads, count, keys, keysRoot, position, changes, entryLength, tableAt, keyAt, oldAt, writeLength,
    movedTable, movedParent, movedKey, movedLength, leftParent, leftKey, leftLength = barrierlayouts()
  S.takeReaderSlots(fn, child, reads, count, keys, keysRoot)
  S.takeJournalLayouts(position, changes, entryLength, tableAt, keyAt, oldAt, writeLength)
  S.takeMoveLayouts(movedTable, movedParent, movedKey, movedLength, leftParent, leftKey, leftLength)
end

-- Puts the runtime back to rest after a failed call.
function M.reset()
  if B.mode() == WRITE then M.rollback() end
  B.setmode(CLOSED)
end

function M.markAllDirty()
  B.setdirty(true)
end

-- Once every chunk has added its part: the barrier, and the module.
function S.start()
  installBarrier()
  return M
end

return S

