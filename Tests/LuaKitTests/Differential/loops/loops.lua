-- string.rep and the table functions, which the sandbox runs in C of its own (with the time budget): results and messages
-- as Lua's.
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
-- table.sort: results, the order of equal elements, every read, comparison and write, and the errors.
local seed = 7
local function random(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n + 1 end
for _, n in ipairs({0, 1, 2, 3, 4, 10, 99, 100, 101, 1000, 5000}) do
  local numbers, words = {}, {}
  for i = 1, n do numbers[i] = random(n * 2) words[i] = "w" .. random(50) end
  table.sort(numbers) table.sort(words, function(a, b) return a > b end)
  local ok = true
  for i = 2, n do ok = ok and numbers[i - 1] <= numbers[i] and words[i - 1] >= words[i] end
  p(n, ok, table.concat(numbers, ",", 1, math.min(n, 12)), table.concat(words, ",", 1, math.min(n, 8)))
end
local records = {}
for i = 1, 300 do records[i] = { key = random(5), id = i } end
table.sort(records, function(a, b) return a.key < b.key end) -- (equal keys: the order Lua's algorithm leaves them in)
local ids = {} for i = 1, #records do ids[i] = records[i].id end
p(table.concat(ids, ","))
local sorted = {} for i = 1, 2000 do sorted[i] = i end
table.sort(sorted, function(a, b) return a > b end) p(sorted[1], sorted[1000], sorted[2000])
local steps, backing = {}, {5, 3, 6, 1, 4, 2}
local watched = setmetatable({}, {
  __len = function() return #backing end,
  __index = function(_, k) steps[#steps + 1] = "r" .. k return backing[k] end,
  __newindex = function(_, k, v) steps[#steps + 1] = "w" .. k .. "=" .. v backing[k] = v end,
})
table.sort(watched, function(a, b) steps[#steps + 1] = a .. "<" .. b return a < b end) p(table.concat(steps, " "))
p(pcall(table.sort, {3, 1, 2}, function() return true end))
p(pcall(table.sort, {1, 2, 3, 4, 5}, function(a, b) return a <= b end))
p(pcall(table.sort, {1, "x", 2}))
p(pcall(table.sort, {3, 2, 1}, 5))
p(pcall(table.sort, setmetatable({}, {__len = function() return 2 ^ 31 end})))
p(pcall(table.sort, 5))
p(pcall(table.sort, {2, 1}, function(a, b) error("no " .. a .. b) end))
local function big(x) return setmetatable({ v = x }, { __lt = function(a, b) return a.v < b.v end }) end
local objects = {} for i = 1, 50 do objects[i] = big(random(100)) end
table.sort(objects) local ok = true for i = 2, 50 do ok = ok and objects[i - 1].v <= objects[i].v end p("__lt", ok)
print(table.concat(out, "\n"))
