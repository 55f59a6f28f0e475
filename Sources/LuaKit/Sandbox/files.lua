-- Reading files where the host gives the system (`luakit`, `luastore test`: LuaLimits.system): `io.open(path, "r"|"rb")`
-- and `io.lines(path, …)` read a file of the project's folder or the module path (fixtures) — its bytes taken whole
-- when it opens (`readdata`, LuaVM+Host.swift), so no read waits on the system — with Lua's `read`, `lines`, `seek`
-- and `close`; opening to write answers as a read-only file system would. The prelude runs this chunk only there:
-- in a store `io` stays output only, and its VM holds none of this.
--
-- Receives the host's `readdata`, the sandbox's `io` table (changed in place), its `no_files` refusal, `typename`,
-- the real `getmetatable` (past `__metatable`), `newhandle` (a userdata with a metatable: a file is one, as Lua's)
-- and, where the host gives its standard input (`luakit`), `readstdin` (all of it); and the prelude's `error`,
-- `argerror` and `builtin` (what scripts call the methods of an open file through; this chunk calls them as they
-- are); and what `getmetatable` shows of a file (the standard files' too: one, as in Lua).
local host_readdata, sandbox_io, no_files, typename, raw_getmetatable, new_handle, host_readstdin, error, argerror, builtin,
  file_metatable_view, check_option = ...
local real_setmetatable, type, select, tostring, tonumber = setmetatable, type, select, tostring, tonumber
-- (The libraries' functions as they were: a script may replace `string.find` or `table.unpack`, under `luakit` as in
-- Lua, and what it changes must not change the sandbox's own.)
local string_sub, string_find = string.sub, string.find
local math_tointeger, math_min, math_max = math.tointeger, math.min, math.max
local table_pack, table_unpack = table.pack, table.unpack

local open_files = real_setmetatable({}, { __mode = "k" }) -- file -> { bytes, position (0-based), name }
local reading_metatable = { __name = "FILE*", __metatable = file_metatable_view }
-- The open file `file` is, for the method `name` (Lua's refusal of anything else, naming it).
local function checked(file, name)
  local open = open_files[file]
  if open == nil then
    if rawequal(raw_getmetatable(file), reading_metatable) then error("attempt to use a closed file", 3) end
    argerror(1, "FILE* expected, got " .. (file == nil and "no value" or typename(file)))
  end
  return open
end
-- One format of `read` (liolib.c's `g_read`): the value, or nil at the end of the file. `position` is the format's
-- among the arguments of the builtin the script called (for Lua's words when it is refused).
local function read_format(open, format, position)
  local bytes, at = open[1], open[2]
  local size = #bytes
  if type(format) == "number" then
    local count = math_tointeger(format)
    if count == nil then argerror(position, "number has no integer representation") end
    if count < 0 then error("not enough memory", 0) end -- (as Lua's: a negative count is a size no buffer takes)
    if at >= size then return nil end -- (`read(0)` tests for the end: "" before it)
    open[2] = math_min(size, at + count)
    return string_sub(bytes, at + 1, open[2])
  end
  if type(format) ~= "string" then
    argerror(position, "string expected, got " .. typename(format))
  end
  local kind = string_sub(format, 1, 1) == "*" and string_sub(format, 2, 2) or string_sub(format, 1, 1)
  if kind == "l" or kind == "L" then
    if at >= size then return nil end
    local newline = string_find(bytes, "\n", at + 1, true)
    open[2] = newline or size
    return string_sub(bytes, at + 1, (newline and kind == "l") and newline - 1 or open[2])
  elseif kind == "a" then
    open[2] = math_max(at, size)
    return string_sub(bytes, at + 1)
  elseif kind == "n" then -- liolib.c's `read_number`: the longest numeral it can read, at most 200 characters
    local position = at + 1
    while position <= size and string_find(bytes, "^[ \t\n\v\f\r]", position) do position = position + 1 end
    local start = position
    local function accept(set)
      local byte = string_sub(bytes, position, position)
      if byte ~= "" and string_find(set, byte, 1, true) then position = position + 1; return true end
      return false
    end
    local function digits(hex)
      local first = position
      while position <= size and string_find(bytes, hex and "^%x" or "^%d", position) do position = position + 1 end
      return position - first
    end
    accept("-+")
    local count, hex = 0, false
    if accept("0") then
      if accept("xX") then hex = true else count = 1 end
    end
    count = count + digits(hex)
    if accept(".") then count = count + digits(hex) end
    if count > 0 and accept(hex and "pP" or "eE") then
      accept("-+")
      digits(false)
    end
    open[2] = position - 1
    if position - start > 200 then return nil end
    return tonumber(string_sub(bytes, start, position - 1))
  end
  argerror(position, "invalid format")
end
-- `read`'s formats in turn, up to the first that finds nothing; `first` is the first format's position among the
-- builtin's arguments (2 after a file, 1 for `io.read`).
local function read_formats(open, first, ...)
  local count = select("#", ...)
  if count == 0 then return read_format(open, "l", first) end
  local results = {}
  for index = 1, count do
    local value = read_format(open, (select(index, ...)), first + index - 1)
    results[index] = value
    if value == nil then return table_unpack(results, 1, index) end
  end
  return table_unpack(results, 1, count)
end
local reading_methods = {}
function reading_methods.read(file, ...)
  local open = checked(file, "read")
  return read_formats(open, 2, ...)
end
local function lines_of(file, closes, ...)
  if select("#", ...) > 250 then argerror(252, "too many arguments") end
  local formats = table_pack(...)
  -- (A C function, as Lua's: its refusals name it as the loop calls it, `for iterator`, its formats from #2.)
  return builtin(function()
    local open = open_files[file]
    if open == nil then error("file is already closed", 2) end
    local results = table_pack(read_formats(open, 2, table_unpack(formats, 1, formats.n)))
    if results[1] ~= nil then return table_unpack(results, 1, results.n) end
    if closes then open_files[file] = nil end -- (at the end: nothing, as Lua's iterator returns)
  end)
end
function reading_methods.lines(file, ...)
  checked(file, "lines")
  return lines_of(file, false, ...)
end
function reading_methods.seek(file, whence, offset)
  local open = checked(file, "seek")
  whence = check_option(2, whence, "cur", "set", "cur", "end")
  if offset == nil then offset = 0 end
  if math_tointeger(offset) == nil then
    argerror(3, type(offset) == "number" and "number has no integer representation" or "number expected, got " .. typename(offset))
  end
  local base = whence == "set" and 0 or whence == "cur" and open[2] or #open[1]
  local position = base + math_tointeger(offset)
  if position < 0 then return nil, "Invalid argument", 22 end
  open[2] = position
  return position
end
function reading_methods.close(file)
  checked(file, "close")
  if rawequal(file, sandbox_io.stdin) then return nil, "cannot close standard file" end -- (it stays open, as Lua's)
  open_files[file] = nil
  return true
end
function reading_methods.write(file)
  checked(file, "write")
  return nil, "Bad file descriptor", 9
end
function reading_methods.flush(file) checked(file, "flush"); return true end
function reading_methods.setvbuf(file, ...)
  checked(file, "setvbuf")
  if select("#", ...) == 0 then argerror(2, "string expected, got no value") end
  check_option(2, (...), nil, "no", "full", "line")
  return true
end
local script_methods = {}
for name, method in next, reading_methods do script_methods[name] = builtin(method) end
reading_metatable.__index = script_methods
reading_metatable.__tostring = function(file)
  local open = open_files[file]
  return open == nil and "file (closed)" or "file (" .. open[3] .. ")"
end
reading_metatable.__close = function(file) open_files[file] = nil end
local function open_file(path, mode)
  if type(path) == "number" then path = tostring(path) end
  if type(path) ~= "string" then
    argerror(1, "string expected, got " .. typename(path))
  end
  mode = mode == nil and "r" or mode
  if type(mode) == "number" then mode = tostring(mode) end
  if type(mode) ~= "string" then argerror(2, "string expected, got " .. typename(mode)) end -- (Lua's `luaL_optstring`)
  if not string_find(mode, "^[rwa]%+?b*$") then argerror(2, "invalid mode") end
  if string_find(mode, "^r") == nil or string_find(mode, "+", 1, true) then
    return nil, path .. ": Permission denied (the sandbox's files are read-only)", 13
  end
  local bytes, message, number = host_readdata(path)
  if bytes == nil then return nil, message, number end
  local file = new_handle(reading_metatable)
  open_files[file] = { bytes, 0, path }
  return file
end
sandbox_io.open = function(...)
  if select("#", ...) == 0 then argerror(1, "string expected, got no value") end
  return open_file(...)
end
sandbox_io.lines = function(path, ...)
  if path == nil then return no_files("lines")() end -- (a tail call: raised at the script's line)
  if type(path) == "number" then path = tostring(path) end
  if type(path) ~= "string" then
    argerror(1, "string expected, got " .. typename(path))
  end
  local file, message = open_file(path, "r")
  if file == nil then error("cannot open file '" .. tostring(path) .. "' (" .. string_sub(message, #tostring(path) + 3) .. ")", 2) end
  return lines_of(file, true, ...), nil, nil, file
end
local write_type = sandbox_io.type
sandbox_io.type = function(...)
  if select("#", ...) == 0 then argerror(1, "value expected") end
  local value = ...
  if open_files[value] then return "file" end
  if rawequal(raw_getmetatable(value), reading_metatable) then return "closed file" end
  return write_type(value)
end
local close_standard = sandbox_io.close
sandbox_io.close = function(...)
  local file = ...
  if select("#", ...) == 0 or file == sandbox_io.stdout or file == sandbox_io.stderr then return close_standard(...) end
  if file == sandbox_io.stdin then return nil, "cannot close standard file" end
  if file == nil then argerror(1, "FILE* expected, got nil") end
  return reading_methods.close(file)
end

-- The standard input, where the host gives it (`luakit`: `LuaVM(…standardInput:)`): `io.stdin` a file that reads it,
-- and the default input (`io.read`, `io.lines()`, `io.input()`), as `lua`'s. It is read whole at its first read (the
-- wait is not counted in the time budget), so a script reading it line by line from a terminal waits for its end.
if host_readstdin ~= nil then
  local stdin = new_handle(reading_metatable)
  -- (Its bytes and position come at the first read; its name is there at once: `tostring(io.stdin)` waits for nothing.)
  open_files[stdin] = real_setmetatable({ [3] = "stdin" }, { __index = function(open, key)
    real_setmetatable(open, nil)
    open[1], open[2] = host_readstdin(), 0
    return rawget(open, key)
  end })
  local input = stdin
  sandbox_io.stdin = stdin
  -- (The standard output or error as the default input, as Lua allows: reading it fails as Lua's does.)
  local function writes_only(file) return file == sandbox_io.stdout or file == sandbox_io.stderr end
  sandbox_io.input = function(file)
    if file == nil then return input end
    if type(file) == "number" then file = tostring(file) end -- (a file name, as Lua takes a number for one)
    if writes_only(file) then
      input = file
    elseif type(file) == "string" then
      local opened, message = open_file(file, "r")
      if opened == nil then error("cannot open file '" .. file .. "' (" .. string_sub(message, #file + 3) .. ")", 2) end
      input = opened
    else
      checked(file, "input")
      input = file
    end
    return input
  end
  sandbox_io.read = function(...)
    if writes_only(input) then return nil, "Bad file descriptor", 9 end
    return read_formats(checked(input, "read"), 1, ...)
  end
  local lines_of_path = sandbox_io.lines
  sandbox_io.lines = function(path, ...)
    if path == nil then
      if writes_only(input) then error("Bad file descriptor", 2) end
      checked(input, "lines")
      return lines_of(input, false, ...)
    end
    return lines_of_path(path, ...)
  end
end
