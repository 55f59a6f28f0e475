-- Bad arguments get Lua's own messages in the sandbox too, where its base functions are the sandbox's: the
-- function's name (as the call site or the library names it), the argument's number, "no value" for a missing
-- one (DifferentialTests compares the output byte for byte with stock lua5.4).
local function try(label, f, ...)
  local ok, message = pcall(f, ...)
  print(label, ok, ok and "" or message)
end

-- Called by pcall itself: the name is the library's.
try("tostring()", tostring)
try("setmetatable()", setmetatable)
try("setmetatable({})", setmetatable, {})
try("setmetatable({}, 1)", setmetatable, {}, 1)
try("setmetatable(1, {})", setmetatable, 1, {})
try("rawset()", rawset)
try("rawset({})", rawset, {})
try("rawset({}, 1)", rawset, {}, 1)
try("rawset({}, nil, 1)", rawset, {}, nil, 1)
try("rawset({}, 0/0, 1)", rawset, {}, 0/0, 1)
try("rawget()", rawget)
try("rawget({})", rawget, {})
try("next()", next)
try("next(1)", next, 1)
try("collectgarbage({})", collectgarbage, {})
try("collectgarbage('nope')", collectgarbage, "nope")
try("coroutine.resume()", coroutine.resume)
try("coroutine.resume(1)", coroutine.resume, 1)
try("coroutine.wrap()", coroutine.wrap)
try("coroutine.wrap({})", coroutine.wrap, {})
try("coroutine.wrap(named)", coroutine.wrap, setmetatable({}, { __name = "Named" }))
try("coroutine.close(1)", coroutine.close, 1)
try("coroutine.status(1)", coroutine.status, 1)

-- Called from a line of this script: the name is the call site's, the line is this one.
try("wrap(1) at a line", function() coroutine.wrap(1) end)
try("local wrap", function() local w = coroutine.wrap; w(nil) end)
try("resume(nil) at a line", function() coroutine.resume(nil) end)
try("setmetatable() at a line", function() setmetatable() end)
try("setmetatable({}) at a line", function() setmetatable({}) end)
try("rawset({}) at a line", function() rawset({}) end)
try("rawget({}) at a line", function() rawget({}) end)
try("tostring() at a line", function() tostring() end)

-- What works still works.
local t = setmetatable({}, nil)
print(getmetatable(t), rawset(t, "k", 1) == t, rawget(t, "k"), rawget(t, "missing"))
local gen = coroutine.wrap(function(a) coroutine.yield(a + 1); return "done" end)
print(gen(1), gen())
print(coroutine.resume(coroutine.create(function(...) return select("#", ...) end), nil, nil))

-- `print` and `io.write` refuse what Lua's refuse, at the line that called them.
try("print of a bad __tostring", function() print(setmetatable({}, { __tostring = function() return {} end })) end)
try("print of a failing __tostring", function() print(setmetatable({}, { __tostring = function() error("inner", 0) end })) end)
try("io.write of a table", function() io.write({}) end)
try("file:write of a named value", function() io.stdout:write(1, setmetatable({}, { __name = "Named" })) end)

-- Functions the sandbox replaces check their arguments and answer as Lua's do.
try("getmetatable of nothing", function() local m = getmetatable() return m end)
try("io.type of nothing", function() local r = io.type() return r end)
print("io.type", io.type(io.stdout), io.type(42))
print("load of a number", load(1))
print("load of a number's chunk", load(2.5))
local calls = 0
local pieces = { "@@@", " more" }
local loaded = table.pack(load(function() calls = calls + 1 return pieces[calls] end))
print("a reader stops at the syntax error", loaded[1], loaded[2], calls)
local parts = { "return ", 4, "2" }
calls = 0
print("a reader's pieces as they come", load(function() calls = calls + 1 return parts[calls] end)(), calls)
print("a binary reader", load(function() return "\27Lua" end, "=bin", "t"))
print("a text reader in mode b", load(function() return "return 1" end, "=text", "b"))
print("an empty reader", load(function() return nil end)())
try("randomseed of 1.5", function() local r = math.randomseed(1.5) return r end)
print("randomseed of a numeric string", select("#", math.randomseed("7")), math.random(100))
try("collectgarbage step 1.5", function() local r = collectgarbage("step", 1.5) return r end)
try("collectgarbage step x", function() local r = collectgarbage("step", "x") return r end)
try("warn of a named value", function() warn(setmetatable({}, { __name = "Named" })) end)
try("rawlen of a number", function() local n = rawlen(5) return n end)
try("rawlen of nothing", function() local n = rawlen() return n end)
try("rawset at nil", function() local t = rawset({}, nil, 1) return t end)
try("rawset at NaN", function() local t = rawset({}, 0 / 0, 1) return t end)
_G[1], _G[2] = "one", "two"
print("#_G", #_G, _G[1], _G[2])
_G[1], _G[2] = nil, nil
try("_G at nil", function() _G[nil] = 1 end)
try("_G at NaN", function() _G[0 / 0] = 1 end)
local running
running = coroutine.create(function() local ok = coroutine.close(running) return ok end)
print("close the running coroutine", coroutine.resume(running))
try("close a number", function() local r = coroutine.close(1) return r end)
local outer = coroutine.wrap(function()
  local me = coroutine.running()
  return coroutine.resume(coroutine.create(function() local r = coroutine.close(me) return r end))
end)
print("close a normal coroutine", outer())
print("flush", io.stdout:flush(), io.flush())
try("setvbuf bogus", function() local ok = io.stdout:setvbuf("bogus") return ok end)
print("setvbuf line", io.stdout:setvbuf("line"))
print("require of a number", pcall(require, 1) == false)
