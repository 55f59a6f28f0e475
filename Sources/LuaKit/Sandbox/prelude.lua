-- The trusted chunk that builds the sandbox from the real libraries, once per VM, before any script runs
-- (LuaVM.buildSandbox loads it; it is embedded into the binary at build time by the EmbedLua plugin).
--
-- It receives the host's primitives (`match`, `print`, `readmodule`, `pcall`, `xpcall`) and returns the
-- sandbox's interface: `environment(require)` makes a fresh strict environment for one chunk, `define` and
-- `definemodule` add host values, `require` loads app modules, `namespace()` makes a new `require` with a
-- module cache of its own, `seal(marker)` makes `rawset` refuse tables whose `__metatable` is `marker`, and
-- `reference_patterns` keeps Lua's own pattern functions for differential tests (never given to scripts).
-- Everything a script can reach is built here; the real library tables, the string metatable and the host
-- table itself stay out of reach.

local host = ...
local type, error, select, next, ipairs, pairs = type, error, select, next, ipairs, pairs
local rawget, rawequal, rawlen, tonumber, assert = rawget, rawequal, rawlen, tonumber, assert
local real_rawset, real_setmetatable, real_getmetatable = rawset, setmetatable, getmetatable
local real_tostring, real_load, real_collectgarbage = tostring, load, collectgarbage
local string, table, math, utf8 = string, table, math, utf8
local sub, byte = string.sub, string.byte
local real_find, real_match, real_format = string.find, string.match, string.format
local reference_patterns = { find = string.find, match = string.match, gmatch = string.gmatch, gsub = string.gsub }
local concat, sort, pack, unpack = table.concat, table.sort, table.pack, table.unpack
local tointeger, mtype = math.tointeger, math.type
local host_match, host_print, host_readmodule = host.match, host.print, host.readmodule
local sandbox_pcall, sandbox_xpcall = host.pcall, host.xpcall

local FIND, MATCH, PLAIN, SCAN = 1, 2, 3, 4

-- Argument checks, reporting at the script's call site ------------------------------------------------

local function argerror(position, name, message)
  error("bad argument #" .. position .. " to '" .. name .. "' (" .. message .. ")", 4)
end

local function checkstring(value, position, name)
  local kind = type(value)
  if kind == "string" then return value end
  if kind == "number" then return real_tostring(value) end
  argerror(position, name, "string expected, got " .. (value == nil and "no value" or kind))
end

local function checkinteger(value, position, name)
  local number = tonumber(value)
  if number == nil then argerror(position, name, "number expected, got " .. (value == nil and "no value" or type(value))) end
  local integer = tointeger(number)
  if integer == nil then argerror(position, name, "number has no integer representation") end
  return integer
end

local function relative(init, length)
  if init > 0 then return init end
  if init == 0 or init < -length then return 1 end
  return length + init + 1
end

-- Strings without addresses ----------------------------------------------------------------------------

local addressed = { table = true, ["function"] = true, userdata = true, thread = true }

local function safe_tostring(value)
  local text = real_tostring(value)
  if addressed[type(value)] then
    local name = real_match(text, "^([^:]*): 0x%x+$")
    if name then return name end
  end
  return text
end

local function safe_format(format, ...)
  if type(format) ~= "string" then return real_format(format, ...) end
  local arguments = pack(...)
  local index, argument = 1, 0
  while true do
    local at = real_find(format, "%", index, true)
    if at == nil then break end
    if byte(format, at + 1) == 37 then
      index = at + 2
    else
      argument = argument + 1
      local cursor = at + 1
      local code = byte(format, cursor)
      while code and not ((code >= 65 and code <= 90) or (code >= 97 and code <= 122)) do
        cursor = cursor + 1
        code = byte(format, cursor)
      end
      if code == 112 then
        error("bad argument #" .. (argument + 1) .. " to 'format' ('%p' is not available to scripts)", 2)
      end
      if code == 115 and argument <= arguments.n then
        local value = arguments[argument]
        if type(value) ~= "string" and type(value) ~= "number" then arguments[argument] = safe_tostring(value) end
      end
      index = cursor + 1
    end
  end
  return real_format(format, unpack(arguments, 1, arguments.n))
end

local function sandbox_print(...)
  local parts = {}
  for index = 1, select("#", ...) do parts[index] = safe_tostring((select(index, ...))) end
  host_print(concat(parts, "\t"))
end

-- Pattern matching with a step budget (the C matcher cannot be interrupted) ---------------------------

local function find(s, pattern, init, plain)
  s = checkstring(s, 1, "find")
  pattern = checkstring(pattern, 2, "find")
  local start = init == nil and 1 or relative(checkinteger(init, 3, "find"), #s)
  if start > #s + 1 then return nil end
  return host_match(s, pattern, start, plain and PLAIN or FIND)
end

local function match(s, pattern, init)
  s = checkstring(s, 1, "match")
  pattern = checkstring(pattern, 2, "match")
  local start = init == nil and 1 or relative(checkinteger(init, 3, "match"), #s)
  if start > #s + 1 then return nil end
  return host_match(s, pattern, start, MATCH)
end

local function checkcaptures(found, first)
  for index = first, found.n do
    if found[index] == false then error("unfinished capture", 3) end
  end
end

local function gmatch(s, pattern, init)
  s = checkstring(s, 1, "gmatch")
  pattern = checkstring(pattern, 2, "gmatch")
  local length = #s
  local position = init == nil and 1 or relative(checkinteger(init, 3, "gmatch"), length)
  if position > length + 1 then position = length + 1 end
  local last = -1
  return function()
    local found = pack(host_match(s, pattern, position, SCAN, last, false))
    if found[1] == nil then return nil end
    checkcaptures(found, 3)
    position, last = found[2] + 1, found[2]
    return unpack(found, 3, found.n)
  end
end

local function expand(replacement, s, first, last, ...)
  local captures = select("#", ...)
  local out, count, index, length = {}, 0, 1, #replacement
  while index <= length do
    local at = real_find(replacement, "%", index, true)
    if at == nil then
      count = count + 1
      out[count] = sub(replacement, index)
      break
    end
    if at > index then
      count = count + 1
      out[count] = sub(replacement, index, at - 1)
    end
    local code = byte(replacement, at + 1)
    count = count + 1
    if code == 37 then
      out[count] = "%"
    elseif code == 48 then
      out[count] = sub(s, first, last)
    elseif code and code >= 49 and code <= 57 then
      local capture = code - 48
      if capture > captures then error("invalid capture index %" .. capture .. " in replacement string", 3) end
      local value = (select(capture, ...))
      if value == false then error("unfinished capture", 3) end
      out[count] = mtype(value) and real_tostring(value) or value
    else
      error("invalid use of '%' in replacement string", 3)
    end
    index = at + 2
  end
  return concat(out)
end

local function gsub(s, pattern, replacement, limit)
  s = checkstring(s, 1, "gsub")
  pattern = checkstring(pattern, 2, "gsub")
  local kind = type(replacement)
  if kind == "number" then
    replacement, kind = real_tostring(replacement), "string"
  elseif kind ~= "string" and kind ~= "table" and kind ~= "function" then
    error("bad argument #3 to 'gsub' (string/function/table expected, got " .. (replacement == nil and "no value" or kind) .. ")", 2)
  end
  local length = #s
  limit = limit == nil and length + 1 or checkinteger(limit, 4, "gsub")
  local anchored = byte(pattern, 1) == 94
  if anchored then pattern = sub(pattern, 2) end
  local out, pieces, position, last, replaced = {}, 0, 1, -1, 0
  while replaced < limit do
    local found = pack(host_match(s, pattern, position, SCAN, last, anchored))
    local first, finish = found[1], found[2]
    if first == nil then break end
    if first > position then
      pieces = pieces + 1
      out[pieces] = sub(s, position, first - 1)
    end
    replaced = replaced + 1
    local value
    if kind == "string" then
      value = expand(replacement, s, first, finish, unpack(found, 3, found.n))
    elseif kind == "table" then
      if found[3] == false then error("unfinished capture", 2) end -- only the first capture is the key
      value = replacement[found[3]]
    else
      checkcaptures(found, 3)
      value = replacement(unpack(found, 3, found.n))
    end
    if value == nil or value == false then
      value = sub(s, first, finish)
    elseif type(value) == "number" then
      value = real_tostring(value)
    elseif type(value) ~= "string" then
      error("invalid replacement value (a " .. type(value) .. ")", 2)
    end
    pieces = pieces + 1
    out[pieces] = value
    position, last = finish + 1, finish
    if anchored then break end
  end
  if position <= length then
    pieces = pieces + 1
    out[pieces] = sub(s, position)
  end
  return concat(out), replaced
end

string.dump = nil
string.find, string.match, string.gmatch, string.gsub = find, match, gmatch, gsub
string.format = safe_format

-- Read-only library tables -----------------------------------------------------------------------------

local frozen = {}

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
  frozen[proxy] = true
  return proxy
end

local string_metatable = real_getmetatable("")
string_metatable.__index = string
string_metatable.__metatable = false

-- Guarded base functions -------------------------------------------------------------------------------

-- Markers (`__metatable` values) of host tables that may change only through their metamethods, such as a
-- store's state proxies: `rawset` on one would write past the host's bookkeeping (LuaVM.sealRawWrites).
local sealed = {}

local function sandbox_rawset(t, key, value)
  if frozen[t] then error("cannot modify a read-only table", 2) end
  local marker = real_getmetatable(t)
  if marker ~= nil and sealed[marker] then
    error("rawset: this table can be changed only by assignment (it is a " .. tostring(marker) .. ")", 2)
  end
  if key == "__gc" or key == "__mode" then error("rawset: '" .. key .. "' fields are not available to scripts", 2) end
  return real_rawset(t, key, value)
end

local function sandbox_setmetatable(t, metatable)
  if frozen[t] then error("cannot change the metatable of a read-only table", 2) end
  if type(metatable) == "table" then
    if rawget(metatable, "__gc") ~= nil then
      error("setmetatable: '__gc' metamethods (finalizers) are not available to scripts", 2)
    end
    if rawget(metatable, "__mode") ~= nil then
      error("setmetatable: weak tables ('__mode') are not available to scripts", 2)
    end
  end
  return real_setmetatable(t, metatable)
end

local function sandbox_collectgarbage(option)
  if option == "count" then return real_collectgarbage("count") end
  error("collectgarbage: only \"count\" is available to scripts", 2)
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

-- Environments, modules --------------------------------------------------------------------------------

local globals = {}

local environment_metatable = {
  __index = function(_, name)
    error("undeclared global '" .. safe_tostring(name) .. "'", 2)
  end,
  __newindex = function(_, name)
    error("assignment to undeclared global '" .. safe_tostring(name) .. "' (declare it with 'local')", 2)
  end,
  __metatable = false,
}

local default_require

local function environment(require_function)
  local env = {}
  for name, value in next, globals do env[name] = value end
  env._G = env
  env.require = require_function or default_require
  return real_setmetatable(env, environment_metatable)
end

local function sandbox_load(chunk, chunkname, mode, env)
  if type(chunk) ~= "string" then error("load: scripts can load source strings only", 2) end
  if mode ~= nil and mode ~= "t" then error("load: scripts can load text chunks only (mode \"t\")", 2) end
  if chunkname == nil then chunkname = "=(load)" end
  if env == nil then env = environment() end
  return real_load(chunk, chunkname, "t", env)
end

local builtins = {}

-- A module namespace: its own cache, so a new version of an app's modules can load beside the old one.
local function namespace()
  local loaded, loading = {}, {}
  local function require(name)
    if type(name) ~= "string" then
      error("bad argument #1 to 'require' (string expected, got " .. (name == nil and "no value" or type(name)) .. ")", 2)
    end
    local value = builtins[name]
    if value ~= nil then return value end
    value = loaded[name]
    if value ~= nil then return value end
    if loading[name] then error("require: module '" .. name .. "' requires itself (a cycle)", 2) end
    local source, chunkname = host_readmodule(name)
    local chunk, problem = real_load(source, chunkname, "t", environment(require))
    if chunk == nil then error(problem, 0) end
    loading[name] = true
    local ok, result = sandbox_pcall(chunk, name)
    loading[name] = nil
    if not ok then error(result, 0) end
    if result == nil then result = true end
    loaded[name] = result
    return result
  end
  return require
end

default_require = namespace()

globals.assert, globals.error, globals.getmetatable, globals.ipairs = assert, error, real_getmetatable, ipairs
globals.next, globals.pairs, globals.pcall, globals.xpcall = next, pairs, sandbox_pcall, sandbox_xpcall
globals.print, globals.rawequal, globals.rawget, globals.rawlen = sandbox_print, rawequal, rawget, rawlen
globals.rawset, globals.select, globals.setmetatable = sandbox_rawset, select, sandbox_setmetatable
globals.tonumber, globals.tostring, globals.type, globals._VERSION = tonumber, safe_tostring, type, _VERSION
globals.load, globals.collectgarbage = sandbox_load, sandbox_collectgarbage
globals.sortedpairs = sortedpairs
globals.string, globals.table = freeze("string", string), freeze("table", table)
globals.math, globals.utf8 = freeze("math", math), freeze("utf8", utf8)

local function define(name, value)
  if type(value) == "table" and not frozen[value] then value = freeze(name, value) end
  globals[name] = value
end

local function definemodule(name, value)
  if type(value) == "table" and not frozen[value] then value = freeze(name, value) end
  builtins[name] = value
end

local function seal(marker)
  sealed[marker] = true
end

-- The real global table is what trusted host chunks see (LuaVM.loadTrusted): no file access there either.
_G.dofile, _G.loadfile, _G.print, _G.warn = nil, nil, sandbox_print, nil
_G.collectgarbage, _G.pcall, _G.xpcall = sandbox_collectgarbage, sandbox_pcall, sandbox_xpcall

return {
  environment = environment, define = define, definemodule = definemodule, require = default_require,
  namespace = namespace, reference_patterns = reference_patterns, seal = seal,
}
