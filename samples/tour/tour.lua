-- A tour of the script environment LuaKit gives every script.
-- Run it with: swift run luakit samples/tour/tour.lua
local greeting = require("lib.greeting")   -- modules come from this folder only

local inventory = { pears = 3, apples = 5, figs = 0 }

-- pairs() order varies from run to run; sortedpairs() does not.
local lines = {}
for fruit, count in sortedpairs(inventory) do
  lines[#lines + 1] = string.format("%-6s %d", fruit, count)
end

-- Lua patterns work as usual, under the same time budget as everything else.
local words = {}
for word in ("the quick brown fox"):gmatch("%a+") do words[#words + 1] = word:upper() end

-- Globals are Lua's: one table the app's modules share; reading one nobody set gives nil.
total = 8
local globals = (total == 8 and rawget(_G, "total") == 8 and nobodySetThis == nil) and "as in Lua" or "different"

-- Lua as Lua is, less what safety needs: no script ends the process or writes a file.
local exited = pcall(os.exit, 1)
local written = io.open("out.txt", "w") ~= nil

print(greeting.hello("tour"))
print(table.concat(lines, ", ") .. " | " .. table.concat(words, " ") .. " | globals " .. globals
  .. " | process " .. ((exited or written) and "changed" or "kept whole"))
