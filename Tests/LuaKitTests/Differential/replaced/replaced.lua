-- What a script does to the libraries (replacing string.find, an __eq on a metatable's metatable) changes what the
-- script sees, never the builtins' own work: they answer as Lua's C builtins, which use no library.
local mt = setmetatable({}, { __eq = function() error("eq called") end })
local obj = setmetatable({}, mt)
local ok, found = pcall(getmetatable, obj)
print(rawequal(getmetatable(obj), mt), io.type(obj), ok, rawequal(found, mt))
local class = setmetatable({}, { __eq = function() return true end })
print(rawequal(getmetatable(setmetatable({}, class)), class), io.type(setmetatable({}, class)))
local saved = { string.find, string.sub, string.byte, string.format, table.unpack, table.pack, math.type, math.tointeger }
string.find, string.sub, string.byte = nil, nil, nil
string.format = function() return "HIJACKED" end
table.unpack, table.pack, math.type, math.tointeger = nil, nil, nil, nil
local loaded = { pcall(load, "return 1") }
print(loaded[1], type(loaded[2]))
print(require("plain").ok)
io.write(1.5, " ", 7, "\n")
io.stdout:write(2.25, "\n")
local f = io.open("plain.lua")
print(f:read("l"), f:seek("set", 0), f:read(3), f:read("n"), f:read(2))
f:close()
for line in io.lines("plain.lua", "L") do io.write(line) end
print(type(loadfile("plain.lua")), dofile("plain.lua").ok)
print(package.searchpath("plain", "./?.lua"))
string.find, string.sub, string.byte, string.format = saved[1], saved[2], saved[3], saved[4]
table.unpack, table.pack, math.type, math.tointeger = saved[5], saved[6], saved[7], saved[8]
-- A module's functions are named in a traceback as Lua names them: where they are among the modules loaded.
package.loaded.mymod = { f = function() error("x") end }
print((select(2, xpcall(function() package.loaded.mymod.f() end, debug.traceback))))
local plain = require("plain")
print((select(2, xpcall(function() plain.fail() end, debug.traceback))))
local alias = setmetatable
print(pcall(function() alias(1) end))
-- dofile calls the chunk as Lua's C dofile does: no tail call in between.
print((select(2, xpcall(dofile, debug.traceback, "fails.lua"))))
