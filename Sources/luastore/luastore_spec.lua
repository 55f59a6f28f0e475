-- The spec API of `luastore test`: `describe`, `it`, `expect` and `before_each`, busted-like. Loaded in each
-- spec file's fresh VM by SpecTest.swift (embedded into the binary at build time).
local spec = {}
local tests, names, hooks = {}, {}, {}
local befores = {}

local function render(value, depth)
  depth = depth or 0
  if type(value) == "string" then return string.format("%q", value) end
  if type(value) ~= "table" then return tostring(value) end
  if depth > 3 then return "{…}" end
  local parts = {}
  local n = #value
  for i = 1, n do parts[#parts + 1] = render(value[i], depth + 1) end
  for key, item in sortedpairs(value) do
    if not (math.type(key) == "integer" and key >= 1 and key <= n) then
      local name = type(key) == "string" and key:match("^[%a_][%w_]*$") and key or ("[" .. render(key, depth + 1) .. "]")
      parts[#parts + 1] = name .. " = " .. render(item, depth + 1)
    end
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function same(a, b, seen)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  seen = seen or {}
  if seen[a] == b then return true end
  seen[a] = b
  for key, item in pairs(a) do
    if not same(item, b[key], seen) then return false end
  end
  for key in pairs(b) do
    if a[key] == nil then return false end
  end
  return true
end

function spec.describe(name, body)
  if type(name) ~= "string" or type(body) ~= "function" then error("describe(name, function) expected", 2) end
  names[#names + 1] = name
  local saved = #befores
  body()
  for i = #befores, saved + 1, -1 do befores[i] = nil end
  names[#names] = nil
end

function spec.before_each(body)
  if type(body) ~= "function" then error("before_each(function) expected", 2) end
  befores[#befores + 1] = body
end

function spec.it(name, body)
  if type(name) ~= "string" or type(body) ~= "function" then error("it(name, function) expected", 2) end
  local full = #names > 0 and (table.concat(names, " ") .. " " .. name) or name
  local setup = {}
  for i = 1, #befores do setup[i] = befores[i] end
  tests[#tests + 1] = { name = full, body = body, setup = setup }
end

local function fail(message) error(message, 3) end

function spec.expect(actual)
  local positive = {}
  local negative = {}
  local function matcher(check, describe)
    return function(...)
      local ok = check(...)
      if not ok then fail(describe(...)) end
    end, function(...)
      local ok = check(...)
      if ok then fail("not " .. describe(...)) end
    end
  end
  local function add(name, check, describe)
    positive[name], negative[name] = matcher(check, describe)
  end
  add("equal", function(expected) return same(actual, expected) end,
      function(expected) return "expected " .. render(expected) .. ", got " .. render(actual) end)
  add("be", function(expected) return actual == expected end,
      function(expected) return "expected exactly " .. render(expected) .. ", got " .. render(actual) end)
  add("be_nil", function() return actual == nil end, function() return "expected nil, got " .. render(actual) end)
  add("be_truthy", function() return actual ~= nil and actual ~= false end, function() return "expected a truthy value, got " .. render(actual) end)
  add("be_falsy", function() return actual == nil or actual == false end, function() return "expected a falsy value, got " .. render(actual) end)
  add("contain", function(item)
    if type(actual) ~= "table" then return false end
    for _, value in pairs(actual) do if same(value, item) then return true end end
    return false
  end, function(item) return "expected " .. render(actual) .. " to contain " .. render(item) end)
  add("fail", function(pattern)
    if type(actual) ~= "function" then return false end
    local ok, problem = pcall(actual)
    if ok then return false end
    return pattern == nil or (type(problem) == "string" and problem:find(pattern, 1, true) ~= nil)
  end, function(pattern) return "expected the function to fail" .. (pattern and (" with " .. render(pattern)) or "") end)
  return { to = positive, to_not = negative }
end

function spec.count() return #tests end
function spec.name(index) return tests[index].name end
function spec.run(index)
  local test = tests[index]
  for i = 1, #test.setup do test.setup[i]() end
  test.body()
end

return spec
