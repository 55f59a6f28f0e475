-- Standard Lua that must behave in the sandbox as in stock lua5.4 (DifferentialTests runs it under both and
-- compares the output byte for byte): strict globals probed at the top level, the string metatable, the
-- collector, `package`, `require` with slashes, `loadfile` and `dofile`.
local unpack = unpack or table.unpack
print(type(unpack), setfenv == nil, rawget(_G, "never") == nil)
local mt = getmetatable("")
print(type(mt), mt.__index == string, ("x"):upper())
print(type(collectgarbage("count")), collectgarbage("isrunning"), collectgarbage(), collectgarbage("collect"))
print(type(collectgarbage("step")))
print(package.loaded.string == string, package.loaded.package == package, type(package.preload), type(package.path), package.config)
package.preload.virtual = function(name, extra) return {name = name, extra = extra} end
local v, extra = require("virtual")
print(v.name, v.extra, extra)
package.loaded.given = "given"
print(require("given"))
local helper, where = require("spec/helper")
print(helper.answer, where, require("spec/helper") == helper, package.loaded["spec/helper"] == helper)
print(loadfile("nope.lua"))
print(loadfile("data/values.lua")().first, dofile("data/values.lua").second)
print(pcall(dofile, "nope.lua"))
-- A serializer that names tables by their `tostring` names two tables apart (the text itself differs: an address
-- in Lua, an identity in the sandbox).
local names, order = {}, {}
local a, b = {}, {}
for _, t in ipairs({ a, b, a }) do
  local key = tostring(t)
  if names[key] == nil then names[key] = "k" .. (#order + 1) end
  order[#order + 1] = names[key]
end
print(table.concat(order, ","), tostring(a) ~= tostring(b), tostring(a) == tostring(a))
-- The libraries read raw and iterate as Lua's do.
print(next(string) ~= nil, rawget(math, "pi") == math.pi, rawget(string, "format") == string.format)
local functions = 0
for _, f in pairs(string) do if type(f) == "function" then functions = functions + 1 end end
print(functions > 10, select("#", next(table)), pcall(next, {}, "nokey"))
print(pcall(rawget, 1, 2))
-- Names as Lua's searcher reads them: dots are separators, empty components are skipped (`..spec.helper` is
-- `./spec/helper.lua`), and each name is its own entry of `package.loaded`.
local again = require("../spec.helper")
print(again.answer, again == helper, package.loaded["../spec.helper"] == again, require("spec..helper").answer)
-- Globals are Lua's: set anywhere, read as nil when nobody set them, shared with the chunks `load` makes.
counter = (counter or 0) + 1
local function readsUnset() return nobodySetThis end
function globalHelper() return "g" end
load("loaded = counter + 1")()
print(counter, readsUnset(), rawget(_G, "counter"), globalHelper(), _G.globalHelper == globalHelper, loaded)
-- A module that does not compile is named with the file it came from; one that raises lets its error through as
-- it came (its frame on the stack, for a traceback), and both are tried again by the next `require`.
print(pcall(require, "spec.broken"))
print(pcall(require, "spec.broken"))
print(pcall(require, "spec/raises"))
print(pcall(require, "spec/raises"), package.loaded["spec/raises"])
local _, trace = xpcall(require, debug.traceback, "spec.raises")
print(trace:match("^[^\n]*"), trace:find("\n\t%./spec/raises%.lua:3: in main chunk\n") ~= nil)
-- Files are read as Lua reads a file it loads: a first line starting with "#" is skipped (its line counted), and a
-- byte-order mark; a long path is shown by its end.
print(require("spec.shebang").line, require("spec.bom"), loadfile("spec/shebang.lua")().line, dofile("spec/bom.lua"))
print(pcall(require, "spec.long_folder_name_for_chunk_names.module_whose_name_is_long_too"))
print(pcall(dofile, "spec/long_folder_name_for_chunk_names/module_whose_name_is_long_too.lua"))
print(load("#!x\nreturn 1"))
-- `package` and `loadfile` as Lua's: `package.loaded._G` is `_G`, `cpath` a string (the idiom that extends it
-- works), `searchpath` finds a file or names each tried; `loadfile` takes a mode as Lua reads it.
print(package.loaded._G == _G, require("_G") == _G, type(package.cpath), type(package.searchpath))
package.cpath = package.cpath .. ";./?.so"
print(package.searchpath("spec.helper", "./?.lua;./?/init.lua"))
print(package.searchpath("nested.deep", "./absent/?.lua;./?.txt"))
print(package.searchpath("a.b", "x/?.lua;?.txt", ".", "_"))
-- Every template counts, an empty one too (Lua tries it, and names it).
print(package.searchpath("x", "a;;b"))
print(package.searchpath("x", ""))
print(package.searchpath("x", ";;"))
print(select("#", loadfile("data/values.lua", "bt")), loadfile("data/values.lua", "b"))
print(type(loadfile("data/values.lua", "t", {})), pcall(loadfile, "data/values.lua", {}))
-- The standard files stay open, as Lua's.
print(io.close())
print(io.stdout:close())
print(io.stderr:close())
