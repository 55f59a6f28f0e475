-- Where errors are placed and what is written when a builtin calls the script's code (DifferentialTests): `print`
-- writes each value as it goes — a `__tostring` that writes or raises does so between them —; `error`'s levels count
-- the frames Lua has (a module's main chunk is called by `require`, a reader by `load`), none of the sandbox's own.
local bad = setmetatable({}, { __tostring = function() error("cannot show") end })
print(pcall(print, 1, 2, bad))
local chatty = setmetatable({}, { __tostring = function() io.write("[side]") return "obj" end })
print(1, chatty)
print(select(2, xpcall(print, debug.traceback, bad)))
print(setmetatable({}, { __tostring = function() return debug.traceback("in __tostring") end }))
print(pcall(function()
  print(setmetatable({}, { __tostring = function() error("at level 3", 3) end }))
end))
print(pcall(print, setmetatable({}, { __tostring = function() return 1 end })))

print(pcall(require, "raises"))
package.preload.pre = function() error("preload at level 2", 2) end
print(pcall(require, "pre"))
local function via() return require("pre3") end
package.preload.pre3 = function() error("preload at level 3", 3) end
print(pcall(via))
print(pcall(dofile, "raises.lua"))
print(pcall(load, function() error("reader at level 2", 2) end))
local function outer() return load(function() error("reader at level 3", 3) end) end
print(pcall(outer))
local function helper() error("helper at level 2", 2) end
print(pcall(function() helper() end))
print(pcall(error, "through pcall", 2))
print(pcall(error))
print(select(2, pcall(error, { code = 7 })).code)

print(pcall(io.stdout:lines()))
print(pcall(function() for _ in io.stderr:lines() do end end))
print(loadfile(""))
print(loadfile("."))
print(pcall(dofile, "."))
