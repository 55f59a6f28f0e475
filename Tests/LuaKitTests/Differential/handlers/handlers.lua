-- xpcall's message handlers see the stack where the error was raised, as Lua's do: debug.traceback in one (or in what
-- it calls, or in a handler of an xpcall inside it) shows those frames, then the xpcall's and below.
local function inner() error("boom") end
local function f() inner() end
local function handler(e) return e .. "\n" .. debug.traceback("in handler", 1) end
print(select(2, xpcall(f, handler)))
print(select(2, xpcall(f, function(e) return debug.traceback(e, 2) end)))
print(select(2, xpcall(f, function(e) local function deeper() return debug.traceback("d") end return deeper() end)))
-- nested: a handler that uses xpcall itself
print(select(2, xpcall(f, function(e)
  local ok, inner_tb = xpcall(function() error("second") end, function(e2) return debug.traceback(e2) end)
  return inner_tb .. "\n--\n" .. debug.traceback(e)
end)))
-- after the handler, traceback is normal again
print(debug.traceback("after"))
print(xpcall(f, print))
print(pcall(xpcall, f))
print(xpcall(function() return 1, 2 end, handler))
local co = coroutine.wrap(function() return xpcall(function() coroutine.yield(1); error("y") end, function(e) return debug.traceback(e) end) end)
print(co()); print(co())
local co2 = coroutine.create(function() return debug.traceback("in co") end)
print(xpcall(function() error("z") end, function(e) local ok, tb = coroutine.resume(co2) return tb end))
