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
