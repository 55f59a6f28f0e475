-- `package.path` changed at run time, as scripts and their libraries do (`"./libs/?.lua;" .. package.path`): each
-- `require` searches the templates it holds then, in their order (DifferentialTests).
local original = package.path
print(type(original))

-- Before the change: the folder's own util.
print(require("util").name)
package.loaded.util = nil

package.path = "./libs/?.lua;./libs/?/init.lua;" .. package.path
local util, found = require("util")
print(util.name, util.where, found, util.shout("hey"))

local shapes, from = require("shapes")
print(shapes.area(3, 4), shapes.loud, shapes.from, from)

-- A template without ./, and a dotted name made a path.
package.path = "vendor/?.lua;" .. package.path
local thing, file = require("deep.thing")
print(thing.name, thing.file, file)

-- An error inside a module found so names its file as the template made it.
local ok, message = pcall(require, "broken")
print(ok, message)

-- What package.searchpath finds agrees with require.
print(package.searchpath("deep.thing", package.path))
print(package.searchpath("util", "./libs/?.lua"))

-- A number is a string to the searcher; anything else is refused as Lua refuses it.
package.path = 7
local missing, why = pcall(require, "nothing.here")
print(missing, why:match("^module 'nothing.here' not found:\n\tno field package.preload%['nothing.here'%]\n\tno file '7'"))
package.path = {}
print(pcall(require, "nothing.here"))
package.path = nil
print(pcall(require, "nothing.here"))

-- Back to the path it had: modules load as before (what is loaded stays loaded).
package.path = original
package.loaded.util = nil
print(require("util").name, package.loaded["deep.thing"] == thing)

-- A name with a leading `./` or a dot in a path: Lua's searcher makes every dot a slash (`./util` is `.///util.lua`).
print(select(2, require("./util")))
print((select(2, pcall(require, "./nothing")):match("no file '%./[^']*nothing%.lua'")))
print(package.searchpath("./util", "./?.lua"))
