-- The sandbox's guarded base functions (part of the prelude, which runs this chunk with what it shares, in order, as
-- its arguments):
-- `next`, `rawget`, `rawlen`, `rawset` and `getmetatable` on sealed tables, `setmetatable` without finalizers or
-- weak modes the host keeps strong, the collector as scripts may drive it, `sortedpairs`, and coroutines with the
-- time budget. Returns what the rest of the prelude uses.
local add_to_library, frozen, global_sets, host_gcmode, host_makeclose, host_makewrap, host_resume, open_libraries,
  raw_getmetatable, real_collectgarbage, real_getmetatable, real_pcall, real_rawset, real_setmetatable, refuse,
  safe_tostring, set_global, sort, typename, weak_tables_honoured, error, builtin, argerror = ...

-- Markers (`__metatable` values) of host tables that may change only through their metamethods, such as a
-- store's state proxies: `rawset` on one would write past the host's bookkeeping (LuaVM.sealRawWrites). They
-- read as tables: `next`, `rawget` and `rawlen` go through their metamethods (so the host sees every read), and
-- `getmetatable` answers nil.
local sealed = {}
-- (The libraries' functions as they were: a script may replace them, under `luakit` as in Lua.)
local math_tointeger = math.tointeger

-- `next` on a sealed table: its metatable's `__next(t, key)` where it has one (a store's state: Lua's `next` on the
-- table it stands for, a cleared key valid as in Lua), answering true, the key and the value, or false and why not;
-- else its `__pairs` walk, kept between calls, so `next(t, k)` after `next(t, …)` gave `k` costs one step (a key out
-- of turn walks again up to it).
local walks = real_setmetatable({}, { __mode = "k" }) -- sealed table -> { iterator, its state, the last key }
local function sealed_next(t, key)
  local direct = raw_getmetatable(t).__next
  if direct ~= nil then
    local ok, found, value = direct(t, key)
    if not ok then error(found, 3) end
    if found == nil then return nil end -- (one value at the end, as Lua's `next`)
    return found, value
  end
  local walk = walks[t]
  if key == nil or walk == nil or walk[3] ~= key then
    local iterator, state, control = pairs(t)
    walk = { iterator, state, control }
    walks[t] = walk
    while key ~= nil and walk[3] ~= key do
      local found = iterator(state, walk[3])
      if found == nil then walks[t] = nil; error("invalid key to 'next'", 3) end
      walk[3] = found
    end
  end
  local found, value = walk[1](walk[2], walk[3])
  walk[3] = found
  if found == nil then
    walks[t] = nil
    return nil -- (one value at the end, as Lua's `next`)
  end
  return found, value
end

local function sandbox_rawlen(...)
  local t = ...
  local kind = type(t)
  if kind == "table" then
    local marker = real_getmetatable(t)
    if marker ~= nil and sealed[marker] then return #t end
  elseif kind ~= "string" then
    refuse(rawlen, ...) -- Lua's own refusal ("no value" for none), named at the script's line
  end
  return rawlen(t)
end

local function sandbox_rawset(...)
  local t, key, value = ...
  if open_libraries[t] ~= nil and select("#", ...) >= 3 then
    add_to_library(open_libraries[t], frozen[t], key, value, 2)
    return t
  end
  if frozen[t] and type(t) == "table" then error("cannot modify a read-only table", 2) end -- (a file: refused below)
  local marker = real_getmetatable(t)
  if marker ~= nil and sealed[marker] then
    error("rawset: this table can be changed only by assignment (it is a " .. tostring(marker) .. ")", 2)
  end
  if key == "__mode" and not weak_tables_honoured then
    error("rawset: '__mode' fields are not available here (weak tables are kept strong: LuaLimits.weakTables)", 2)
  end
  if type(t) ~= "table" or select("#", ...) < 3 then
    refuse(real_rawset, ...) -- Lua's own refusals of its arguments, named at the script's line
  end
  if key == nil or key ~= key then error(key == nil and "table index is nil" or "table index is NaN", 0) end -- (as Lua's, no line)
  if global_sets[t] ~= nil then
    set_global(t, key, value, 2)
    return t
  end
  return real_rawset(t, key, value)
end

-- `__gc`: the metatable keeps it, but no object is ever marked for finalization (Lua marks an object only if its
-- metatable has `__gc` when `setmetatable` is called, so it is taken out for that call): a finalizer would run
-- with hooks off, where no time budget can stop it, and at a moment only the collector decides.
-- `__mode`: see LuaLimits.weakTables.
local script_metatables = real_setmetatable({}, { __mode = "k" }) -- the metatables scripts set (debug.getmetatable)


-- Where weak tables are kept strong, a metatable in use must not gain a `__mode` later either (`mt.__mode = "k"`
-- after `setmetatable(t, mt)` would make `t` weak: Lua reads the mode when it collects). A plain assignment
-- writes a key a table lacks raw unless the table's metatable has `__newindex`; so a metatable in use that has
-- no metatable of its own gets a hidden one, `mode_guard`, whose `__newindex` refuses `__mode` and writes every
-- other key as Lua would (`getmetatable` answers nil for it, `setmetatable` replaces it). `rawset` refuses
-- `__mode` itself. (A metatable whose own metatable a script set without `__newindex` is written raw: see
-- docs/lua.md.)
local mode_guard = {}
mode_guard.__newindex = function(t, key, value)
  if key == "__mode" then
    error("'__mode' cannot be assigned into a metatable here (weak tables are kept strong: LuaLimits.weakTables)", 2)
  end
  if key == nil or key ~= key then
    local ok, result = real_pcall(real_rawset, t, key, value) -- Lua's own refusals, at the script's line
    if not ok then error(result, 2) end
  end
  real_rawset(t, key, value)
end

local function guard_modes(metatable)
  if real_getmetatable(metatable) == nil then real_setmetatable(metatable, mode_guard) end
end

local function unguarded(...)
  if select("#", ...) == 0 then refuse(real_getmetatable) end -- ("value expected")
  local value = ...
  local metatable = real_getmetatable(value)
  if metatable == nil or rawequal(metatable, mode_guard) or sealed[metatable] then return nil end
  return metatable
end

local function sandbox_setmetatable(...)
  local t, metatable = ...
  if select("#", ...) < 2 or type(t) ~= "table" or (metatable ~= nil and type(metatable) ~= "table") then
    refuse(real_setmetatable, ...) -- Lua's own refusals (a missing argument too), named at the script's line
  end
  if frozen[t] then error("cannot change the metatable of a read-only table", 2) end
  local marker = type(metatable) == "table" and real_getmetatable(metatable) or nil
  if marker ~= nil and sealed[marker] then -- (Lua reads a metatable's fields raw: a state table's are the host's)
    error("setmetatable: this table cannot be a metatable (it is a " .. tostring(marker)
      .. ", whose fields Lua's raw reads of a metatable do not see); copy its fields into a plain table", 2)
  end
  if type(metatable) == "table" and frozen[metatable] then
    -- A read-only table of the host's (`getmetatable(io.stdout)`, a library): Lua reads a metatable's fields raw,
    -- and such a table holds none of its own, so its fields are copied into a plain table, which becomes the
    -- metatable (what the script gets, and may change, is its own).
    local copy = {}
    for key, value in next, frozen[metatable] do copy[key] = value end
    metatable = copy
  end
  local finalizer
  if not weak_tables_honoured and metatable == nil and rawequal(raw_getmetatable(t), mode_guard) then
    return t -- (a metatable in use keeps its guard: it has no metatable as far as scripts can see)
  end
  if type(metatable) == "table" and not frozen[metatable] then
    if not weak_tables_honoured then
      if rawget(metatable, "__mode") ~= nil then
        real_rawset(metatable, "__mode", nil) -- kept strong: no reducer may depend on when the collector runs
      end
      guard_modes(metatable)
    end
    finalizer = rawget(metatable, "__gc")
    if finalizer ~= nil then real_rawset(metatable, "__gc", nil) end
  end
  local ok, result
  if real_getmetatable(t) ~= nil then
    -- Lua's own refusal (a protected metatable), named at the script's line rather than this file's
    ok, result = real_pcall(real_setmetatable, t, metatable)
  else
    ok, result = true, real_setmetatable(t, metatable)
  end
  if finalizer ~= nil then real_rawset(metatable, "__gc", finalizer) end
  if not ok then error(result, 2) end
  if metatable ~= nil then script_metatables[metatable] = true end
  return result
end

-- The collector as scripts may drive it: collect, step, count, isrunning, and stop/restart where weak tables
-- are weak (scripts stop it to hold weak entries while they look at them); where they are kept strong nothing
-- can see the collector, so stop/restart only change what "isrunning" says. Its mode is the host's
-- (LuaLimits.garbageCollection): "incremental" and "generational" say which it is and leave it; tuning it is
-- the host's alone.
local stopped = false
local function sandbox_collectgarbage(option, argument)
  local kind = type(option)
  if kind ~= "string" and kind ~= "number" and option ~= nil then
    argerror(1, "string expected, got " .. typename(option))
  end
  if option == nil or option == "collect" then
    real_collectgarbage("collect")
    return 0
  elseif option == "count" then
    return real_collectgarbage(option)
  elseif option == "isrunning" then
    if weak_tables_honoured then return real_collectgarbage(option) end
    return not stopped
  elseif option == "stop" or option == "restart" then
    if weak_tables_honoured then
      real_collectgarbage(option)
    else
      stopped = option == "stop"
    end
    return 0
  elseif option == "step" then
    if argument ~= nil and math_tointeger(tonumber(argument)) == nil then -- (Lua's `luaL_optinteger`, in its words)
      argerror(2, tonumber(argument) ~= nil and "number has no integer representation" or "number expected, got " .. typename(argument))
    end
    return real_collectgarbage("step", argument or 0)
  elseif option == "incremental" or option == "generational" then
    return host_gcmode
  elseif option == "setpause" or option == "setstepmul" then
    error("collectgarbage: '" .. option .. "' is the host's to decide (scripts may collect, step, count, stop, restart and ask isrunning)", 2)
  end
  argerror(1, "invalid option '" .. safe_tostring(option) .. "'")
end

local real_randomseed = math.randomseed
math.randomseed = builtin(function(...)
  local seed = ...
  if seed == nil then argerror(1, "scripts must give a seed") end
  local ok, first, second = real_pcall(real_randomseed, ...)
  if not ok then refuse(real_randomseed, ...) end -- (Lua's refusal, naming the function as the script called it)
  return first, second
end)
real_randomseed(0x4C7561)

local order = { boolean = 1, number = 2, string = 3 }

local function before(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return order[ta] < order[tb] end
  if ta == "boolean" then return not a and b end
  return a < b
end

local function sortedpairs(t)
  if type(t) ~= "table" then
    argerror(1, "table expected, got " .. (t == nil and "no value" or type(t)))
  end
  local keys, count = {}, 0
  for key in pairs(t) do
    if order[type(key)] == nil then error("sortedpairs: keys of type " .. type(key) .. " have no order", 2) end
    count = count + 1
    keys[count] = key
  end
  sort(keys, before)
  local index = 0
  return function()
    index = index + 1
    local key = keys[index]
    if key ~= nil then return key, t[key] end
  end
end

-- Coroutines: Lua's, with the time budget holding inside them (the host's `resume` lets the watchdog stop the
-- coroutine that runs, and a spent budget stops the caller too) and `close` nested at most 64 deep (deeper
-- chains overflow Lua 5.4.4's C stack). `wrap` is `resume`'s, as Lua's is.
local sandbox_close = host_makeclose(coroutine.close)

local sandbox_coroutine = {
  create = coroutine.create, resume = host_resume, yield = coroutine.yield, status = coroutine.status,
  wrap = host_makewrap(coroutine.close), isyieldable = coroutine.isyieldable, running = coroutine.running, close = sandbox_close,
}

return mode_guard, sandbox_collectgarbage, sandbox_coroutine, sandbox_rawlen, sandbox_rawset, sandbox_setmetatable,
  script_metatables, sortedpairs, unguarded, sealed, sealed_next
