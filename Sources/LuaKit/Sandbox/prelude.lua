-- The trusted chunk that builds the sandbox from the real libraries, once per VM, before any script runs
-- (LuaVM.buildSandbox loads it; it is embedded into the binary at build time by the EmbedLua plugin).
--
-- Its guarded base functions and its environments and modules are chunks of their own (`base.lua`,
-- `namespaces.lua`), which it runs with what they share as their arguments (below).
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
-- (The prelude's `error` counts levels past the C functions scripts call its builtins through: builtins.c.)
local type, error, select, next, ipairs, pairs = type, host.error, select, next, ipairs, pairs
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
-- (And where Lua names functions for tracebacks and argument errors: the modules loaded, `_G` among them — the
-- default namespace's globals go there, `namespaces.lua`, so a script's global function is named as in Lua.)
host.registryloaded = debug.getregistry()._LOADED
-- (Scripts' `debug.getinfo`: Lua's, over the frames they are shown — builtins.c.)
host.getinfo = debug.scriptgetinfo
-- (And the default namespace's modules, `package.loaded`, where they find a module's functions: `mymod.f`.)
local registry = debug.getregistry()
host.setmodules = function(loaded) registry["luakit.modules"] = loaded end
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

-- `print`, in C as Lua's is (format.c): a `__tostring` runs from its frame, as from Lua's — what it raises, at
-- whatever level, and what it writes come where they would.
local sandbox_print = host.makeprint(safe_tostring, host_write, host_print)

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
local string_match = string.match
local function refuse(f, ...)
  local ok, message = real_pcall(f, ...)
  if not ok then
    -- (An argument refused in Lua's words, the builtin named as the script called it: `smt(1)` after
    -- `local smt = setmetatable` names 'smt', as Lua does.)
    local position, words = string_match(message, "^bad argument #(%d+) to '[^']*' %((.*)%)$")
    if position ~= nil then host.argerror(tonumber(position), words) end
    error(message, 3)
  end
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
  local named = host.globalnames
  if named ~= nil and named.globals == g then real_rawset(named.names, name, value) end
end

-- `next` and `rawget` read a read-only table as the table it shows, as Lua reads its libraries (`next(string)`,
-- `rawget(math, "pi")`); writing stays refused. A namespace's globals read as one table.
-- (The libraries a store's scripts may add to, and what each namespace added: below, with the libraries. Which
-- namespace loaded each chunk, by its name: how code that names no global is told apart.)
local open_libraries, caller_own, library_next, add_to_library
local chunk_namespaces = real_setmetatable({}, { __mode = "v" }) -- chunk name -> the namespace that last loaded it

local sealed_next, sealed -- (below)

-- (`next` is C, builtins.c: a table that is no host's is Lua's to walk; the host's — a library, a namespace's
-- globals, a table with a sealed metatable — are walked here.)
local function hosts_next(t, key)
  local source = frozen[t]
  if source ~= nil then
    local library = open_libraries[t]
    if library ~= nil then return library_next(source, caller_own(library, 2), key) end
    return next(source, key)
  end
  if global_sets[t] ~= nil then return globals_next(t, key) end
  if sealed[real_getmetatable(t)] then return sealed_next(t, key) end
  return next(t, key)
end

local function sandbox_rawget(...)
  local t, key = ...
  local source = frozen[t]
  if source ~= nil and type(t) == "table" then -- (a file is frozen too: refused below, as Lua refuses a userdata)
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

-- The guarded base functions (base.lua) and environments and modules (namespaces.lua): chunks of their own, run
-- here with what they share as their arguments, each returning what comes after uses (no table is made for it).
local mode_guard, sandbox_collectgarbage, sandbox_coroutine, sandbox_rawlen, sandbox_rawset, sandbox_setmetatable,
  script_metatables, sortedpairs, unguarded, base_sealed, base_sealed_next =
  host.base(add_to_library, frozen, global_sets, host_gcmode, host_makeclose, host_makewrap, host_resume,
    open_libraries, raw_getmetatable, real_collectgarbage, real_getmetatable, real_pcall, real_rawset,
    real_setmetatable, refuse, safe_tostring, set_global, sort, typename, weak_tables_honoured, error, host.builtin,
    host.argerror)
sealed, sealed_next = base_sealed, base_sealed_next
local sandbox_next = host.makenext(hosts_next, frozen, global_sets, sealed)
local builtins, default_require, deferred, globals, globals_of, namespace, private_environment, define, definemodule,
  definedeferred, set_default_require =
  host.namespaces(real_rawset, host_hostmodule, chunk_namespaces, concat, freeze, frozen, global_sets, globals_next,
    host, host_callerkind, host_path, host_print, host_readfile, host_readmodule, host_write, mode_guard,
    module_loaders, raw_getmetatable, real_getinfo, real_getlocal, real_load, real_pcall, real_setmetatable,
    real_traceback, refuse, safe_tostring, sandbox_collectgarbage, sandbox_coroutine, sandbox_next, sandbox_pcall,
    sandbox_print, sandbox_rawget, sandbox_rawlen, sandbox_rawset, sandbox_setmetatable, sandbox_xpcall,
    script_metatables, set_global, sortedpairs, typename, unguarded)
host.base, host.namespaces = nil, nil -- (run once: their chunks need not stay)

-- (The libraries a store's scripts may add to, their tables made now that the namespaces' globals are: see above.)
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
set_default_require(default_require)

-- `getmetatable("")`: where the libraries are Lua's own, Lua's string metatable; in a store a read-only table whose
-- `__index` is the string library, as scripts expect of it.
if not host.system then
  string_metatable.__metatable = freeze("the string metatable", { __index = globals.string })
end

local function seal(marker)
  sealed[marker] = true
end

-- The real global table is what trusted host chunks see (LuaVM.loadTrusted): no file access there either.
_G.dofile, _G.loadfile, _G.print, _G.warn = nil, nil, sandbox_print, nil
_G.collectgarbage, _G.pcall, _G.xpcall = sandbox_collectgarbage, sandbox_pcall, sandbox_xpcall
_G.referencestrings = reference_strings
-- (And the hidden metatable of metatables in use, which scripts are never shown: a store names a table that has
-- it as what it is, another table's metatable.)
_G.modeguard = mode_guard

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
