-- Environments and modules (part of the prelude, which runs this chunk with what it shares, in order, as
-- its arguments): strict and
-- plain globals, one table per namespace; `load`, `require`, `package`, `dofile` and `loadfile` over the app's
-- folder; the standard libraries as scripts see them; and what the host defines. Returns what the rest of the
-- prelude uses; the default namespace is made there, after the libraries (`set_default_require`).
local real_rawset, host_hostmodule, chunk_namespaces, concat, freeze, frozen, global_sets, globals_next, host,
  host_callerkind, host_path, host_print, host_readfile, host_readmodule, host_write, mode_guard, module_loaders,
  raw_getmetatable, real_getinfo, real_getlocal, real_load, real_pcall, real_setmetatable, real_traceback, refuse,
  safe_tostring, sandbox_collectgarbage, sandbox_coroutine, sandbox_next, sandbox_pcall, sandbox_print,
  sandbox_rawget, sandbox_rawlen, sandbox_rawset, sandbox_setmetatable, sandbox_xpcall, script_metatables, set_global,
  sortedpairs, typename, unguarded = ...
-- (Scripts get Lua's `error`; this chunk's own counts levels past the C functions its builtins are reached through,
-- `builtin(f)`: builtins.c.)
local real_error, error, builtin, argerror, callnoyield = error, host.error, host.builtin, host.argerror, host.callnoyield
-- (The libraries' functions as they were: a script may replace `string.find` or `table.unpack`, under `luakit` as in
-- Lua, and what it changes must not change the sandbox's own.)
local string_byte, string_find, string_format, string_gmatch, string_sub =
  string.byte, string.find, string.format, string.gmatch, string.sub
local math_tointeger, math_type, table_unpack = math.tointeger, math.type, table.unpack

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
local script_require = real_setmetatable({}, { __mode = "k" }) -- a namespace's `require` -> the builtin scripts call
local globals_of = real_setmetatable({}, { __mode = "k" }) -- a namespace's `require` -> what makes and gives its globals

-- A fresh strict environment of its own, for a module the host defined (never shared with scripts).
local function private_environment()
  local env = {}
  for name, value in next, globals do env[name] = value end
  env._G = env
  env.require = script_require[default_require]
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
  g.require = script_require[require_function]
  g.package = packages[require_function]
  global_sets[g] = set
  -- (Lua names a function in a traceback or an argument error after where it is found among the modules loaded,
  -- `_G.name` as `name`: there, the default namespace's globals, as one table — `set_global` keeps it up to date —
  -- and, as modules of their own, the real base functions the sandbox's call, which name themselves in what they
  -- raise: `bad argument #1 to 'setmetatable'`.)
  if require_function == default_require then
    local loaded, names = host.registryloaded, {}
    for name, value in next, loaded._G do
      if type(value) == "function" and rawget(g, name) ~= value and loaded[name] == nil then loaded[name] = value end
    end
    for name, value in next, g do names[name] = value end
    loaded._G = names
    host.globalnames = { globals = g, names = names }
    host.setmodules(g.package.loaded)
  end
  if strict then real_setmetatable(set, strict_reads) end
  return real_setmetatable(g, {
    __index = set,
    __newindex = function(t, name, value)
      if name == nil or name ~= name then error(name == nil and "table index is nil" or "table index is NaN", 2) end
      if strict and rawget(set, name) == nil then -- (a new one)
        local caller = host_callerkind(2)
        if caller ~= "main" and caller ~= "C" then
          error("assignment to undeclared global '" .. safe_tostring(name) .. "' (declare it with 'local')", 2)
        end
      end
      set_global(t, name, value, 2)
    end,
    __pairs = function(t) return globals_next, t, nil end,
    -- (`#_G` sees the globals a script assigned too: a border of both tables, as one table would have it)
    __len = function(t)
      local n = rawlen(t)
      while rawget(t, n + 1) ~= nil or rawget(set, n + 1) ~= nil do n = n + 1 end
      return n
    end,
    __metatable = false,
  })
end

-- Lua's parser runs in C, where no hook fires: a long chunk parsed in one call outlived any budget (16 MB of source,
-- 0.3 s). It is handed over a piece at a time instead, so the budget's hook can stop a parse between two pieces —
-- the same bytes, the same chunk.
local PIECE_BYTES, string_sub = 16384, string.sub -- (the library's own: a spec may stub `string.sub`)
local check_budget = host.checkbudget -- (the clock looked at between two pieces, whatever enforces the budget)
local function parse(chunk, chunkname, env)
  if #chunk <= PIECE_BYTES then return real_load(chunk, chunkname, "t", env) end
  local at = 1
  return real_load(function()
    check_budget()
    local piece = string_sub(chunk, at, at + PIECE_BYTES - 1)
    at = at + PIECE_BYTES
    return piece
  end, chunkname, "t", env)
end

-- `load` as Lua's: a string or a reader function (its pieces until nil or ""), a chunk name (the string itself by
-- default), a mode ("bt" by default: a text chunk where it has no "t" is refused as Lua refuses it), an
-- environment (a fresh sandbox environment unless one is given — `nil` too, as in Lua). A binary chunk is refused
-- whatever the mode: scripts load source text only.
-- Why a chunk whose first piece is `first` (nil: an empty chunk) does not load under `mode`, in Lua's words; nil
-- when it loads.
local function chunk_refusal(first, mode)
  if first ~= nil and string_byte(tostring(first), 1) == 27 then
    if not string_find(mode, "b", 1, true) then return "attempt to load a binary chunk (mode is '" .. mode .. "')" end
    return "attempt to load a binary chunk (scripts load source text only)"
  end
  if not string_find(mode, "t", 1, true) then return "attempt to load a text chunk (mode is '" .. mode .. "')" end
  return nil
end

local function sandbox_load(default_env, ...)
  local chunk, chunkname, mode, env = ...
  local kind = type(chunk)
  if kind == "number" then chunk, kind = tostring(chunk), "string" end -- (as Lua takes a number for a string)
  if kind ~= "string" and kind ~= "function" then refuse(real_load, ...) end
  local nameKind, modeKind = type(chunkname), type(mode)
  if (chunkname ~= nil and nameKind ~= "string" and nameKind ~= "number")
      or (mode ~= nil and modeKind ~= "string" and modeKind ~= "number") then
    refuse(real_load, ...)
  end
  mode = mode == nil and "bt" or tostring(mode)
  if select("#", ...) < 4 then env = default_env or private_environment() end
  if kind == "function" then
    -- The reader's pieces go to the parser as they come, as in Lua: it stops reading at a syntax error, and the
    -- reader's own error is what `load` answers.
    local reader, started = chunk, false
    local misuse = select(2, real_pcall(error, "reader function must return a string", 3)) -- (at the line that called `load`)
    return real_load(function()
      local piece = reader()
      if piece ~= nil and type(piece) ~= "string" and type(piece) ~= "number" then error(misuse, 0) end
      if not started then
        started = true
        local refusal = chunk_refusal(piece ~= "" and piece or nil, mode)
        if refusal ~= nil then error(refusal, 0) end
      end
      return piece
    end, chunkname == nil and "=(load)" or chunkname, "t", env)
  end
  if chunkname == nil then chunkname = chunk end
  local refusal = chunk_refusal(chunk ~= "" and chunk or nil, mode)
  if refusal ~= nil then return nil, refusal end
  return parse(chunk, chunkname, env)
end

local replace_plain -- (below)
local builtins = {}     -- modules `require` returns by name: the standard libraries, and what the host defines
local deferred = {}     -- host modules defined by their chunk, not run yet (`load_deferred`, below)
local load_deferred

-- Standard libraries the sandbox leaves out: `require` says so, rather than looking for a file of that name.
local unavailable = {
  os = "no clocks, processes or environment",
}

-- `package.searchpath(name, path [, sep [, rep]])` as Lua's: the first file of `path`'s templates (`?` replaced by
-- `name`, its `sep`s by `rep`s) that can be read — a file of the app's folder (`root`, a plugin's), or, where the
-- host gives the system (`luakit`), of the project's folder or the module path — else nil and each file tried.
local host_readdata = host.readdata
local function search_path(root, ...)
  local name, path, sep, rep = ...
  for index = 2, 1, -1 do -- (the path first, as Lua 5.4.4's is built)
    local value = select(index, ...)
    if type(value) ~= "string" and type(value) ~= "number" then
      argerror(index, "string expected, got " .. (select("#", ...) < index and "no value" or typename(value)))
    end
  end
  for index = 3, 4 do -- (`sep` and `rep`: optional strings)
    local value = select(index, ...)
    if value ~= nil and type(value) ~= "string" and type(value) ~= "number" then
      argerror(index, "string expected, got " .. typename(value))
    end
  end
  name, path, sep, rep = tostring(name), tostring(path), sep == nil and "." or tostring(sep), rep == nil and "/" or tostring(rep)
  if sep ~= "" then name = replace_plain(name, sep, rep) end
  local tried = {}
  for template in string_gmatch(path, "[^;]*") do -- (an empty template is tried too, as Lua's)
    local file = replace_plain(template, "?", name)
    local found
    if host_readdata ~= nil then found = host_readdata(file) ~= nil else found = host_readfile(file, "searchpath", root) ~= nil end
    if found then return file end
    tried[#tried + 1] = "no file '" .. file .. "'"
  end
  return nil, concat(tried, "\n\t")
end

-- `text` with every `plain` (found as it is, not as a pattern) replaced by `by`.
function replace_plain(text, plain, by)
  local parts, at = {}, 1
  while true do
    local from, to = string_find(text, plain, at, true)
    if from == nil then break end
    parts[#parts + 1] = string_sub(text, at, from - 1)
    at = to + 1
  end
  parts[#parts + 1] = string_sub(text, at)
  return concat(parts, by)
end

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

-- The name `require` or a searcher was given as its first argument: a string (a number made one, as Lua takes it).
local function module_name(...)
  local name = ...
  if type(name) == "number" then return tostring(name) end
  if type(name) ~= "string" then
    argerror(1, "string expected, got " .. (select("#", ...) == 0 and "no value" or typename(name)))
  end
  return name
end

local function namespace(root, strict)
  local loading = {}
  local g -- (its globals, made when its first chunk loads: `own_globals()`)
  local require
  -- (`cpath` is empty: no C module loads, so none is looked for.)
  local package = { loaded = {}, preload = {}, path = host_path, cpath = "", config = "/\n;\n?\n!\n-\n" }
  for name, value in next, builtins do package.loaded[name] = value end
  package.loaded.package = package
  package.searchpath = builtin(function(...) return search_path(root, ...) end)
  local function own_globals()
    if g == nil then
      g = new_globals(require, strict)
      g.loadfile, g.dofile = table_unpack(make_file_loaders(root, g))
      g.load = builtin(function(...) return sandbox_load(g, ...) end)
      if rawget(package.loaded, "_G") == nil then package.loaded._G = g end -- (as Lua's: `require("_G")` is `_G`)
      local named = host.globalnames -- (where tracebacks find names: `set_global`)
      if named ~= nil and named.globals == g then
        for _, name in ipairs({ "loadfile", "dofile", "load" }) do real_rawset(named.names, name, g[name]) end
      end
    end
    return g
  end
  function require(...)
    local name = module_name(...) -- (its first local: `requiring` reads it)
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
    -- (The searchers in order, as Lua's `require` calls them: the first that gives a function gives the loader;
    -- what the others say — a string each — is the message when none does.)
    local searchers = package.searchers
    if type(searchers) ~= "table" then error("'package.searchers' must be a table", 2) end
    local chunk, extra
    local messages, index = {}, 1
    while true do
      local searcher = rawget(searchers, index)
      if searcher == nil then error("module '" .. name .. "' not found:" .. concat(messages), 2) end
      if type(searcher) ~= "function" and (type(raw_getmetatable(searcher)) ~= "table" or raw_getmetatable(searcher).__call == nil) then
        error("attempt to call a " .. typename(searcher) .. " value", 0) -- (as Lua's C calls it: no line of ours)
      end
      local loader, data = searcher(name)
      if type(loader) == "function" then
        chunk, extra = loader, data
        break
      elseif type(loader) == "string" or type(loader) == "number" then
        messages[#messages + 1] = "\n\t" .. loader
      end
      index = index + 1
    end
    -- (Called, not protected, as Lua's `require` calls a loader — from C: a yield in the module is refused —: what
    -- it raises goes on with the module's frames on the stack, for a traceback. A failure leaves `loading[name]`
    -- set; `requiring` tells that from a cycle.)
    loading[name] = true
    local result = callnoyield(chunk, name, extra)
    loading[name] = nil
    loaded = package.loaded
    if result ~= nil then
      loaded[name] = result
    elseif rawget(loaded, name) == nil then
      loaded[name] = true
    end
    return loaded[name], extra
  end
  -- `package.searchers`, as Lua's but for its C half (no C module loads): the preload searcher, then the Lua
  -- searcher — the files `package.path`'s templates name, within what the sandbox reads. A script may add its own
  -- (a compiler's, say: Fennel's) or change them; `require` reads the list at each call.
  local function search_preload(...)
    local name = module_name(...)
    local preload = package.preload
    local loader = type(preload) == "table" and rawget(preload, name) or nil
    if loader == nil then return "no field package.preload['" .. name .. "']" end
    return loader, ":preload:"
  end
  local function search_lua(...)
    local name = module_name(...)
    -- (By the templates of `package.path` once a script changed it — `"./libs/?.lua;" .. package.path` —, as
    -- Lua's searcher reads it at each `require`.)
    local path = package.path
    if type(path) == "number" then path = tostring(path) end
    if type(path) ~= "string" then error("'package.path' must be a string", 0) end
    local source, chunkname, found = host_readmodule(name, root, path ~= host_path and path or nil)
    -- (Found nowhere: the files tried, as Lua's searcher lists them.)
    if source == nil then return string_sub(chunkname, 3) end
    local chunk, problem = real_load(source, chunkname, "t", g or own_globals())
    chunk_namespaces[chunkname] = g
    -- (Where Lua's searcher found it: the file its template made — package.path's "./?.lua", or the module path's.)
    if chunk == nil then error("error loading module '" .. name .. "' from file '" .. found .. "':\n\t" .. problem, 0) end
    return chunk, found
  end
  package.searchers = { host.searcher(search_preload), host.searcher(search_lua) }
  packages[require] = package
  script_require[require] = builtin(require)
  globals_of[require] = own_globals
  module_loaders[require] = true
  return require
end

globals.assert, globals.error, globals.ipairs = assert, host.scripterror, ipairs
globals.getmetatable = builtin(unguarded)
globals.next, globals.pairs, globals.pcall, globals.xpcall = sandbox_next, host.makepairs(sandbox_next), sandbox_pcall, sandbox_xpcall
globals.print, globals.rawequal, globals.rawget, globals.rawlen = sandbox_print, rawequal, builtin(sandbox_rawget), builtin(sandbox_rawlen)
globals.rawset, globals.select, globals.setmetatable = builtin(sandbox_rawset), select, builtin(sandbox_setmetatable)
globals.tonumber, globals.tostring, globals.type, globals._VERSION = tonumber, safe_tostring, type, _VERSION
globals.load = builtin(function(...) return sandbox_load(nil, ...) end)
globals.collectgarbage = builtin(sandbox_collectgarbage)

-- Where the standard error goes (`io.stderr`, `warn`): the host's own (`writeerror`: `luakit` and `luastore test`
-- write it to the process's standard error, as `lua` does), else the output `print` writes to.
local host_writeerror = host.writeerror
-- `warn`, as the stand-alone `lua` has it: off until a script sends "@on" ("@off" turns it off again); while on,
-- each warning goes out as a line "Lua warning: …".
local warnings_on = false
local function sandbox_warn(...)
  local count = select("#", ...)
  if count == 0 then argerror(1, "string expected, got no value") end
  local parts = {}
  for index = 1, count do
    local part = select(index, ...)
    if type(part) ~= "string" and type(part) ~= "number" then
      argerror(index, "string expected, got " .. typename(part))
    end
    parts[index] = tostring(part)
  end
  local message = concat(parts)
  if count == 1 and string_sub(message, 1, 1) == "@" then
    if message == "@on" then warnings_on = true elseif message == "@off" then warnings_on = false end
    return
  end
  if not warnings_on then return end
  if host_writeerror then host_writeerror("Lua warning: " .. message .. "\n") else host_print("Lua warning: " .. message) end
end
globals.warn = builtin(sandbox_warn)

-- `loadfile` and `dofile` read text files of the app's folder only (paths relative to it); in a namespace with a
-- folder of its own (`root`, a plugin's), that folder's. What they load runs with the globals `g` (the
-- namespace's) unless given others.
local function pass_on(...) return ... end
function make_file_loaders(root, g)
  local function sandbox_loadfile(...)
    local path, mode, env = ...
    if type(path) == "number" then path = tostring(path) end -- (as Lua takes a number for a file name)
    if path == nil then error("loadfile: scripts load files of the app's folder, by path (the standard input is not read)", 2) end
    if type(path) ~= "string" then argerror(1, "string expected, got " .. typename(path)) end
    if type(mode) == "number" then mode = tostring(mode) end -- (as Lua's `luaL_optstring` takes a number)
    if mode ~= nil and type(mode) ~= "string" then
      argerror(2, "string expected, got " .. typename(mode))
    end
    local source, chunkname = host_readfile(path, "loadfile", root)
    if source == nil then return nil, chunkname end
    -- (The mode as Lua reads it, "bt" by default: a text file where it has no "t" is refused, a binary one always.)
    local refusal = chunk_refusal(source ~= "" and source or nil, mode or "bt")
    if refusal ~= nil then return nil, refusal end
    if g ~= nil then chunk_namespaces[chunkname] = g end
    return parse(source, chunkname, select("#", ...) >= 3 and env or g or private_environment())
  end

  local function sandbox_dofile(path)
    if type(path) == "number" then path = tostring(path) end -- (as Lua takes a number for a file name)
    if path == nil then error("dofile: scripts run files of the app's folder, by path (the standard input is not read)", 2) end
    if type(path) ~= "string" then argerror(1, "string expected, got " .. typename(path)) end
    local chunk, problem = sandbox_loadfile(path)
    if chunk == nil then error(problem, 0) end -- (as Lua's dofile raises it: the message alone)
    return pass_on(chunk()) -- (not a tail call: a traceback shows the chunk called by `dofile`, as Lua's)
  end
  return { builtin(sandbox_loadfile), builtin(sandbox_dofile) }
end
globals.loadfile, globals.dofile = table_unpack(make_file_loaders(nil))
globals.sortedpairs = builtin(sortedpairs)
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
local function sandbox_debug_getmetatable(...)
  if select("#", ...) == 0 then argerror(1, "value expected") end
  local value = ...
  local metatable = raw_getmetatable(value)
  if metatable ~= nil and script_metatables[metatable] then return metatable end
  if rawequal(metatable, mode_guard) then return nil end
  return globals.getmetatable(value)
end
-- `io`: writing to the output the host receives (`print`'s) and nothing else — no files, no input, no processes.
-- `io.write`, `io.stdout:write` and `io.stderr:write` write there (numbers as Lua's `io.write` writes them); every
-- other function says files are not available. Libraries that keep `io.stdout` at load then load.
local function no_files_message(name)
  return "io." .. name .. ": not available in the sandbox (no files; io.write and print write to the output)"
end
local function no_files(name)
  return function() error(no_files_message(name), 2) end
end
local sandbox_io
local stdin, stderr, stdout -- (below: a file that reads nothing and takes no writes; the standard error and output)
-- (Where the host gives its standard input, `io.stdin` is a file that reads it, files.lua's: standard too.)
local function is_standard(value) return value == stdout or value == stderr or value == stdin or value == sandbox_io.stdin end
-- A standard file's method called on something else: Lua's refusal.
local function check_standard(file)
  if not is_standard(file) then argerror(1, "FILE* expected, got " .. (file == nil and "no value" or typename(file))) end
end
-- Lua's `luaL_checkoption`: the option at argument `position` — a string (a number stands for its text), `default`
-- when it is nil and there is one — if it is one of `...`; refused in Lua's words otherwise (no text of a value
-- that is not a string: a table's would be its address).
local function check_option(position, value, default, ...)
  if value == nil and default ~= nil then return default end
  if type(value) == "number" then value = tostring(value) end
  if type(value) ~= "string" then argerror(position, "string expected, got " .. typename(value)) end
  for index = 1, select("#", ...) do
    if value == select(index, ...) then return value end
  end
  argerror(position, "invalid option '" .. value .. "'")
end
-- `read` on the standard output or error, as Lua answers for a file open only to write: the first format is checked
-- (Lua reads format by format and stops at the first that reads nothing — the first, here), then the system's
-- refusal. (`lines` gives an iterator that raises it.)
local function refuse_format(position, format)
  if type(format) == "number" then
    if math_tointeger(format) == nil then argerror(position, "number has no integer representation") end
    return
  end
  if type(format) ~= "string" then argerror(position, "string expected, got " .. typename(format)) end
  local kind = string_sub(format, 1, 1) == "*" and string_sub(format, 2, 2) or string_sub(format, 1, 1)
  if kind ~= "n" and kind ~= "l" and kind ~= "L" and kind ~= "a" then argerror(position, "invalid format") end
end
-- Writes to `file`; the values are the builtin's arguments from `first` on (2 for a file's method, 1 for `io.write`).
local function write_values(file, first, ...)
  if file == stdin or file == sandbox_io.stdin then return nil, "Bad file descriptor", 9 end -- (as Lua's `io.stdin:write` answers)
  local write = (file == stderr and host_writeerror) or host_write
  for index = 1, select("#", ...) do
    local value = select(index, ...)
    local kind = math_type(value)
    if kind == "integer" then
      value = string_format("%d", value)
    elseif kind == "float" then
      value = string_format("%.14g", value)
    elseif type(value) ~= "string" then
      argerror(first + index - 1, "string expected, got " .. typename(value))
    end
    write(value)
  end
  return file
end
-- (Where the host has a standard output of its own, `luakit`'s, it buffers as C's `stdout` does: `flush` writes it
-- out, `setvbuf` says how; LuaVM.standardOutput.)
local host_flush, host_setvbuf = host.flush, host.setvbuf
local file_methods = {
  write = function(file, ...)
    check_standard(file)
    return write_values(file, 2, ...)
  end,
  flush = function(file)
    check_standard(file)
    if file == stdout and host_flush then host_flush() end
    return true
  end,
  setvbuf = function(file, ...)
    check_standard(file)
    if select("#", ...) == 0 then argerror(2, "string expected, got no value") end
    local mode = check_option(2, (...), nil, "no", "full", "line")
    if file == stdout and host_setvbuf then host_setvbuf(mode) end
    return true
  end,
  close = function(file) -- (the standard files stay open, as Lua's)
    check_standard(file)
    if file == stdout or file == stderr or file == stdin then return nil, "cannot close standard file" end
    return no_files("close")()
  end,
  read = function(file, ...)
    check_standard(file)
    if file == stdin then return no_files("read")() end
    if select("#", ...) > 0 then refuse_format(2, (...)) end
    return nil, "Bad file descriptor", 9
  end,
  lines = function(file)
    check_standard(file)
    if file == stdin then return no_files("lines")() end
    return builtin(function() error("Bad file descriptor", 2) end) -- (at the line that asked for the next, as Lua's)
  end,
  -- (The host's streams, as a pipe's or a terminal's: no position.)
  seek = function(file, whence, offset)
    check_standard(file)
    check_option(2, whence, "cur", "set", "cur", "end")
    if offset ~= nil and math_tointeger(offset) == nil then
      argerror(3, type(offset) == "number" and "number has no integer representation" or "number expected, got " .. typename(offset))
    end
    return nil, "Illegal seek", 29
  end,
}
-- (A file is a userdata, as Lua's: assigning a field of one raises Lua's own "attempt to index a FILE* value".)
local file_metatable = { __index = file_methods, __name = "FILE*" }
local function new_file(name)
  local file = host.newhandle(file_metatable) -- (a userdata, as Lua's files are)
  file_metatable[file] = name
  frozen[file] = file -- (read-only as it is; `freeze` leaves it whole)
  return file
end
stdout = new_file("stdout")
stderr = new_file("stderr")
stdin = new_file("stdin")
local file_metatable_view -- (below)
file_metatable.__tostring = function(...)
  local file = ...
  if is_standard(file) then return "file (" .. file_metatable[file] .. ")" end
  -- A file `io.open` opened (files.lua) has a metatable of its own, shown as this one.
  local own = type(file) == "userdata" and raw_getmetatable(file) or nil
  if own ~= nil and rawget(own, "__metatable") == file_metatable_view then return rawget(own, "__tostring")(file) end
  -- Anything else (the metatable's `__tostring` may be called with anything): Lua's refusal.
  argerror(1, "FILE* expected, got " .. (select("#", ...) == 0 and "no value" or typename(file)))
end
-- What `getmetatable` shows of every file, as Lua's (`__name`, `__index` its methods, `__tostring`), read-only: the
-- metatable itself keeps the sandbox's bookkeeping.
file_metatable_view = freeze("FILE*", {
  __index = file_methods, __name = "FILE*", __tostring = builtin(file_metatable.__tostring),
})
file_metatable.__metatable = file_metatable_view
-- The default output (`io.output`): the standard output or error — both go where `print` writes — or the standard
-- input, which takes no writes (as Lua's). The default input (`io.input`) is a standard file too, and `io.read`
-- raises whichever it is.
local output, input = stdout, stdin
sandbox_io = {
  write = function(...) return write_values(output, 1, ...) end,
  flush = function()
    if output == stdout and host_flush then host_flush() end
    return true
  end,
  stdout = stdout, stderr = stderr, stdin = stdin,
  type = function(...)
    if select("#", ...) == 0 then argerror(1, "value expected") end
    return is_standard((...)) and "file" or nil
  end,
  output = function(file)
    if file == nil then return output end
    if type(file) ~= "string" and type(file) ~= "number" and not is_standard(file) then argerror(1, "FILE* expected, got " .. typename(file)) end
    if not is_standard(file) then error(no_files_message("output"), 2) end -- (a file name: no files to write)
    output = file
    return file
  end,
  input = function(file)
    if file == nil then return input end
    if type(file) ~= "string" and type(file) ~= "number" and not is_standard(file) then argerror(1, "FILE* expected, got " .. typename(file)) end
    if not is_standard(file) then error(no_files_message("input"), 2) end
    input = file
    return file
  end,
  open = no_files("open"), popen = no_files("popen"), read = no_files("read"), lines = no_files("lines"),
  close = function(...) -- (the default output, or a standard file: they stay open, as Lua's)
    local file = ...
    if select("#", ...) > 0 and not is_standard(file) then argerror(1, "FILE* expected, got " .. typename(file)) end
    return nil, "cannot close standard file"
  end,
  tmpfile = no_files("tmpfile"),
}

-- Reading files where the host gives the system (`luakit`, `luastore test`): `files.lua`, loaded only there (a store's
-- VM holds none of it).
if host.files then
  host.files(host.readdata, sandbox_io, no_files, typename, raw_getmetatable, host.newhandle, host.readstdin, error, argerror,
    builtin, file_metatable_view, check_option)
end
for _, functions in ipairs({ sandbox_io, file_methods }) do
  for name, value in next, functions do
    if type(value) == "function" then functions[name] = builtin(value) end
  end
end
globals.io = library("io", sandbox_io)

globals.debug = library("debug", {
  traceback = real_traceback, getmetatable = builtin(sandbox_debug_getmetatable), getinfo = host.getinfo,
})

-- `os`: where the host gives the system (`luakit`, `luastore test`: `LuaLimits.system`), Lua's clock, dates and
-- environment; in a scripted store the clock and environment it records (`.recorded`: clock.c). Either way what
-- would end or change the process, or touch files, raises naming the function (clock.c made the table).
if host.os then
  globals.os = library("os", os)
  unavailable.os = nil
end
for _, name in ipairs({ "string", "table", "math", "utf8", "coroutine", "debug", "io", "os" }) do
  builtins[name] = globals[name]
  -- (Lua names a function in a traceback or an argument error after where it is among the modules loaded: the
  -- libraries as scripts see them go there, so the sandbox's own are named as Lua's are — `io.write`.)
  if globals[name] ~= nil then host.registryloaded[name] = frozen[globals[name]] or globals[name] end
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

-- The default namespace, once the prelude has made it (after the libraries: its package.loaded holds them).
local function set_default_require(require_function)
  default_require = require_function
end

return builtins, default_require, deferred, globals, globals_of, namespace, private_environment, define, definemodule,
  definedeferred, set_default_require
