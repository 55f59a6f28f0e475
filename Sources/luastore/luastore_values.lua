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

-- A number as luassert's formatters write one: every digit a double holds (`%.20g`), a float that looks whole with
-- `.0`, and `NaN`, `Inf`, `-Inf`; anything else as `tostring` writes it.
local function precise(value)
  if type(value) ~= "number" then return tostring(value) end
  if value ~= value then return "NaN" elseif value == 1 / 0 then return "Inf" elseif value == -1 / 0 then return "-Inf" end
  local text = format("%.20g", value)
  if mtype(value) == "float" and not text:find("[%.,]") then text = text:gsub("%d+", "%0.0", 1) end
  return text
end

-- luassert's parameters (`assert:set_parameter`): luastore_assert.lua sets how they are read.
V.parameter = function() return nil end

-- A table as luassert's formatter writes one: "(table: 0x…) {", then a line per key — `[key] = value`, the array's
-- keys first, then numbers, booleans, strings — nested tables indented down to `TableFormatLevel` levels (3), and the
-- keys on the way to where two tables differ (`crumbs`, from `deepcompare`) marked with `*`.
local keyPriority = { number = 1, boolean = 2, string = 3, table = 4, ["function"] = 5, userdata = 6, thread = 7 }
-- The terminal colours `TableErrorHighlightColor` names (lua-term's: "red", "bright.red", …; "none" or nil: none),
-- as luassert marks the keys on the way to a difference with them.
local colorCodes = {
  reset = 0, clear = 0, default = 0, bright = 1, dim = 2, underscore = 4, blink = 5, reverse = 7, hidden = 8,
  black = 30, red = 31, green = 32, yellow = 33, blue = 34, magenta = 35, cyan = 36, white = 37,
  onblack = 40, onred = 41, ongreen = 42, onyellow = 43, onblue = 44, onmagenta = 45, oncyan = 46, onwhite = 47,
}
local function colored(mark, color)
  if color == nil or color == "none" then return mark end
  for token in tostring(color):gmatch("[^%.]+") do
    local code = colorCodes[token]
    if code == nil then error("attempt to call a nil value (field '" .. token .. "')", 0) end -- (as lua-term fails)
    mark = "\27[" .. code .. "m" .. mark .. "\27[0m"
  end
  return mark
end
local function luassert_table(value, crumbs)
  local levels = V.parameter("TableFormatLevel") or 3
  local showRecursion = V.parameter("TableFormatShowRecursion")
  local mark = V.parameter("TableErrorHighlightCharacter") or "*"
  local color = V.parameter("TableErrorHighlightColor")
  local described
  local metatable = getmetatable(value)
  if metatable == nil then
    described = "(" .. tostring(value) .. ") "
  elseif not pcall(setmetatable, value, metatable) then
    described = "(table) " -- (a protected metatable: no identity shown)
  else
    setmetatable(value, nil)
    described = "(" .. tostring(value) .. ") "
    setmetatable(value, metatable)
  end
  crumbs = crumbs or {}
  local visiting = {}
  local function lines(t, level, onPath)
    if showRecursion and visiting[t] and visiting[t] > 0 then return "{ ... recursive }" end
    if next(t) == nil then return "{ }" end
    if level > levels and levels >= 0 then return "{ ... more }" end
    local keys, length = {}, #t
    for key in next, t do keys[#keys + 1] = key end -- (its own keys: never a `__pairs`, which a passing test's table may have)
    local function priority(key)
      if type(key) == "number" and key >= 1 and key <= length and key % 1 == 0 then return 0 end
      return keyPriority[type(key)] or 8
    end
    sort(keys, function(a, b)
      local pa, pb = priority(a), priority(b)
      if pa ~= pb then return pa < pb end
      if type(a) == "string" or type(a) == "number" then return a < b end
      if type(a) == "boolean" then return a end
      return false
    end)
    visiting[t] = (visiting[t] or 0) + 1
    local crumb = crumbs[#crumbs - level + 1]
    local text = "{"
    for _, key in ipairs(keys) do
      local item = t[key]
      local marked = onPath and key == crumb
      if type(item) == "table" then
        item = lines(item, level + 1, marked)
      elseif type(item) == "string" then
        item = "'" .. item .. "'"
      end
      local char = marked and mark or ""
      text = text .. format("\n%s%s[%s] = %s", (" "):rep(level * 2 - #char), char == "" and "" or colored(char, color), precise(key), precise(item))
    end
    visiting[t] = visiting[t] - 1
    return text .. " }"
  end
  return described .. lines(value, 1, true)
end

-- Matchers (match._, match.is_string(), …) compare inside `same` and the spies' `called_with`.
local matcherMeta = {}
local function isMatcher(value) return getmetatable(value) == matcherMeta end
matcherMeta.__call = function(self, value) return self.test(value) end -- (a matcher is called as luassert's are)

-- luassert's "(type) value" lines, as its formatters write them (a string in single quotes, as it is; `(nil)`; a
-- number with every digit; a table line by line), unless a formatter a spec added shows the value.
local typed
function typed(value, extra)
  for i = 1, #formatters do
    local shown = formatters[i](value, extra)
    if shown ~= nil then return shown end
  end
  local kind = type(value)
  if kind == "string" then return "(string) '" .. value .. "'" end
  if kind == "nil" then return "(nil)" end
  if kind == "number" then return "(number) " .. precise(value) end
  if isMatcher(value) and value.name ~= nil then -- (`(matcher) is.match((string) 'x')`, `(matcher) no.string()`)
    local parts = {}
    for i = 1, value.arguments.n do parts[i] = typed(value.arguments[i]) end
    return "(matcher) " .. (value.mod and "is." or "no.") .. value.name .. "(" .. concat(parts, ", ") .. ")"
  end
  if kind == "table" then return luassert_table(value, extra and extra.crumbs) end
  if kind == "function" then -- (where it was defined, as luassert shows a function: `function: 0x… @ line 3 in @spec/a_spec.lua`)
    local info = debug and debug.getinfo and debug.getinfo(value, "S")
    if info then return render(value) .. " @ line " .. tostring(info.linedefined) .. " in " .. tostring(info.source) end
  end
  if kind == "userdata" or kind == "thread" then return "(" .. kind .. ") '" .. render(value) .. "'" end
  return "(" .. kind .. ") " .. render(value)
end

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
  -- (Unequal: false, and the keys on the way to the first difference, innermost first — luassert's `crumbs`.)
  for key, item in next, t1 do
    local other = t2[key]
    if other == nil then return false, { key } end
    local equal, crumbs = deepcompare(item, other, nil, cycles, thresh1, thresh2)
    if not equal then
      crumbs = crumbs or {}
      crumbs[#crumbs + 1] = key
      return false, crumbs
    end
  end
  for key in next, t2 do
    if t1[key] == nil then return false, { key } end
  end
  return true
end

V.deepcompare = deepcompare
V.sortedKeys, V.render, V.typed, V.formatters = sortedKeys, render, typed, formatters
V.same, V.matcherMeta, V.isMatcher = same, matcherMeta, isMatcher

return V
