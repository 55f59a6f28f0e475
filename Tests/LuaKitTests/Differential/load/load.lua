-- `load` in the sandbox is Lua's (DifferentialTests compares the output byte for byte with stock lua5.4): strings
-- and reader functions, chunk names (the string itself by default), modes, environments (a given nil too). Binary
-- chunks are the one difference (refused: docs/lua.md), so none is loaded here.
local function first(message) return (tostring(message):gsub("\n.*", "")) end
local function show(f, message) print(type(f), message and first(message)) end

show(load("return x +"))
show(load("syntax error here", nil))
show(load("return 1", "=named"))
show(load("return 1", nil, "bt"))
show(load("return 1", nil, "b"))
show(load("return 1", nil, "t"))
print(load("return ...", nil, "t")(1, 2))
local parts = { "return ", "1 ", "+ 41" }
local i = 0
print(load(function() i = i + 1; return parts[i] end)())
local numbers = { "return ", 4, 2 }
local j = 0
print(load(function() j = j + 1; return numbers[j] end)())
local once = false
show(load(function() if once then return nil end once = true return 42 end))
show(load(function() return {} end))
show(load(function() error("in reader") end))
show(load(function() return nil end))
show(load(function() return "" end))
print(pcall(load, {}))
print(pcall(load))
print(pcall(load, "return 1", {}))
print(pcall(load, "return 1", nil, {}))
print(pcall(load("return y", "=e", "t", nil)))
local env = { z = 5 }
print(load("return z", "=e", "t", env)())
show(load("x = ", "=chunk"))
show(load("x = ", "@file.lua"))
show(load("x = ", 12))
print(select("#", load("return")()))
print(load("local a <const> = 1; return a")())
