-- Coroutines behave in the sandbox as in stock lua5.4 (DifferentialTests compares the output byte for byte).
local co = coroutine.create(function(a, b)
  local c = coroutine.yield(a + b)
  local d, e = coroutine.yield(c * 2)
  return d + e
end)
print(coroutine.resume(co, 1, 2))
print(coroutine.status(co), coroutine.resume(co, 10))
print(coroutine.resume(co, 3, 4))
print(coroutine.status(co), coroutine.resume(co))
local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end)
print(gen(), gen(), gen())
local bad = coroutine.wrap(function() error("boom") end)
print(pcall(bad))
print(coroutine.isyieldable(), select(2, coroutine.running()))
local failing = coroutine.create(function() local x = nil; return x.y end)
print(coroutine.resume(failing))
print(coroutine.close(failing))
print(pcall(coroutine.yield, 1))
local closed = coroutine.create(function() coroutine.yield() end)
coroutine.resume(closed)
print(coroutine.close(closed), coroutine.status(closed))
print(select("#", coroutine.resume(coroutine.create(function() return 1, 2, 3 end))))

-- What the host does for a script (print, io.write, require, reading a file) done from inside a coroutine: its
-- arguments are the coroutine's, its results and errors go back to it, and the coroutine goes on.
print(coroutine.resume(coroutine.create(function() print("inside", 1, nil, true) return "done" end)))
print(coroutine.wrap(function() io.write("written ", 2, " ") io.write("in a coroutine\n") return pcall(print, "x", "y") end)())
local nested = coroutine.wrap(function()
  return coroutine.wrap(function()
    print("two deep")
    local module = require("lib.greeting")
    coroutine.yield(module.text)
    return "after the yield"
  end)()
end)
print(nested())
local reader = coroutine.create(function()
  local file = assert(io.open("data.txt"))
  local first = file:read("l")
  coroutine.yield(first)
  local rest = file:read("a")
  file:close()
  return rest
end)
print(coroutine.resume(reader))
print(coroutine.resume(reader))
print(coroutine.resume(coroutine.create(function() return pcall(require, "lib.absent") end)) == true)
print(coroutine.resume(coroutine.create(function() print(setmetatable({}, {__tostring = function() return "shown" end})) end)))
print(coroutine.resume(coroutine.create(function() return select("#", print()) end)))
print(coroutine.resume(coroutine.running()))
print(coroutine.resume(coroutine.create(function() return coroutine.resume(coroutine.running()) end)))
-- A wrapped coroutine that fails closes its to-be-closed variables, as Lua's wrap does: an error one of them raises
-- is the one passed on, else the first.
local function closing(fails)
  return coroutine.wrap(function()
    local x <close> = setmetatable({}, { __close = function() if fails then error("in close") end end })
    error("original")
  end)
end
print(pcall(closing(true)))
print(pcall(closing(false)))
-- Wrapped coroutines nest as deep as Lua's: each takes one level of Lua's C stack (a generator of generators, 70
-- deep; and how deep a chain of them goes before the C stack overflows).
local function walk(n)
  return coroutine.wrap(function()
    if n > 0 then for v in walk(n - 1) do coroutine.yield(v) end end
    coroutine.yield(n)
  end)
end
local sum = 0
for v in walk(70) do sum = sum + v end
print(sum)
local depth = 0
local function nest() depth = depth + 1; coroutine.wrap(nest)() end
print(pcall(nest) == false, depth)
-- A failure that is not a string passes through as it is; a yielded value and a resumed one cross as Lua's.
print(select(2, pcall(coroutine.wrap(function() error(setmetatable({}, { __tostring = function() return "object" end })) end))))
local twice = coroutine.wrap(function(a, b) local c = coroutine.yield(a + b) return c * 2 end)
print(twice(1, 2), twice(10), pcall(twice))

-- A module that yields as it loads: Lua's `require` runs it from C, where a coroutine cannot yield.
local yielding = coroutine.create(function() return require("lib.yielding") end)
print(coroutine.resume(yielding))
print(coroutine.status(yielding), package.loaded["lib.yielding"])
