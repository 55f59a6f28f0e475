-- `debug.getinfo` as Lua's, over the script's own frames (DifferentialTests): where code was called from (logging,
-- test frameworks), the running script's file (`source:match("^@(.*)")`), a function's own record (`func`),
-- what a function is (`debug.getinfo(print)`), levels past the stack, bad arguments.
local helper = require("helper")
print(helper.where(), helper.dir())
local function log() return helper.where(2) end
print(log())

local info = debug.getinfo(1)
print(info.what, info.source, info.short_src, info.currentline, info.linedefined, info.nups, info.nparams,
  info.isvararg, info.istailcall, type(info.func), info.name, info.namewhat)
print(debug.getinfo(1, "S").source:match("^@(.*)$"))

local function f(a, b, ...)
  local me = debug.getinfo(1, "nSlufL")
  local lines = {}
  for line in pairs(me.activelines) do lines[#lines + 1] = line end
  table.sort(lines)
  print(me.name, me.namewhat, me.what, me.linedefined, me.lastlinedefined, me.nparams, me.isvararg, me.func == f,
    table.concat(lines, ","))
  local caller = debug.getinfo(2, "nSl")
  print(caller.what, caller.currentline, caller.name, caller.namewhat)
end
f(1, 2)
print(pcall(f))
local function tail() return f() end
tail()

local p = debug.getinfo(print)
print(p.what, p.source, p.short_src, p.currentline, p.linedefined, p.nups, p.nparams, p.isvararg, p.func == print)
local s = debug.getinfo(string.format, "Su")
print(s.what, s.nups, s.nparams, s.isvararg)
local g = debug.getinfo(f, "SuL")
print(g.what, g.linedefined, g.nparams, g.isvararg, g.activelines ~= nil)

print(debug.getinfo(100))
print(pcall(debug.getinfo, {}))
print(pcall(debug.getinfo, 1, ">S"))
print(pcall(debug.getinfo, 1, "q"))
print(pcall(debug.getinfo))
print(debug.getinfo(1, "").what, next(debug.getinfo(1, "")))

local co = coroutine.create(function(x) local y = coroutine.yield(x) return y end)
coroutine.resume(co, 1)
local ci = debug.getinfo(co, 1, "Sl")
print(ci.what, ci.currentline, ci.linedefined)
local c0 = debug.getinfo(co, 0, "Sn")
print(c0.what, c0.name)
print(debug.getinfo(co, 5))

table.sort({ 3, 1, 2 }, function(a, b)
  local i = debug.getinfo(2, "Sn")
  if a == 3 then print("sort caller", i.what, i.name, i.namewhat) end
  return a < b
end)
local t = setmetatable({}, { __index = function() local i = debug.getinfo(1, "n") return i.name .. "/" .. i.namewhat end })
print(t.foo)
local recurse
recurse = function(n) if n == 0 then return 0 end return n + debug.getinfo(1, "f").func(n - 1) end
print(recurse(4))
