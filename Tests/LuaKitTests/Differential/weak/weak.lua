-- Weak tables and the collector behave under `luakit` (LuaLimits.weakTables = .honoured, the default) as in
-- stock lua5.4 (DifferentialTests compares the output byte for byte). (A scripted store keeps them strong.)
local values = setmetatable({}, { __mode = "v" })
local keys = setmetatable({}, { __mode = "k" })
local kept = {}
values[1], values[2], values.name = {}, kept, "a string stays"
keys[{}], keys[kept] = "gone", "stays"
print(getmetatable(values).__mode, getmetatable(keys).__mode)
collectgarbage()
print(values[1], values[2] == kept, values.name)
local count = 0
for _, v in pairs(keys) do count = count + 1; print(v) end
print(count)

-- A mode set after setmetatable is honoured too: Lua reads it at each collection.
local late = setmetatable({}, {})
getmetatable(late).__mode = "k"
late[{}] = true
collectgarbage()
print(next(late))

-- stop and restart, as scripts use them to hold weak entries while they look at them.
print(collectgarbage("isrunning"), collectgarbage("stop"), collectgarbage("isrunning"))
local held = setmetatable({}, { __mode = "v" })
held[1] = {}
print(type(held[1]))
print(collectgarbage("restart"), collectgarbage("isrunning"))

-- Memoizing with a weak cache: the results are the same whether or not entries were collected.
local function memoize(f)
  local cache = setmetatable({}, { __mode = "kv" })
  return function(x)
    local hit = cache[x]
    if hit == nil then hit = f(x); cache[x] = hit end
    return hit
  end
end
local square = memoize(function(x) return { x * x } end)
print(square(3)[1], square(3)[1], square(4)[1])

-- A finalizer stays in its metatable; rawset may write __mode and __gc.
local mt = { __gc = function() end }
setmetatable({}, mt)
print(type(mt.__gc), type(rawget(mt, "__gc")))
local raw = {}
rawset(raw, "__mode", "k")
print(raw.__mode)
