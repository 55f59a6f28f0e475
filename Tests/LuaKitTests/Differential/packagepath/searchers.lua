-- `package.searchers` as Lua's: `require` calls them in order, the first loader found wins, and what the others
-- say makes the message when none finds one (DifferentialTests). The C searchers (stock Lua's third and fourth)
-- are taken away first: no C module loads in the sandbox, whose list has the first two only.
package.searchers[3], package.searchers[4] = nil, nil
package.path = "./?.lua;./?/init.lua"
local s = package.searchers
print(type(s), #s, type(s[1]), type(s[2]))

-- The two searchers, called as a script may call them.
print(s[1]("absent"))
print(select("#", s[1]("absent")))
package.preload.pre = function(...) return { ... } end
local loader, extra = s[1]("pre")
print(type(loader), extra, loader("a", "b")[2])
print(s[2]("absent"))
local chunk, file = s[2]("libs.util")
print(type(chunk), file, chunk("x", "y").where)
print(pcall(s[2]))

-- A searcher of the script's own, in front of the file searcher: a dialect compiled as it loads, found with
-- package.searchpath (as Fennel's and MoonScript's searchers are written).
table.insert(s, 2, function(name)
  local found, tried = package.searchpath(name, "./dialect/?.up")
  if found == nil then return tried end
  local handle = io.open(found)
  local text = handle:read("a")
  handle:close()
  return assert(load((text:gsub("%u+", string.lower)), "@" .. found)), found
end)
local shout, where = require("shout")
print(shout.greet("world"), where)

-- What the searchers say when none finds a loader: a string each; nil or anything else says nothing.
table.insert(s, 1, function() return nil end)
table.insert(s, 1, function() return 42 end)
table.insert(s, 1, function() return {} end)
print(pcall(require, "missing"))

-- A searcher that raises stops the require there.
table.insert(s, 1, function(name) if name == "boom" then error("searcher failed on " .. name) end end)
print(pcall(require, "boom"))

-- package.searchers must be a table; each searcher must be callable.
local saved = package.searchers
package.searchers = nil
print(pcall(require, "anything"))
package.searchers = { 7 }
print(pcall(require, "anything"))
package.searchers = { setmetatable({}, { __call = function(_, name) return function() return "called " .. name end end }) }
print(require("through.call"))
package.searchers = saved
