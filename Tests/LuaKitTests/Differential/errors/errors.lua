-- Errors and their handlers in the sandbox are Lua's (DifferentialTests compares the output byte for byte with stock
-- lua5.4): `xpcall(f, debug.traceback)` shows the frames that failed; a handler that fails ends in "error in error
-- handling"; coroutines yield inside `pcall` and `xpcall`. (A traceback's last line is the host's own frame,
-- "[C]: in ?" under stock lua5.4: it is left out. A traceback a handler written in Lua makes differs: docs/lua.md.)
local function withoutHost(text)
  return (text:gsub("\n\t%[C%]: in %?$", ""))
end

local function inner() local x = nil; return x.y end
local function outer() return inner() + 1 end
local ok, trace = xpcall(outer, debug.traceback)
print(ok, withoutHost(trace))
print(xpcall(outer, function(m) return "handled: " .. m end))
print(xpcall(function() error({ code = 7 }) end, function(e) return type(e) == "table" and e.code end))
print(xpcall(function(a, b) return a + b end, print, 1, 2))
print(xpcall(function() error("e") end, function() error("h") end))
print(xpcall(function() error("e") end, error))
print(xpcall(function() error("e") end, function(m) local fine = pcall(error, "nested"); return "h:" .. m .. tostring(fine) end))
local function loop() local ok = pcall(loop); error("again") end
print(xpcall(loop, loop))
print(select("#", xpcall(function() return 1, nil, 3 end, print)))
print(pcall(xpcall))
print(pcall(xpcall, print))
print(pcall(xpcall, print, 1))
local co = coroutine.wrap(function()
  return xpcall(function() coroutine.yield("yielded inside xpcall"); error("after") end, function(m) return "caught " .. m end)
end)
print(co())
print(co())
print(pcall(function(...) return ... end, 1, nil, 3))
print(select("#", pcall(function() return 1, nil end)))
local yielding = coroutine.wrap(function(a)
  local ok, b, c = pcall(function(x) local y = coroutine.yield(x + 1); return y * 2, "done" end, a)
  return ok, b, c
end)
print(yielding(1))
print(yielding(20))
local failing = coroutine.wrap(function() return pcall(function() coroutine.yield(1); error("later", 0) end) end)
print(failing())
print(failing())
-- Tracebacks name functions as Lua names them: a global function by its name, library functions by theirs, the
-- script called from C (the stand-alone interpreter's frame).
function tracedGlobal() return debug.traceback("traced", 1) end
local function tracedLocal() local text = tracedGlobal() return text end
print(tracedLocal())
local tracedTable = {}
function tracedTable.field() print((debug.traceback())) end
tracedTable.field()
print(select(2, xpcall(string.rep, debug.traceback)))
function failingGlobal() error("failed in a global") end
print(select(2, xpcall(failingGlobal, debug.traceback)))
-- The sandbox's builtins written in Lua are C functions to scripts, as Lua's are: a tail call keeps the caller's
-- line, `string.dump` refuses them, a traceback names them, `pairs` returns the `next` scripts see.
local function made(value) return setmetatable(value, {}) end
print(pcall(made, 1))
print(pcall(function() return rawlen(5) end))
print(pcall(function() return rawget(1, 2) end))
print(pcall(function() return rawset({}, nil, 1) end))
print(pcall(function() return getmetatable() end))
print(pcall(function() return collectgarbage({}) end))
print(pcall(function() return load({}) end))
print(pcall(function() return require(nil) end))
print(pcall(function() return io.write({}) end))
print(pcall(function() return next({}, "absent") end))
print(pcall(function() return next(1) end))
for _, builtin in ipairs({ print, setmetatable, getmetatable, rawget, rawset, rawlen, next, load, require, io.write, coroutine.wrap(print) }) do
  io.write(tostring((pcall(string.dump, builtin))), " ")
end
print()
print(pairs({}) == next, select("#", pairs({})), pairs(setmetatable({}, {})) == next)
for key, value in pairs(setmetatable({ a = 1 }, { __index = {} })) do print(key, value) end
print(select(2, xpcall(made, debug.traceback, 1)))
print(select(2, xpcall(function() local x = io.write({}) return x end, debug.traceback)))
local wrapped = coroutine.wrap(function() error("inside a wrap") end)
print(select(2, xpcall(wrapped, debug.traceback)))

-- A module that does not compile: Lua's searcher raises it, its own C frame in the traceback (`[C]: in ?`).
print(xpcall(require, debug.traceback, "lib.unparsable"))
