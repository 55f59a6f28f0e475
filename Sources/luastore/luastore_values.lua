-- Values as luassert shows and compares them, for `luastore test` (luastore_assert.lua and luastore_spies.lua take
-- what this returns): rendering in failure messages, deep equality with matchers inside, and what a matcher is.
local V = {}

local concat, sort = table.concat, table.sort
local format, mtype = string.format, math.type

-- Rendering values (in failure messages) -------------------------------------------------------------------

local keyOrder = { boolean = 1, number = 2, string = 3 }

local function sortedKeys(t)
  local keys = {}
  for key in next, t do keys[#keys + 1] = key end -- (the own keys: never a `__pairs`)
  sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return (keyOrder[ta] or 4) < (keyOrder[tb] or 4) end
    if ta == "number" or ta == "string" then return a < b end
    if ta == "boolean" then return not a and b end
    return false
  end)
  return keys
end

local function render(value, depth, seen)
  depth = depth or 0
  if type(value) == "string" then return format("%q", value) end
  if type(value) ~= "table" then return tostring(value) end
  seen = seen or {}
  if seen[value] then return "{<cycle>}" end
  if depth > 3 then return "{…}" end
  seen[value] = true
  local parts = {}
  local n = #value
  for i = 1, n do parts[#parts + 1] = render(value[i], depth + 1, seen) end
  for _, key in ipairs(sortedKeys(value)) do
    if not (mtype(key) == "integer" and key >= 1 and key <= n) then
      local name = type(key) == "string" and key:match("^[%a_][%w_]*$") and key or ("[" .. render(key, depth + 1, seen) .. "]")
      parts[#parts + 1] = name .. " = " .. render(value[key], depth + 1, seen)
    end
  end
  seen[value] = nil
  return "{" .. concat(parts, ", ") .. "}"
end

-- The formatters a spec added (`assert:add_formatter(f)`), the newest first: the first to give a string for a
-- value is how the value is shown, as luassert shows it.
local formatters = {}

-- luassert's "(type) value" lines (a string as its formatter writes one: in single quotes, as it is), unless a
-- formatter a spec added shows the value.
local function typed(value, extra)
  for i = 1, #formatters do
    local shown = formatters[i](value, extra)
    if shown ~= nil then return shown end
  end
  if type(value) == "string" then return "(string) '" .. value .. "'" end
  return "(" .. type(value) .. ") " .. render(value)
end

-- The arguments of a call (a `pack`ed list), each typed: "(number) 1, (string) 'x'".
local function typedList(list)
  if list.n == 0 then return "(no values)" end
  local parts = {}
  for i = 1, list.n do parts[i] = typed(list[i]) end
  return concat(parts, ", ")
end

-- Matchers (match._, match.is_string(), …) compare inside `same` and the spies' `called_with`.
local matcherMeta = {}
local function isMatcher(value) return getmetatable(value) == matcherMeta end
matcherMeta.__call = function(self, value) return self.test(value) end -- (a matcher is called as luassert's are)

local function same(a, b, seen)
  if isMatcher(b) then return b.test(a) end
  if isMatcher(a) then return a.test(b) end
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end -- (NaN is not NaN, as luassert compares)
  seen = seen or {}
  if seen[a] == b then return true end
  seen[a] = b
  for key, item in next, a do -- (the tables' own keys, as luassert walks them: never a `__pairs`)
    if not same(item, b[key], seen) then return false end
  end
  for key in next, b do
    if a[key] == nil then return false end
  end
  return true
end

-- luassert's deep comparison (`util.deepcompare`), which its `same`, `unique`, `has_error` and the spies' arguments
-- use: values that are not both tables by `==`; two tables by their own keys, deeply — but by `==` where they
-- share a metatable with `__eq` (not at the top, `ignoreMeta`); a matcher is a table like any other there (luassert
-- matches only a call's arguments themselves against matchers: `called_with`). Cycles end as luassert ends them.
local getmeta = debug and debug.getmetatable or getmetatable
local function deepcompare(t1, t2, ignoreMeta, cycles, thresh1, thresh2)
  if type(t1) ~= "table" or type(t2) ~= "table" then return t1 == t2 end
  local meta1, meta2 = getmeta(t1), getmeta(t2)
  if meta1 and meta1 == meta2 and meta1.__eq then
    if not ignoreMeta then return t1 == t2 end
  elseif rawequal(t1, t2) then
    return true
  end
  cycles = cycles or { {}, {} }
  thresh1, thresh2 = thresh1 or 1, thresh2 or 1
  cycles[1][t1], cycles[2][t2] = cycles[1][t1] or 0, cycles[2][t2] or 0
  if cycles[1][t1] == 1 or cycles[2][t2] == 1 then
    thresh1, thresh2 = cycles[1][t1] + 1, cycles[2][t2] + 1
  end
  if cycles[1][t1] > thresh1 and cycles[2][t2] > thresh2 then return true end
  cycles[1][t1], cycles[2][t2] = cycles[1][t1] + 1, cycles[2][t2] + 1
  for key, item in next, t1 do
    local other = t2[key]
    if other == nil or not deepcompare(item, other, nil, cycles, thresh1, thresh2) then return false end
  end
  for key in next, t2 do
    if t1[key] == nil then return false end
  end
  return true
end

V.deepcompare = deepcompare
V.sortedKeys, V.render, V.typed, V.typedList, V.formatters = sortedKeys, render, typed, typedList, formatters
V.same, V.matcherMeta, V.isMatcher = same, matcherMeta, isMatcher

return V
