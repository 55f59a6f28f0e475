-- Reading files as stock Lua does: `io.open`, `io.lines`, `file:read` with every format, `lines`, `seek`, `close`.
local function show(...)
  local parts = { select("#", ...) }
  for index = 1, select("#", ...) do
    local value = select(index, ...)
    parts[#parts + 1] = type(value) == "string" and string.format("%q", value) or tostring(value)
  end
  print(table.concat(parts, " "))
end

local f = assert(io.open("fixtures/mixed.txt"))
show(io.type(f), f:read("l"))
show(f:read("n", "n", "n", "n", "n", "n"))
show(f:read("n"))
show(f:seek("cur"))
show(f:read("L"))
show(f:read(4), f:read(0), f:read("l"), f:read("l"))
show(f:read("a"))
show(f:read("a"), f:read("l"), f:read(0), f:read(1), f:read("n"))
show(f:seek("set"), f:read(5), f:seek("cur", 3), f:read("*l"), f:seek("end", -4), f:read("*a"))
show(f:seek("set", -1))
show(f:seek("end", 10), f:read(1), f:read("a"))
show(f:write("x"))
show(f:flush(), f:setvbuf("full"))
show(f:close(), io.type(f), tostring(f))
show(pcall(f.read, f))
show(pcall(f.lines, f))

local count = 0
for line in io.lines("fixtures/mixed.txt") do count = count + 1 end
show("lines", count)
for a, b in io.lines("fixtures/mixed.txt", 3, "L") do show(a, b) end
for n in io.lines("fixtures/mixed.txt", "n") do show(n) end
local g = io.open("fixtures/mixed.txt", "rb")
for chunk in g:lines(16) do io.write(#chunk, " ") end
print()
show(io.type(g), g:read("a"))
g:close()
local iterate = io.open("fixtures/mixed.txt"):lines()
show(iterate(), iterate())

local empty = io.open("fixtures/empty.txt")
show(empty:read("a"), empty:read("l"), empty:read(0), empty:read("n"), empty:seek("end"))
empty:close()

show(io.open("fixtures/absent.txt"))
show(pcall(io.lines, "fixtures/absent.txt"))
show(pcall(function() local h = io.open("fixtures/mixed.txt", "rw"); return h end))
show(pcall(function() local h = io.open("fixtures/mixed.txt"); local x = h:read("x"); return x end))
show(pcall(function() local h = io.open("fixtures/mixed.txt"); local x = h:seek("there"); return x end))
show(pcall(function() local h = io.open("fixtures/mixed.txt"); local x = h:seek("set", 1.5); return x end))
do
  local closing <close> = io.open("fixtures/mixed.txt")
  show(closing:read(5))
end

-- Arguments `read` refuses, named as Lua names them; a lines iterator at the end returns nothing.
do
  local h = io.open("fixtures/mixed.txt")
  show(pcall(function() local x = h:read(1.5) return x end))
  show(pcall(function() local x = h:read({}) return x end))
  show(pcall(function() local x = h.read(42) return x end))
  show(pcall(function() local x = h.read() return x end))
  show(pcall(function() local x = io.close(42) return x end))
  show(pcall(function() local x = h:read(-1) return x end))
  show(h:seek())
  h:close()
  local next_line = io.lines("fixtures/mixed.txt")
  local count = 0
  while next_line() ~= nil do count = count + 1 end
  show(count)
end
do
  local h = io.open("fixtures/mixed.txt")
  local it = h:lines()
  while it() ~= nil do end
  show(select("#", it()))
  h:close()
end
-- The standard files: `io.stdin` is a file (a library may key a table by it), which takes no writes; `io.output()`
-- and `io.input()` answer the defaults, and the output may be the standard error (both written where print writes
-- here: this prints nothing to it).
print(io.type(io.stdin), io.stdin ~= io.stdout, io.stdin:write("x"))
print(io.output() == io.stdout, io.input() == io.stdin, io.input(io.stdin) == io.stdin)
local serialized = { [io.stdin] = "stdin", [io.stdout] = "stdout" }
print(serialized[io.stdin], serialized[io.stdout])
print(io.output(io.stdout) == io.stdout, io.stdin:flush(), io.stdin:setvbuf("no"))
-- Files are userdata, as Lua's: their type, and what assigning a field of one raises.
print(type(io.stdout), type(io.stderr), type(io.stdin))
local opened = io.open("fixtures/mixed.txt")
print(type(opened), io.type(opened))
opened:close()
print(type(opened), io.type(opened))
print(pcall(function() io.stdout.extra = 1 end))
print(pcall(function() opened.extra = 1 end))
-- Options and modes that are not strings are refused in Lua's words (no text of them: a table's is its address).
local options = assert(io.open("fixtures/mixed.txt"))
print(pcall(options.seek, options, {}))
print(pcall(options.seek, options, 5))
print(pcall(options.setvbuf, options, {}))
print(pcall(options.setvbuf, options))
print(pcall(options.setvbuf, options, "full"))
print(pcall(io.open, "fixtures/mixed.txt", {}))
print(pcall(io.open, "fixtures/mixed.txt", 5))
options:close()
