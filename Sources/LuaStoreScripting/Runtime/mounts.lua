-- Mounts: the app of a store whose manifest mounts plugins, made of the host app's functions and each plugin's
-- (Mounts.swift loads it, trusted; docs/plugins.md, "Mounts", is the contract).
--
-- Every plugin's slice is the state's value at its key. Each action reaches the host's `reduce` (if it has one),
-- then each plugin's in the order of their keys, in one transaction: a failure anywhere undoes the whole action.
-- Each gets its own copy of the action: what one writes into it, no other sees.
-- A plugin's functions get its slice (writable), the slices it declares in `reads` (read-only views), and run
-- `within` its own budgets (time and memory per call, inside the host's); its commands and subscriptions are
-- tagged with its key (`mount`), which is how the host checks them against the plugin's own capabilities. The
-- host's `reduce` sees the mounted slices read-only: only a plugin writes its slice.
--
-- Receives: the proxies' `__metatable` marker (read-only views carry it too, so the sandbox's `rawset` refuses
-- them) and the state runtime's `renderKey` (paths in messages are named by one set of rules). Returns the module: `plugin(…)` checks a plugin's module and makes its record, `compose(…)` makes the
-- store's `init`, `reduce`, `subscriptions` and `migrate` of the host's functions and the plugins' records.

local MARKER, step = ...
local type, error, pairs, setmetatable, tostring, next = type, error, pairs, setmetatable, tostring, next
local istable, within, newaccount, readaccount, copydata, readsonly = istable, within, newaccount, readaccount, copydata, readsonly
local format = string.format

-- MARK: Read-only views

-- A view of the state table `p` (a proxy) at `path` that reads through it and refuses every write, naming the
-- path and `why`: views of its tables are views too. Kept past the call that received it, a view fails as the
-- proxy under it does.
local function readonly(p, path, why)
  local views = {}
  local function view(t, at)
    local v = views[t]
    if v then return v end
    v = setmetatable({}, {
      __index = function(_, key)
        local value = t[key]
        if istable(value) then return view(value, at .. step(key)) end
        return value
      end,
      __newindex = function(_, key)
        error(format("cannot write %s: %s", at .. step(key), why), 2)
      end,
      __len = function() return #t end,
      __pairs = function()
        local next_, state, control = pairs(t)
        return function(_, key)
          local k, value = next_(state, key)
          if istable(value) then value = view(value, at .. step(k)) end
          return k, value
        end, v, control
      end,
      __metatable = MARKER,
    })
    views[t] = v
    return v
  end
  return view(p, path)
end

-- MARK: Commands

-- `command` as a copy tagged with the key of the plugin it came from (`mount`); a host's (`key` nil) with no
-- tag, so none can claim a plugin's capabilities. Anything that is not a table goes on, to be refused later.
local function marked(command, key)
  if not istable(command) or (key == nil and command.mount == nil) then return command end
  local copy = {}
  for field, value in pairs(command) do copy[field] = value end
  copy.mount = key
  return copy
end

-- The commands a plugin (`key`) or the host returned, marked, appended to `into`.
local function tagged(commands, key, whose, into)
  if commands == nil then return into end
  if not istable(commands) then
    error(format("%s's reduce must return a list of commands as its second result (got a %s)", whose, type(commands)), 0)
  end
  into = into or {}
  for i = 1, #commands do into[#into + 1] = marked(commands[i], key) end
  return into
end

-- MARK: Composing

local compose -- (below)
local placedCount = 0 -- slices the composed migrate placed since `placed()` was last asked

local M = {}

-- The record of the plugin mounted at `key` (its manifest's `name`; `main`: its module's file, for messages)
-- whose module is `module`: its functions, limits (`milliseconds`, `bytes`; 0: the host's), the keys it reads,
-- its `schemaVersion` (`schema`), the running version's (`from`, nil for a new mount; `fromVersion`, its
-- manifest's version), and its account (`account`, which `within` keeps; the running version's `previous` one
-- goes on).
function M.plugin(key, name, main, module, milliseconds, bytes, reads, from, fromVersion, previous)
  local whose = format("plugin '%s' (%s, mounted at '%s')", name, main, key)
  if not istable(module) then error(format("%s must return a table of functions (init, reduce), not a %s", whose, type(module)), 0) end
  local function export(field, required)
    local value = module[field]
    if value == nil and not required then return nil end
    if type(value) ~= "function" then
      error(format("%s must export a function '%s'%s", whose, field, value == nil and "" or (", not a " .. type(value))), 0)
    end
    return value
  end
  local schema = module.schemaVersion
  if schema == nil then schema = 0 end
  if math.type(schema) ~= "integer" or schema < 0 then error(format("%s's 'schemaVersion' must be a non-negative integer", whose), 0) end
  if from ~= nil and schema < from then
    error(format("%s: schemaVersion went down from %d to %d; the new version is refused", whose, from, schema), 0)
  end
  local record = {
    key = key, name = name, init = export("init", true), reduce = export("reduce", true),
    subscriptions = export("subscriptions", false), migrate = export("migrate", false),
    milliseconds = milliseconds, bytes = bytes, reads = reads, schema = schema, from = from, fromVersion = fromVersion,
    account = previous and previous.account or newaccount(),
  }
  if from ~= nil and schema > from and record.migrate == nil then
    error(format("%s: schemaVersion grew from %d to %d but it has no 'migrate'", whose, from, schema), 0)
  end
  return record
end

-- How many new mounts' slices the composed `migrate` placed since this was last asked.
function M.placed()
  local count = placedCount
  placedCount = 0
  return count
end

-- What the plugin whose record is `record` has cost so far (`within`'s account, as a table).
function M.cost(record)
  return readaccount(record.account)
end

-- The store's functions: the host's (`name`, its module's `init`, `reduce`, `subscriptions`, `migrate`; all but
-- `init` may be nil) composed with the plugins' records, in the order their actions run.
function M.compose(name, hostInit, hostReduce, hostSubscriptions, hostMigrate, ...)
  local host = { name = name, init = hostInit, reduce = hostReduce, subscriptions = hostSubscriptions, migrate = hostMigrate }
  local plugins = { ... }
  return compose(host, plugins)
end

function compose(host, plugins)
  local mounted = {}
  for i = 1, #plugins do mounted[plugins[i].key] = plugins[i] end

  local function call(plugin, fn, ...)
    return within(plugin.account, plugin.milliseconds, plugin.bytes, fn, ...)
  end

  -- What a plugin's function gets after its slice: a table of the slices it reads (read-only), or nothing.
  local function reads(state, plugin)
    local keys = plugin.reads
    if #keys == 0 then return nil end
    local views = {}
    for i = 1, #keys do
      local key = keys[i]
      views[key] = readonly(state[key], key, format("plugin '%s' reads the slice '%s', which only plugin '%s' writes", plugin.name, key, mounted[key].name))
    end
    return views
  end

  -- The host's view of the state: its own keys as they are, the mounted slices read-only.
  local function hostView(state)
    local views = {}
    return setmetatable({}, {
      __index = function(_, key)
        local plugin = mounted[key]
        if plugin == nil then return state[key] end
        local v = views[key]
        if v == nil then
          v = readonly(state[key], key, format("'%s' is the slice of plugin '%s', and only it writes there", key, plugin.name))
          views[key] = v
        end
        return v
      end,
      __newindex = function(_, key, value)
        local plugin = mounted[key]
        if plugin ~= nil then
          error(format("cannot replace '%s': it is the slice of plugin '%s' (only it writes there)", tostring(key), plugin.name), 2)
        end
        state[key] = value
      end,
      __len = function() return #state end,
      __pairs = function(v)
        local next_, s, control = pairs(state)
        return function(_, key)
          local k, value = next_(s, key)
          if k ~= nil and mounted[k] then value = v[k] end
          return k, value
        end, v, control
      end,
      __metatable = MARKER,
    })
  end

  -- A new slice for `plugin`, from its `init`.
  local function newSlice(plugin)
    local slice = call(plugin, plugin.init)
    if not istable(slice) then
      error(format("plugin '%s' (mounted at '%s'): init must return a table, its slice (got a %s)", plugin.name, plugin.key, type(slice)), 0)
    end
    return slice
  end

  local function init()
    local state = host.init()
    if state == nil then state = {} end
    if not istable(state) then
      error(format("%s's init must return a table: it mounts plugins under keys of its state (got a %s)", host.name, type(state)), 0)
    end
    for i = 1, #plugins do
      local plugin = plugins[i]
      if state[plugin.key] ~= nil then
        error(format("%s's init put a value at '%s', where plugin '%s' is mounted", host.name, plugin.key, plugin.name), 0)
      end
      state[plugin.key] = newSlice(plugin)
    end
    return state
  end

  -- Each plugin's fields in lists, by position (each action goes through them all).
  local count = #plugins
  local keys, reduces, accounts, limits, growths, reading = {}, {}, {}, {}, {}, {}
  for i = 1, count do
    local plugin = plugins[i]
    keys[i], reduces[i], accounts[i] = plugin.key, plugin.reduce, plugin.account
    limits[i], growths[i], reading[i] = plugin.milliseconds, plugin.bytes, #plugin.reads > 0
  end

  -- What plugin `i`'s reduce returned, applied: a new slice placed, its commands marked and added.
  local function returned(state, i, replaced, returned, commands)
    local plugin = plugins[i]
    if replaced ~= nil then
      if not istable(replaced) then
        error(format("plugin '%s' (mounted at '%s'): reduce must return its slice, a new slice table, or nothing (it returned a %s)",
          plugin.name, plugin.key, type(replaced)), 0)
      end
      state[plugin.key] = replaced
    end
    if returned ~= nil then return tagged(returned, plugin.key, "plugin '" .. plugin.name .. "'", commands) end
    return commands
  end

  -- A copy of an action (data: the host converted it), so that what one reducer writes into its action reaches
  -- no other: each sees the action as it was dispatched, as a lone app would. A reduce whose bytecode only reads
  -- its action's fields (`readsonly`) is given the dispatched table itself when that holds no tables: it cannot
  -- change it, so the copy would buy nothing.
  local copied = copydata -- (a deep copy of the action, plain data as the host converted it, made in C)
  local readonly = {}
  for i = 1, count do readonly[i] = readsonly(reduces[i], 2) end

  local hostReduce = host.reduce
  local hostReadsOnly = hostReduce ~= nil and readsonly(hostReduce, 2)
  local function reduce(state, action)
    local commands
    if hostReduce ~= nil then
      local replaced, own = hostReduce(hostView(state), count > 0 and copied(action, hostReadsOnly) or action)
      if replaced ~= nil then
        error(format("%s's reduce may not return a new state: it mounts plugins, whose slices are in it (change it in place)", host.name), 0)
      end
      commands = tagged(own, nil, host.name, nil)
    end
    for i = 1, count do
      local replaced, own
      local given = i < count and copied(action, readonly[i]) or action -- (the last one may keep the dispatched table)
      if reading[i] then
        replaced, own = within(accounts[i], limits[i], growths[i], reduces[i], state[keys[i]], given, reads(state, plugins[i]))
      else
        replaced, own = within(accounts[i], limits[i], growths[i], reduces[i], state[keys[i]], given)
      end
      if replaced ~= nil or own ~= nil then commands = returned(state, i, replaced, own, commands) end
    end
    return nil, commands
  end

  local hostSubscriptions = host.subscriptions
  local anySubscriptions = hostSubscriptions ~= nil
  for i = 1, #plugins do anySubscriptions = anySubscriptions or plugins[i].subscriptions ~= nil end
  local subscriptions = nil
  if anySubscriptions then
    subscriptions = function(state)
      local all = {}
      if hostSubscriptions ~= nil then
        local own = hostSubscriptions(state)
        if own ~= nil then
          if not istable(own) then error(format("%s's subscriptions must return a table (got a %s)", host.name, type(own)), 0) end
          for id, command in pairs(own) do all[id] = marked(command, nil) end
        end
      end
      for i = 1, #plugins do
        local plugin = plugins[i]
        if plugin.subscriptions ~= nil then
          local own = call(plugin, plugin.subscriptions, state[plugin.key], reads(state, plugin))
          if own ~= nil then
            if not istable(own) then
              error(format("plugin '%s' (mounted at '%s'): subscriptions must return a table (got a %s)", plugin.name, plugin.key, type(own)), 0)
            end
            for id, command in pairs(own) do all[plugin.key .. "/" .. tostring(id)] = marked(command, plugin.key) end
          end
        end
      end
      return all
    end
  end

  -- `migrate(state, fromSchema, fromVersion)`: the host's own migration when its schema grew (`hostFrom` is
  -- not nil), then each plugin's: a new mount's `init` placed at its key, a grown schema's `migrate`.
  local hostMigrate = host.migrate
  local function migrate(state, hostFrom, fromVersion)
    if hostFrom ~= nil and hostMigrate ~= nil then
      local replaced = hostMigrate(hostView(state), hostFrom, fromVersion)
      if replaced ~= nil then
        error(format("%s's migrate may not return a new state: it mounts plugins, whose slices are in it (change it in place)", host.name), 0)
      end
    end
    for i = 1, #plugins do
      local plugin = plugins[i]
      local key = plugin.key
      if state[key] == nil then
        state[key] = newSlice(plugin)
        placedCount = placedCount + 1
      elseif plugin.from ~= nil and plugin.schema > plugin.from then
        local replaced = call(plugin, plugin.migrate, state[key], plugin.from, plugin.fromVersion)
        if replaced ~= nil then state[key] = replaced end
      end
    end
  end

  return init, reduce, subscriptions, migrate
end

return M
