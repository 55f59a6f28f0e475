-- The trusted chunk that builds the sandbox from the real libraries, once per VM, before any script runs
-- (LuaVM.buildSandbox loads it; it is embedded into the binary at build time by the EmbedLua plugin).
--
-- It receives the host's primitives (`strings`, `print`, `readmodule`, `readfile`, `hostmodule`, `callerkind`, `gcmode`,
-- `pcall`, `xpcall`) and returns the sandbox's interface: `environment()` gives the default namespace's globals (or,
-- `environment(true)`, a fresh strict environment of its own), `define` and
-- `definemodule` add host values, `require` loads app modules, `namespace(root, strict)` makes a new `require` with a
-- module cache and globals of its own, `lock()` lets globals be set only as modules load (a store, once its app
-- loaded), `seal(marker)` makes `rawset` refuse tables whose `__metatable` is `marker`, and
-- `reference_strings` keeps Lua's own `find`, `match`, `gmatch`, `gsub`, `format` and `tostring` for
-- differential tests and benchmarks (never given to scripts; trusted code sees it as `referencestrings`).
-- Everything a script can reach is built here; the real library tables, the string metatable and the host
-- table itself stay out of reach.

local host = ...
local type, error, select, next, ipairs, pairs = type, error, select, next, ipairs, pairs
local rawget, rawequal, rawlen, tonumber, assert = rawget, rawequal, rawlen, tonumber, assert
local real_rawset, real_setmetatable, real_getmetatable = rawset, setmetatable, getmetatable
local real_load, real_collectgarbage, real_pcall = load, collectgarbage, pcall
local string, table, math, utf8, coroutine = string, table, math, utf8, coroutine
-- Of the debug library scripts get `traceback` (it reads the stack, changes nothing) and `getmetatable` (below);
-- the rest reaches into the VM, past every guard. Not even trusted code keeps it.
local real_traceback, raw_getmetatable = debug.traceback, debug.getmetatable
-- (`getinfo`, `getlocal` and `getupvalue` answer three questions below — whether a module is loading, and which,
-- from the frames on the stack, and which namespace's code calls a method on a string — and nothing else.)
local real_getinfo, real_getlocal, real_getupvalue = debug.getinfo, debug.getlocal, debug.getupvalue
debug = nil
local reference_strings = {
  find = string.find, match = string.match, gmatch = string.gmatch, gsub = string.gsub, format = string.format,
  tostring = tostring,
}
local concat, sort = table.concat, table.sort
local host_strings, host_print, host_write, host_readmodule = host.strings, host.print, host.write, host.readmodule
local host_readfile, host_callerkind, host_gcmode, host_path = host.readfile, host.callerkind, host.gcmode, host.path
local host_resume, host_makeclose, host_makewrap, host_hostmodule = host.resume, host.makeclose, host.makewrap, host.hostmodule
local weak_tables_honoured = host.weaktables
local sandbox_pcall, sandbox_xpcall = host.pcall, host.xpcall

-- Strings: Lua's pattern functions with the time budget, and `tostring` without addresses, in C
-- (CLuaGuard/strings.c, patterns.c, format.c) --------------------------------------------------------------

local safe_tostring = host_strings.tostring

-- (`tostring`'s own refusal — a `__tostring` that returned no string — is raised at the line that called `print`,
-- as Lua's `print` raises it; what a `__tostring` raised goes on as it is.)
local function sandbox_print(...)
  local parts = {}
  for index = 1, select("#", ...) do
    local ok, text = real_pcall(safe_tostring, (select(index, ...)))
    if not ok then error(text, text == "'__tostring' must return a string" and 2 or 0) end
    parts[index] = text
  end
  host_print(concat(parts, "\t"))
end

string.find, string.match = host_strings.find, host_strings.match
string.gmatch, string.gsub = host_strings.gmatch, host_strings.gsub
string.format = host_strings.format
-- `rep` and `table`'s `move`, `insert`, `remove`, `concat` and `sort` loop in C over what a script asks: these are
-- Lua's with the time budget (strings.c, tables.c).
string.rep = host_strings.rep
table.move, table.insert, table.remove, table.concat = host.tables.move, host.tables.insert, host.tables.remove, host.tables.concat
table.sort = host.tables.sort

-- Read-only library tables -----------------------------------------------------------------------------

local frozen = {} -- read-only proxy -> the table it shows (which scripts never reach)
local global_sets = real_setmetatable({}, { __mode = "k" }) -- a namespace's global table -> the globals its scripts set

local function freeze(name, source)
  for key, value in next, source do
    if type(value) == "table" and not frozen[value] then
      source[key] = freeze(name .. "." .. safe_tostring(key), value)
    end
  end
  local proxy = {}
  real_setmetatable(proxy, {
    __index = source,
    __newindex = function(_, key)
      error("cannot modify read-only table '" .. name .. "' (field '" .. safe_tostring(key) .. "')", 2)
    end,
    __pairs = function()
      local key
      return function()
        local value
        key, value = next(source, key)
        return key, value
      end
    end,
    __len = function() return #source end,
    __metatable = false,
  })
  frozen[proxy] = source
  return proxy
end

-- The type Lua's messages name for `value`: its metatable's `__name` if that is a string, else its type.
local function typename(value)
  local metatable = raw_getmetatable(value)
  local name = metatable ~= nil and rawget(metatable, "__name") or nil
  return type(name) == "string" and name or type(value)
end

-- Lua's own refusal of the arguments `...` by its function `f` (which must refuse them), raised at the line of the
-- script that called the sandbox's function: the message names the argument, says "no value" for a missing one
-- and the type a `__name` metafield names, as Lua's does.
local function refuse(f, ...)
  local ok, message = real_pcall(f, ...)
  if not ok then error(message, 3) end
  error("the sandbox expected Lua to refuse these arguments", 0)
end

-- A namespace's globals (see "Globals" below) are two tables: the one scripts see as `_G`, holding what the
-- namespace started with (raw, so reading `pairs` or `string` costs what a table read costs), and the set of
-- globals its scripts assigned, which the first shows through `__index`. `next` walks the first, then the set.
local function globals_next(g, key)
  if key == nil or rawget(g, key) ~= nil then
    local name, value = next(g, key)
    if name ~= nil then return name, value end
    return next(global_sets[g], nil)
  end
  return next(global_sets[g], key)
end

-- Once a store has loaded its app (`lock`), a script may set a global only while a module loads: a global set as
-- a reducer or props runs would be state outside the journal, which replay and time travel cannot restore.
-- Whether a module is loading is read from the stack (a namespace's `require` below the writer), so nothing is
-- counted on the way in or out, and nothing is left behind by a load that failed.
local globals_locked = false
local module_loaders = real_setmetatable({}, { __mode = "k" }) -- each namespace's `require`

local function module_loading()
  local level = 3
  while true do
    local info = real_getinfo(level, "f")
    if info == nil then return false end
    if module_loaders[info.func] then return true end
    level = level + 1
  end
end

-- Sets global `name` of the namespace whose globals are `g` (called at `level` below the script that assigns).
local function set_global(g, name, value, level)
  if globals_locked and not module_loading() then
    error("cannot set global '" .. safe_tostring(name) .. "' while the store runs: a global is state outside the journal, "
      .. "which replay and time travel cannot restore (set it as a module loads, or keep it in the state)", level + 1)
  end
  if rawget(g, name) ~= nil then
    real_rawset(g, name, value)
  else
    real_rawset(global_sets[g], name, value)
  end
end

-- `next` and `rawget` read a read-only table as the table it shows, as Lua reads its libraries (`next(string)`,
-- `rawget(math, "pi")`); writing stays refused. A namespace's globals read as one table.
-- (The libraries a store's scripts may add to, and what each namespace added: below, with the libraries. Which
-- namespace loaded each chunk, by its name: how code that names no global is told apart.)
local open_libraries, caller_own, library_next, add_to_library
local chunk_namespaces = real_setmetatable({}, { __mode = "v" }) -- chunk name -> the namespace that last loaded it

local sealed_next, sealed -- (below)

local function sandbox_next(...)
  local t, key = ...
  if type(t) == "table" and real_getmetatable(t) == nil then return next(t, key) end -- (a plain table)
  local source = frozen[t]
  if source ~= nil then
    local library = open_libraries[t]
    if library ~= nil then return library_next(source, caller_own(library, 2), key) end
    return next(source, key)
  end
  if global_sets[t] ~= nil then return globals_next(t, key) end
  if type(t) ~= "table" then refuse(next, ...) end
  if sealed[real_getmetatable(t)] then return sealed_next(t, key) end
  return next(t, key)
end

local function sandbox_rawget(...)
  local t, key = ...
  local source = frozen[t]
  if source ~= nil then
    local value = rawget(source, key)
    local library = open_libraries[t]
    if value == nil and library ~= nil then
      local own = caller_own(library, 2)
      if own ~= nil then value = rawget(own, key) end
    end
    return value
  end
  if type(t) ~= "table" or select("#", ...) < 2 then refuse(rawget, ...) end
  local marker = real_getmetatable(t)
  if marker ~= nil and sealed[marker] then return t[key] end -- (a state table, read as the host keeps it)
  local set = global_sets[t]
  if set ~= nil then
    local value = rawget(t, key)
    if value == nil then value = rawget(set, key) end
    return value
  end
  return rawget(t, key)
end

local string_metatable = real_getmetatable("")
string_metatable.__index = string

-- Guarded base functions -------------------------------------------------------------------------------

-- Markers (`__metatable` values) of host tables that may change only through their metamethods, such as a
-- store's state proxies: `rawset` on one would write past the host's bookkeeping (LuaVM.sealRawWrites). They
-- read as tables: `next`, `rawget` and `rawlen` go through their metamethods (so the host sees every read), and
-- `getmetatable` answers nil.
sealed = {}

-- `next` on a sealed table: its `__pairs` walk, kept between calls, so `next(t, k)` after `next(t, …)` gave `k`
-- costs one step (a key out of turn walks again up to it).
local walks = real_setmetatable({}, { __mode = "k" }) -- sealed table -> { iterator, its state, the last key }
function sealed_next(t, key)
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
  if found == nil then walks[t] = nil end
  return found, value
end

local function sandbox_rawlen(t)
  if type(t) == "table" then
    local marker = real_getmetatable(t)
    if marker ~= nil and sealed[marker] then return #t end
  end
  return rawlen(t)
end

local function sandbox_rawset(...)
  local t, key, value = ...
  if open_libraries[t] ~= nil and select("#", ...) >= 3 then
    add_to_library(open_libraries[t], frozen[t], key, value, 2)
    return t
  end
  if frozen[t] then error("cannot modify a read-only table", 2) end
  local marker = real_getmetatable(t)
  if marker ~= nil and sealed[marker] then
    error("rawset: this table can be changed only by assignment (it is a " .. tostring(marker) .. ")", 2)
  end
  if key == "__mode" and not weak_tables_honoured then
    error("rawset: '__mode' fields are not available here (weak tables are kept strong: LuaLimits.weakTables)", 2)
  end
  if type(t) ~= "table" or key == nil or key ~= key or select("#", ...) < 3 then
    refuse(real_rawset, ...) -- Lua's own refusals, named at the script's line
  end
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

local function unguarded(value)
  local metatable = real_getmetatable(value)
  if metatable == nil or metatable == mode_guard or sealed[metatable] then return nil end
  return metatable
end

local function sandbox_setmetatable(...)
  local t, metatable = ...
  if select("#", ...) < 2 or type(t) ~= "table" or (metatable ~= nil and type(metatable) ~= "table") then
    refuse(real_setmetatable, ...) -- Lua's own refusals (a missing argument too), named at the script's line
  end
  if frozen[t] then error("cannot change the metatable of a read-only table", 2) end
  local finalizer
  if not weak_tables_honoured and metatable == nil and raw_getmetatable(t) == mode_guard then
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
    -- (Lua's words; `real_collectgarbage` would be named '?': the sandbox's replaced it in the global table)
    error("bad argument #1 to 'collectgarbage' (string expected, got " .. typename(option) .. ")", 2)
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
    if argument ~= nil and tonumber(argument) == nil then
      error("bad argument #2 to 'collectgarbage' (number expected, got " .. type(argument) .. ")", 2)
    end
    return real_collectgarbage("step", argument or 0)
  elseif option == "incremental" or option == "generational" then
    return host_gcmode
  elseif option == "setpause" or option == "setstepmul" then
    error("collectgarbage: '" .. option .. "' is the host's to decide (scripts may collect, step, count, stop, restart and ask isrunning)", 2)
  end
  error("bad argument #1 to 'collectgarbage' (invalid option '" .. safe_tostring(option) .. "')", 2)
end

local real_randomseed = math.randomseed
math.randomseed = function(seed, more)
  if type(seed) ~= "number" then error("bad argument #1 to 'randomseed' (scripts must give a seed)", 2) end
  return real_randomseed(seed, more)
end
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
    error("bad argument #1 to 'sortedpairs' (table expected, got " .. (t == nil and "no value" or type(t)) .. ")", 2)
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
local real_status = coroutine.status

local function sandbox_wrap(fn)
  local co = coroutine.create(fn)
  local function finish(ok, ...)
    if ok then return ... end
    local problem = ...
    if real_status(co) == "dead" then sandbox_close(co) end -- (its to-be-closed variables, as Lua's wrap closes them)
    if type(problem) == "string" then error(problem, 2) end
    error(problem, 0)
  end
  return function(...) return finish(host_resume(co, ...)) end
end

local sandbox_coroutine = {
  create = coroutine.create, resume = host_resume, yield = coroutine.yield, status = coroutine.status,
  wrap = host_makewrap(sandbox_wrap), isyieldable = coroutine.isyieldable, running = coroutine.running, close = sandbox_close,
}

-- Environments, modules --------------------------------------------------------------------------------

local globals = {} -- what every namespace's globals start as

-- Strict globals as Lua's own `strict.lua` has them, for a namespace that asks for them (`namespace(root, true)`)
-- and for the host's own modules: a function that reads a global nobody set is an error (a typo fails loudly),
-- while a chunk's top level and C may probe and get nil (`local unpack = unpack or table.unpack`, `if setfenv
-- then`); `rawget(_G, name)` probes anywhere.
local function undeclared(_, name)
  local caller = host_callerkind(2)
  if caller == "main" or caller == "C" then return nil end
  error("undeclared global '" .. safe_tostring(name) .. "'", 2)
end
local strict_reads = { __index = undeclared }
local environment_metatable = {
  __index = undeclared,
  __newindex = function(_, name)
    error("assignment to undeclared global '" .. safe_tostring(name) .. "' (declare it with 'local')", 2)
  end,
  __metatable = false,
}

local default_require

local packages = real_setmetatable({}, { __mode = "k" }) -- a namespace's `require` -> its `package` table
local globals_of = real_setmetatable({}, { __mode = "k" }) -- a namespace's `require` -> what makes and gives its globals

-- A fresh strict environment of its own, for a module the host defined (never shared with scripts).
local function private_environment()
  local env = {}
  for name, value in next, globals do env[name] = value end
  env._G = env
  env.require = default_require
  env.package = packages[default_require]
  return real_setmetatable(env, environment_metatable)
end

-- Globals, one table per namespace, as `_G` is one table in Lua: its chunks share it, reading a global nobody set
-- gives nil, and assigning one sets it (`x = 1`, `_G.x = 1`, `rawset(_G, "x", 1)`, `function f() end`), until a
-- store locks them (`set_global`). A strict namespace (`strict`) refuses, as `strict.lua` does, a function's
-- read of a global nobody set and its assignment of a new one.
local function new_globals(require_function, strict)
  local g, set = {}, {}
  for name, value in next, globals do g[name] = value end
  g._G = g
  g.require = require_function
  g.package = packages[require_function]
  global_sets[g] = set
  if strict then real_setmetatable(set, strict_reads) end
  return real_setmetatable(g, {
    __index = set,
    __newindex = function(t, name, value)
      if strict and rawget(set, name) == nil then -- (a new one)
        local caller = host_callerkind(2)
        if caller ~= "main" and caller ~= "C" then
          error("assignment to undeclared global '" .. safe_tostring(name) .. "' (declare it with 'local')", 2)
        end
      end
      set_global(t, name, value, 2)
    end,
    __pairs = function(t) return globals_next, t, nil end,
    __metatable = false,
  })
end

-- `load` as Lua's: a string or a reader function (its pieces until nil or ""), a chunk name (the string itself by
-- default), a mode ("bt" by default: a text chunk where it has no "t" is refused as Lua refuses it), an
-- environment (a fresh sandbox environment unless one is given — `nil` too, as in Lua). A binary chunk is refused
-- whatever the mode: scripts load source text only.
local function sandbox_load(default_env, ...)
  local chunk, chunkname, mode, env = ...
  local kind = type(chunk)
  if kind ~= "string" and kind ~= "function" then refuse(real_load, ...) end
  local nameKind, modeKind = type(chunkname), type(mode)
  if (chunkname ~= nil and nameKind ~= "string" and nameKind ~= "number")
      or (mode ~= nil and modeKind ~= "string" and modeKind ~= "number") then
    refuse(real_load, ...)
  end
  if kind == "function" then
    local reader, pieces, count = chunk, {}, 0
    while true do
      local ok, piece = sandbox_pcall(reader)
      if not ok then return nil, piece end
      if piece == nil or piece == "" then break end
      local pieceKind = type(piece)
      if pieceKind ~= "string" and pieceKind ~= "number" then
        -- (Lua's message, at the line that called `load`)
        return nil, select(2, real_pcall(error, "reader function must return a string", 3))
      end
      count = count + 1
      pieces[count] = piece
    end
    chunk = concat(pieces)
    if chunkname == nil then chunkname = "=(load)" end
  elseif chunkname == nil then
    chunkname = chunk
  end
  mode = mode == nil and "bt" or tostring(mode)
  if chunk:byte(1) == 27 then
    if not mode:find("b", 1, true) then return nil, "attempt to load a binary chunk (mode is '" .. mode .. "')" end
    return nil, "attempt to load a binary chunk (scripts load source text only)"
  end
  if not mode:find("t", 1, true) then return nil, "attempt to load a text chunk (mode is '" .. mode .. "')" end
  if select("#", ...) < 4 then env = default_env or private_environment() end
  return real_load(chunk, chunkname, "t", env)
end

local builtins = {}     -- modules `require` returns by name: the standard libraries, and what the host defines
local deferred = {}     -- host modules defined by their chunk, not run yet (`load_deferred`, below)
local load_deferred

-- Standard libraries the sandbox leaves out: `require` says so, rather than looking for a file of that name.
local unavailable = {
  os = "no clocks, processes or environment",
}

-- A module namespace: its own cache, so a new version of an app's modules can load beside the old one. Its
-- `package` table is Lua's, as data: `loaded` (what `require` returned, and what a script puts there),
-- `preload` (loaders `require` tries first), `path` and `config`; modules load from the app's folder only.
local make_file_loaders -- (below, with the globals they replace)

-- Whether `require_function` is loading module `name` further down the stack (a frame of it whose first local,
-- its argument, is the name).
local function requiring(require_function, name)
  local level = 3
  while true do
    local info = real_getinfo(level, "f")
    if info == nil then return false end
    if info.func == require_function and select(2, real_getlocal(level, 1)) == name then return true end
    level = level + 1
  end
end

local function namespace(root, strict)
  local loading = {}
  local g -- (its globals, made when its first chunk loads: `own_globals()`)
  local require
  local package = { loaded = {}, preload = {}, path = host_path, config = "/\n;\n?\n!\n-\n" }
  for name, value in next, builtins do package.loaded[name] = value end
  package.loaded.package = package
  local function own_globals()
    if g == nil then
      g = new_globals(require, strict)
      g.loadfile, g.dofile = table.unpack(make_file_loaders(root, g))
      g.load = function(...) return sandbox_load(g, ...) end
    end
    return g
  end
  function require(name)
    if type(name) ~= "string" then
      error("bad argument #1 to 'require' (string expected, got " .. (name == nil and "no value" or type(name)) .. ")", 2)
    end
    local loaded = package.loaded
    local value = type(loaded) == "table" and rawget(loaded, name) or nil
    if value ~= nil then return value end
    value = builtins[name]
    if value ~= nil then return value end
    if deferred[name] then return load_deferred(name) end
    if unavailable[name] then
      error("require: module '" .. name .. "' is not available in the sandbox (" .. unavailable[name] .. ")", 2)
    end
    if loading[name] then
      -- (A load that failed without coming back here — a spent budget unwinds past every handler — left its mark:
      -- it is a cycle only while this `require` of the name is still on the stack.)
      if requiring(require, name) then error("require: module '" .. name .. "' requires itself (a cycle)", 2) end
    end
    local chunk, extra
    local preload = type(package.preload) == "table" and rawget(package.preload, name) or nil
    if preload ~= nil then
      chunk, extra = preload, ":preload:"
    else
      local source, chunkname = host_readmodule(name, root)
      local problem
      chunk, problem = real_load(source, chunkname, "t", g or own_globals())
      chunk_namespaces[chunkname] = g
      if chunk == nil then error(problem, 0) end
      -- (Where Lua's searcher found it: through package.path's "./?.lua", or the module path's absolute template.)
      extra = chunkname:sub(2)
      if extra:sub(1, 1) ~= "/" and extra:sub(1, 2) ~= "./" then extra = "./" .. extra end
    end
    loading[name] = true
    local ok, result = sandbox_pcall(chunk, name, extra)
    loading[name] = nil
    if not ok then error(result, 0) end
    loaded = package.loaded
    if result ~= nil then
      loaded[name] = result
    elseif rawget(loaded, name) == nil then
      loaded[name] = true
    end
    return loaded[name], extra
  end
  packages[require] = package
  globals_of[require] = own_globals
  module_loaders[require] = true
  return require
end

globals.assert, globals.error, globals.ipairs = assert, error, ipairs
globals.getmetatable = unguarded
globals.next, globals.pairs, globals.pcall, globals.xpcall = sandbox_next, pairs, sandbox_pcall, sandbox_xpcall
globals.print, globals.rawequal, globals.rawget, globals.rawlen = sandbox_print, rawequal, sandbox_rawget, sandbox_rawlen
globals.rawset, globals.select, globals.setmetatable = sandbox_rawset, select, sandbox_setmetatable
globals.tonumber, globals.tostring, globals.type, globals._VERSION = tonumber, safe_tostring, type, _VERSION
globals.load, globals.collectgarbage = function(...) return sandbox_load(nil, ...) end, sandbox_collectgarbage

-- `warn`, as the stand-alone `lua` has it: off until a script sends "@on" ("@off" turns it off again); while on,
-- each warning goes to the output as a line "Lua warning: …" (the host's print handler; `lua` writes to stderr).
local warnings_on = false
function globals.warn(...)
  local count = select("#", ...)
  if count == 0 then error("bad argument #1 to 'warn' (string expected, got no value)", 2) end
  local parts = {}
  for index = 1, count do
    local part = select(index, ...)
    if type(part) ~= "string" and type(part) ~= "number" then
      error("bad argument #" .. index .. " to 'warn' (string expected, got " .. type(part) .. ")", 2)
    end
    parts[index] = tostring(part)
  end
  local message = concat(parts)
  if count == 1 and message:sub(1, 1) == "@" then
    if message == "@on" then warnings_on = true elseif message == "@off" then warnings_on = false end
    return
  end
  if warnings_on then host_print("Lua warning: " .. message) end
end

-- `loadfile` and `dofile` read text files of the app's folder only (paths relative to it); in a namespace with a
-- folder of its own (`root`, a plugin's), that folder's. What they load runs with the globals `g` (the
-- namespace's) unless given others.
function make_file_loaders(root, g)
  local function sandbox_loadfile(path, mode, env)
    if type(path) ~= "string" then error("loadfile: scripts load files of the app's folder, by path", 2) end
    if mode ~= nil and mode ~= "t" then error("loadfile: scripts can load text chunks only (mode \"t\")", 2) end
    local source, chunkname = host_readfile(path, "loadfile", root)
    if source == nil then return nil, chunkname end
    if g ~= nil then chunk_namespaces[chunkname] = g end
    return real_load(source, chunkname, "t", env or g or private_environment())
  end

  local function sandbox_dofile(path)
    if type(path) ~= "string" then error("dofile: scripts run files of the app's folder, by path", 2) end
    local chunk, problem = sandbox_loadfile(path)
    if chunk == nil then error(problem, 0) end -- (as Lua's dofile raises it: the message alone)
    return chunk()
  end
  return { sandbox_loadfile, sandbox_dofile }
end
globals.loadfile, globals.dofile = table.unpack(make_file_loaders(nil))
globals.sortedpairs = sortedpairs
-- The library tables scripts see: where the host gives the system (`luakit`, `luastore test`), Lua's own, as
-- writable as in Lua (a spec stubs `os.time`, a library adds `string.split` or a polyfill); in a store read-only,
-- and open to additions each namespace keeps to itself ("Libraries in a store", below).
local function library(name, t)
  if host.system then return t end
  return freeze(name, t)
end
globals.string, globals.table = library("string", string), library("table", table)
globals.math, globals.utf8 = library("math", math), library("utf8", utf8)
globals.coroutine = library("coroutine", sandbox_coroutine)
-- `debug.getmetatable` returns, past `__metatable`, only a metatable a script set (with `setmetatable`); the
-- host's (the libraries', the string metatable, environments, a store's state) stay as `getmetatable` shows them.
local function sandbox_debug_getmetatable(value)
  local metatable = raw_getmetatable(value)
  if metatable ~= nil and script_metatables[metatable] then return metatable end
  if metatable == mode_guard then return nil end
  return globals.getmetatable(value)
end
-- `io`: writing to the output the host receives (`print`'s) and nothing else — no files, no input, no processes.
-- `io.write`, `io.stdout:write` and `io.stderr:write` write there (numbers as Lua's `io.write` writes them); every
-- other function says files are not available. Libraries that keep `io.stdout` at load then load.
local function no_files(name)
  return function() error("io." .. name .. ": not available in the sandbox (no files; io.write and print write to the output)", 2) end
end
local sandbox_io
-- (Called by the script, or in tail position: an error at level 2 is at the line of the script that wrote.)
local function write_values(file, ...)
  for index = 1, select("#", ...) do
    local value = select(index, ...)
    local kind = math.type(value)
    if kind == "integer" then
      value = string.format("%d", value)
    elseif kind == "float" then
      value = string.format("%.14g", value)
    elseif type(value) ~= "string" then
      error("bad argument #" .. index .. " to 'write' (string expected, got " .. typename(value) .. ")", 2)
    end
    host_write(value)
  end
  return file
end
local file_methods = {
  write = write_values,
  flush = function(file) return file end,
  setvbuf = function() return true end,
  close = no_files("close"), read = no_files("read"), lines = no_files("lines"), seek = no_files("seek"),
}
local file_metatable = {
  __index = file_methods, __name = "FILE*", __metatable = false,
  __newindex = function() error("cannot modify a file of the sandbox's io", 2) end,
}
local function new_file(name)
  local file = real_setmetatable({}, file_metatable)
  file_metatable[file] = name
  frozen[file] = file -- (read-only as it is; `freeze` leaves it whole)
  return file
end
local stdout, stderr = new_file("stdout"), new_file("stderr")
file_metatable.__tostring = function(file) return "file (" .. file_metatable[file] .. ")" end
sandbox_io = {
  write = function(...) return write_values(stdout, ...) end,
  stdout = stdout, stderr = stderr,
  type = function(value) return (value == stdout or value == stderr) and "file" or nil end,
  open = no_files("open"), popen = no_files("popen"), read = no_files("read"), lines = no_files("lines"),
  input = no_files("input"), output = no_files("output"), close = no_files("close"), tmpfile = no_files("tmpfile"),
}

-- Reading files where the host gives the system (`luakit`, `luastore test`): `files.lua`, loaded only there (a store's
-- VM holds none of it).
if host.files then host.files(host.readdata, sandbox_io, no_files, typename, raw_getmetatable) end
globals.io = library("io", sandbox_io)

globals.debug = library("debug", { traceback = real_traceback, getmetatable = sandbox_debug_getmetatable })

-- `os` where the host gives the system (`luakit`, `luastore test`: `LuaLimits.system`): Lua's clock, dates and
-- environment; what would end or change the process, or touch files, raises naming the function. A scripted
-- store has none: what a replay would read differently.
local real_os = os
if host.system then
  local function refused(name)
    return function()
      error("os." .. name .. " is not available in the sandbox (a script may not end or change the process, nor touch files)", 2)
    end
  end
  globals.os = library("os", {
    time = real_os.time, clock = real_os.clock, date = real_os.date, difftime = real_os.difftime, getenv = real_os.getenv,
    exit = refused("exit"), execute = refused("execute"), remove = refused("remove"), rename = refused("rename"),
    tmpname = refused("tmpname"), setlocale = refused("setlocale"),
  })
  unavailable.os = nil
end
for _, name in ipairs({ "string", "table", "math", "utf8", "coroutine", "debug", "io", "os" }) do builtins[name] = globals[name] end

-- Libraries in a store --------------------------------------------------------------------------------
-- `string`, `table`, `math`, `utf8` and `coroutine` (and `os`, where there is one) are one read-only table each,
-- shared by every namespace: a standard function is read from Lua's library in one table hop, as before any
-- script ran. A script may add a function (`function string.split(…)`) as a module loads: the addition is its
-- namespace's — the app's, or a plugin's: the first function up the stack that has an `_ENV` says whose code it is
-- (functions that name no global have none; the prelude's have no names) — and only that namespace's code finds
-- it, method syntax on strings included (`("a,b"):split(",")`): a read the library lacks asks for it, so only then
-- is anything called. Assigning a standard field the value it has is a no-op (a polyfill: `table.unpack =
-- table.unpack or unpack`); replacing or removing a standard function is refused, naming it: the host and every
-- other namespace rely on it. The host's own code (an `_ENV` that is no namespace's) finds no addition.
open_libraries = {}                                                -- library table scripts see -> its name
local additions_of = real_setmetatable({}, { __mode = "k" })       -- a namespace's globals -> name -> its additions

-- The globals of the namespace whose code runs at `level` (as `error` counts it from the caller), or nil: the first
-- function from there up the stack whose `_ENV` is a namespace's globals, or, for a function that names no global
-- (it has no `_ENV`), the namespace that loaded its chunk. The host's own functions (an `_ENV` that is no
-- namespace's, or none and a chunk no namespace loaded) are passed over.
local function caller_namespace(level)
  for at = level + 1, level + 16 do
    local info = real_getinfo(at, "fS")
    if info == nil then return nil end
    local named = false
    for index = 1, 255 do
      local name, env = real_getupvalue(info.func, index)
      if name == nil then break end
      if name == "_ENV" then
        if global_sets[env] ~= nil then return env end
        named = true
        break
      end
    end
    if not named then
      local g = chunk_namespaces[info.source]
      if g ~= nil then return g end
    end
  end
  return nil
end

-- What the namespace whose code runs at `level` added to library `name`, or nil.
function caller_own(name, level)
  local g = caller_namespace(level + 1)
  local all = g ~= nil and additions_of[g] or nil
  return all ~= nil and all[name] or nil
end

-- `next` over a library and a namespace's additions to it (`own`, or nil): the additions first.
function library_next(source, own, key)
  if own ~= nil and (key == nil or rawget(own, key) ~= nil) then
    local name, value = next(own, key)
    if name ~= nil then return name, value end
    return next(source, nil)
  end
  return next(source, key)
end

-- `library.key = value` (or `rawset`) on library `name` (Lua's table: `source`), `level` below the script's line.
function add_to_library(name, source, key, value, level)
  if key == nil then error("index is nil", level + 1) end
  if key ~= key then error("index is NaN", level + 1) end
  local standard = rawget(source, key)
  if standard ~= nil then
    if rawequal(standard, value) then return end
    error("cannot " .. (value == nil and "remove " or "replace ") .. name .. "." .. safe_tostring(key)
      .. ": Lua's standard functions stay as they are in a store (every plugin and the host rely on them); "
      .. "add a function of another name", level + 1)
  end
  local g = caller_namespace(level + 1)
  if g == nil then
    error("cannot modify read-only table '" .. name .. "' (field '" .. safe_tostring(key) .. "')", level + 1)
  end
  if globals_locked and not module_loading() then
    error("cannot set " .. name .. "." .. safe_tostring(key) .. " while the store runs: it is state outside the journal, "
      .. "which replay and time travel cannot restore (add it as a module loads)", level + 1)
  end
  local all = additions_of[g]
  if all == nil then
    all = {}
    additions_of[g] = all
  end
  local own = all[name]
  if own == nil then
    own = {}
    all[name] = own
  end
  real_rawset(own, key, value)
end

if not host.system then
  for _, name in ipairs({ "string", "table", "math", "utf8", "coroutine", "os" }) do
    local proxy = globals[name]
    local source = frozen[proxy]
    if source ~= nil then
      open_libraries[proxy] = name
      local metatable = raw_getmetatable(proxy)
      metatable.__newindex = function(_, key, value) add_to_library(name, source, key, value, 2) end
      metatable.__pairs = function()
        local own, key = caller_own(name, 2), nil
        return function()
          local value
          key, value = library_next(source, own, key)
          return key, value
        end
      end
      -- (A read the library lacks: the asking namespace's addition. For `string` this is method syntax too.)
      real_setmetatable(source, { __index = function(_, key)
        local own = caller_own(name, 2)
        return own ~= nil and own[key] or nil
      end })
    end
  end
end

default_require = namespace() -- (after the libraries: its package.loaded holds them)

-- `getmetatable("")`: where the libraries are Lua's own, Lua's string metatable; in a store a read-only table whose
-- `__index` is the string library, as scripts expect of it.
if not host.system then
  string_metatable.__metatable = freeze("the string metatable", { __index = globals.string })
end

local function define(name, value)
  if type(value) == "table" and not frozen[value] then value = freeze(name, value) end
  globals[name] = value
  for g in next, global_sets do real_rawset(g, name, value) end -- (namespaces made before see it too)
end

local function definemodule(name, value)
  if type(value) == "table" and not frozen[value] then value = freeze(name, value) end
  builtins[name] = value
end

-- A host module given by its compiled chunk (LuaVM.define(module:source:)) runs at its first `require`, in a fresh
-- environment, as a module the host defined by value: a VM whose scripts never require it holds none of it.
-- (A module that fails as it runs stays deferred: the next `require` runs it again, as Lua's does.)
function load_deferred(name)
  local dump, chunkname = host_hostmodule(name)
  local chunk, problem = real_load(dump, chunkname, "b", private_environment())
  if chunk == nil then error(problem, 0) end
  definemodule(name, chunk())
  deferred[name] = nil
  return builtins[name]
end

local function definedeferred(name)
  deferred[name] = true
end

local function seal(marker)
  sealed[marker] = true
end

-- The real global table is what trusted host chunks see (LuaVM.loadTrusted): no file access there either.
_G.dofile, _G.loadfile, _G.print, _G.warn = nil, nil, sandbox_print, nil
_G.collectgarbage, _G.pcall, _G.xpcall = sandbox_collectgarbage, sandbox_pcall, sandbox_xpcall
_G.referencestrings = reference_strings

-- `environment(private)`: the default namespace's globals (what `LuaVM.load` chunks run with), or with `private`
-- a fresh strict environment of its own. `lock()`: from now on globals are set only as modules load.
local function environment(private)
  if private then return private_environment() end
  return globals_of[default_require]()
end

local function lock()
  globals_locked = true
end

return {
  environment = environment, define = define, definemodule = definemodule, definedeferred = definedeferred,
  require = default_require,
  namespace = namespace, reference_strings = reference_strings, seal = seal, lock = lock,
}
