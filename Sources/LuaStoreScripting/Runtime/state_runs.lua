-- Runs of actions, init's and migrate's transactions, and child stores' local states. Part of the state runtime
-- (`state_runtime.lua` says how the parts fit; StateRuntime.swift loads them).

local S = ...
local type, error = type, error
local istable, matchesjson, decodejson, applyjson = istable, matchesjson, decodejson, applyjson
local B, M, holder, children, readers = S.B, S.M, S.holder, S.children, S.readers
local proxy, unwrap, begin, commit, placeRoot = S.proxy, S.unwrap, S.begin, S.commit, S.placeRoot

-- Reduces list[first..last] in order, each action its own transaction with its own time budget, in one call
-- from the host (the fixed cost of crossing into the VM is paid once per run, not per action), in the
-- barrier's C loop. Stops after an action the host must look at before the next one: one that returned
-- commands (the host validates them and may undo it), one that made the declared subscriptions stale (the
-- store diffs them), or one refused for having no string `type` (the host words the error). Returns (the
-- layout `RunResult` in `StateRuntime+Calls.swift` names) its position, its commands (proxies stripped), whether
-- `subscriptions` must run again, whether it was refused; while journaling, the run's journal records
-- (`B.records()`: the buffer and its length, read in the same crossing); then what the readers gave
-- (`every`, below). A failing action raises; `runPosition` then says which one it was (the ones
-- before it are committed, its own writes are in the journal for the host to roll back) and hands over what
-- the readers gave before it. Proxies a run makes are trimmed before the next one.
--
-- `every` (the store's notification points, when it is not 0): after the `untilFlush`-th action, then after
-- every `every`-th — every action when the store notifies after each — if an action since the last flush
-- changed what a reader read, or replaced the state, the readers due run there and then (`B.flushdue`,
-- reads.c), in the same call, and the run goes on — unless a value holds a state table (a path observer's, say),
-- which the next action could change before the host converts it: the run stops there. Their values (`flushed`) are handed over
-- with the results, in order, for the host to deliver before anything else happens. Then also whether nothing is left for a flush (`settled`: no change
-- a reader read since the last of them, no table left for the caches to let go), and the message of a flush
-- that failed (the run stopped after its action) and whether it ran out of time.
-- What readers gave, in order (reused; the barrier keeps how many: `B.flushedcount`).
local flushed = { ids = {}, values = {}, failed = {} }
S.flushed = flushed

function S.emptyFlushed()
  local ids, values, failed = flushed.ids, flushed.values, flushed.failed
  for i = 1, B.flushedcount() do ids[i], values[i], failed[i] = nil, nil, nil end
  B.flushedcount(0)
end

-- Whether a flush has nothing to do: no reader due (no write changed what one read since the last flush), no
-- table left for the caches to let go. (The barrier asks, as a run ends.)
function S.settled()
  return B.duecount() == 0 and not S.tablesLeft
end

-- What every run does first: the caches trimmed, the last run's changes and readers' values let go.
local function beginRun()
  if B.made() + S.placed > 512 then S.trimCaches() end
  if B.collectedcount() > 0 then S.clearCollected() end
  if B.flushedcount() > 0 then S.emptyFlushed() end
end

-- (The results are the barrier's, laid out as `clua_state_layouts.h` declares: this side never orders them. So
-- are the run's `flags`, which the host sets: `CLUA_RUN_FLAGS`.)
function M.reduceRun(reduce, list, first, last, flags, every, untilFlush)
  B.position(first) -- (a failure before the first action began is that action's: `runPosition`)
  beginRun()
  if every == 0 then return B.run(reduce, list, first, last, flags) end
  return B.run(reduce, list, first, last, flags, B.flushdue, every, untilFlush)
end

-- Which action of the last run was being reduced, and what the readers gave before it (a run that raised).
function M.runPosition()
  return B.positionresults()
end

-- One action (a run of one), with reduceRun's results (whether subscriptions are stale at every end).
local single = {}
function M.reduce(reduce, action, flags, flushWhenObserved)
  if not istable(action) then return B.refusal(1, flushWhenObserved) end
  beginRun()
  single[1] = action
  return B.run(reduce, single, 1, 1, flags, flushWhenObserved and B.flushdue or false)
end

-- Undoes the transaction a failure left open, newest write first; with `committed`, the last one, committed (what
-- it returned turned out invalid). A failure before any transaction began undoes nothing (`B.rollback`).
function M.rollback(committed)
  B.rollback(committed)
  S.clearMoves()
  S.trimCaches(false, true)
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

-- Makes `state` the state (`owned`: the host made it, no script holds it). Or, `state` being a recording's JSON
-- text (a durable store's snapshot) and `changes` the texts of the `changes` of the entries after it, makes the
-- state the one they hold, read and built in C (`decodejson`, `applyjson`: jsonread.c) and placed as a host-made
-- state; and says whether it did: where the C reader does not take them, nothing is placed and the host reads them
-- itself, naming what is wrong.
function M.setState(state, owned, changes)
  if changes ~= nil then
    state = decodejson(state)
    for i = 1, #changes do
      if state == nil then break end
      state = applyjson(state, changes[i])
    end
    if not istable(state) then return false end
    owned = true
  end
  if not istable(state) then error("init must return a table (it returned a " .. type(state) .. ")", 0) end
  begin()
  placeRoot(holder, "state", state, "init's state", owned)
  commit()
  S.trimCaches(false, true) -- the records of a whole new state are not needed past its transaction
  return true
end

-- The state; or, given a recording's JSON `text`, whether the state is exactly the value it holds (false also where
-- the C reader is unsure: the host then reads the text itself).
function M.state(text)
  if text ~= nil then return matchesjson(holder.state, text) end
  return holder.state
end

-- Child stores: local state of their own, reduced by their own module, never writing the root's.

function M.setChild(id, state)
  if not istable(state) then error("a child's init must return a table (it returned a " .. type(state) .. ")", 0) end
  begin()
  placeRoot(children, id, state, "the child's init state")
  commit()
end

function M.removeChild(id)
  children[id] = nil
  S.tablesLeft = true
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

