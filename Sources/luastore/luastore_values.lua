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

-- luassert's "(type) value" lines (a string as its formatter writes one: in single quotes, as it is).
local function typed(value)
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

V.sortedKeys, V.render, V.typed, V.typedList = sortedKeys, render, typed, typedList
V.same, V.matcherMeta, V.isMatcher = same, matcherMeta, isMatcher

return V
