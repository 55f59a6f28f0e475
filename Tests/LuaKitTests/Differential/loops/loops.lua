-- string.rep and table.move, which the sandbox runs in C of its own (with the time budget): results and messages as Lua's.
local out = {}
local function p(...) local t = table.pack(...) for i = 1, t.n do t[i] = tostring(t[i]) end out[#out + 1] = table.concat(t, " ") end
p(("ab"):rep(3, ","), ("ab"):rep(0), ("ab"):rep(-1, "x"), ("x"):rep(1), (""):rep(5, "-"), ("a"):rep(4, ""), #("xyz"):rep(1000, "--"))
p(pcall(string.rep, "x", 3e9))
p(pcall(string.rep, "", 3e9, "ab"))
p(pcall(string.rep))
p(pcall(string.rep, "x", 1.5))
local t = {1, 2, 3, 4, 5}; table.move(t, 1, 3, 2); p(table.concat(t, ","))
t = {1, 2, 3, 4, 5}; table.move(t, 2, 5, 1); p(table.concat(t, ","))
local a, b = {1, 2, 3}, {}; p(table.move(a, 1, 3, 2, b) == b, b[1], b[2], b[4])
p(pcall(table.move, 1, 1, 1, 1))
p(pcall(table.move, {}, 1, 1, 1, 5))
p(pcall(table.move, {}, -1, math.maxinteger, 1))
p(pcall(table.move, {}, 1, 10, math.maxinteger))
local log = {}
local src = setmetatable({}, {__index = function(_, k) log[#log + 1] = "r" .. k return k * 10 end})
local dst = setmetatable({}, {__newindex = function(_, k, v) log[#log + 1] = "w" .. k .. "=" .. v end})
table.move(src, 1, 3, 5, dst); p(table.concat(log, " "))
p(select("#", table.move({}, 5, 1, 1)))
t = {1, 2, 3}; table.insert(t, 1, 0); table.insert(t, 9); p(table.concat(t, ","))
p(pcall(table.insert, t, 10, 1))
p(pcall(table.insert, t))
p(pcall(table.insert, t, 1, 2, 3))
p(table.remove(t), table.remove(t, 1), table.concat(t, ","))
p(pcall(table.remove, t, 7))
p(table.remove({}), table.remove({}, 0), table.remove({}, 1))
p(pcall(table.concat, {1, {}, 3}))
p(table.concat({1, 2.5, "x"}, "-", 2, 3), table.concat({}, "x"), table.concat({1, 2, 3}, ", ", 3, 2))
p(pcall(table.concat, 5))
p(pcall(table.insert, nil, 1))
p(pcall(table.remove, setmetatable({}, {__index = function() end})))
local logged = {}
local proxy = setmetatable({}, {
  __len = function() return 3 end,
  __index = function(_, k) logged[#logged + 1] = "r" .. k return k end,
  __newindex = function(_, k, v) logged[#logged + 1] = "w" .. k .. "=" .. tostring(v) end,
})
table.insert(proxy, 2, "n"); table.remove(proxy, 1); p(table.concat(logged, " "))
p(table.concat(proxy, "+"))
print(table.concat(out, "\n"))
