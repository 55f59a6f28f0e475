-- luassert's spies, stubs and mocks for `luastore test` (luastore_assert.lua takes what this returns; it takes
-- luastore_values.lua's deep equality and matchers).
local V = ...
local same, isMatcher = V.same, V.isMatcher
local S = {}
-- `S.placed(s)`, when set, hears of each spy or stub put in a table's place (luastore_assert.lua's snapshots revert them).

local unpack, pack, insert = table.unpack, table.pack, table.insert

-- Spies, stubs and mocks ------------------------------------------------------------------------------------

local spyMeta = {}
local function isSpy(value) return type(value) == "table" and getmetatable(value) == spyMeta end

-- Whether a call's arguments (`actual`: the copies kept; `refs`: the values themselves) are what `expected` says:
-- `match.ref(v)` compares with the value itself, as luassert's does, everything else with the copy.
local function argumentsMatch(expected, actual, refs)
  if expected.n ~= actual.n then return false end
  for i = 1, expected.n do
    local wanted = expected[i]
    local given = (refs ~= nil and isMatcher(wanted) and wanted.byReference) and refs[i] or actual[i]
    if not same(given, wanted) then return false end
  end
  return true
end

local function newSpy(callback)
  local s = { calls = {}, returnvals = {}, callback = callback, responses = {} }
  return setmetatable(s, spyMeta)
end

-- A copy of a value a spy was called with, as luassert keeps it: tables copied deeply (a test that changes an
-- argument after the call still sees what was passed), matchers and spies as they are.
local function copied(value, seen)
  if type(value) ~= "table" or isMatcher(value) or getmetatable(value) == spyMeta then return value end
  seen = seen or {}
  if seen[value] then return seen[value] end
  local copy = {}
  seen[value] = copy
  for key, item in next, value do copy[copied(key, seen)] = copied(item, seen) end
  local meta = getmetatable(value)
  if type(meta) == "table" then pcall(setmetatable, copy, meta) end
  return copy
end

spyMeta.__call = function(self, ...)
  local arguments = pack(...)
  local kept = { n = arguments.n }
  for i = 1, arguments.n do kept[i] = copied(arguments[i]) end
  self.calls[#self.calls + 1] = { vals = kept, refs = arguments }
  local results
  for _, response in ipairs(self.responses) do
    if argumentsMatch(response.arguments, arguments) then results = response.act(...) break end
  end
  if results == nil then results = pack(self.callback(...)) end
  self.returnvals[#self.returnvals + 1] = results
  return unpack(results, 1, results.n)
end

local spyMethods = {
  clear = function(self)
    self.calls, self.returnvals = {}, {}
    return self
  end,
  revert = function(self)
    if self.target ~= nil then self.target[self.key] = self.original end
    return self.original
  end,
  called = function(self, times) return times == nil and #self.calls > 0 or #self.calls == times end,
  called_with = function(self, ...)
    local expected = pack(...)
    for _, call in ipairs(self.calls) do if argumentsMatch(expected, call.vals, call.refs) then return true end end
    return false
  end,
  returned_with = function(self, ...)
    local expected = pack(...)
    for _, results in ipairs(self.returnvals) do if argumentsMatch(expected, results) then return true end end
    return false
  end,
  -- Stubs: what they return or do, in general or for given arguments.
  returns = function(self, ...)
    local values = pack(...)
    self.callback = function() return unpack(values, 1, values.n) end
    return self
  end,
  invokes = function(self, fn)
    self.callback = fn
    return self
  end,
  on_call_with = function(self, ...)
    local spyTable, expected = self, pack(...)
    local responses = {}
    -- (`.returns(…)` and `:returns(…)` alike.)
    responses.returns = function(first, ...)
      local values = rawequal(first, responses) and pack(...) or pack(first, ...)
      insert(spyTable.responses, { arguments = expected, act = function() return values end })
      return spyTable
    end
    responses.invokes = function(first, fn)
      if not rawequal(first, responses) then fn = first end
      insert(spyTable.responses, { arguments = expected, act = function(...) return pack(fn(...)) end })
      return spyTable
    end
    return responses
  end,
}

-- A spy's methods work with '.' as with ':' (luassert's stubs: `s.returns(1)` is `s:returns(1)`).
spyMeta.__index = function(self, key)
  local method = spyMethods[key]
  if method == nil then return nil end
  return function(first, ...)
    if rawequal(first, self) then return method(self, ...) end
    return method(self, first, ...)
  end
end


local spyApi = setmetatable({
  new = function(fn) return newSpy(fn or function() end) end,
  is_spy = isSpy,
  on = function(target, key)
    if type(target) ~= "table" then error("spy.on(table, key) expected", 2) end
    local original = target[key]
    local meta = getmetatable(original)
    if type(original) ~= "function" and not (type(meta) == "table" and meta.__call) then -- (luassert's words)
      error("Cannot spy on type '" .. type(original) .. "', only on functions or callable elements", 2)
    end
    local s = newSpy(function(...) if type(original) == "function" then return original(...) end end)
    s.target, s.key, s.original = target, key, original
    target[key] = s
    if S.placed then S.placed(s) end
    return s
  end,
}, { __call = function(self, fn) return self.new(fn) end })

local function newStub(target, key, ...)
  local values = pack(...)
  local s = newSpy(function() return unpack(values, 1, values.n) end)
  if target ~= nil then
    s.target, s.key, s.original = target, key, target[key]
    target[key] = s
    if S.placed then S.placed(s) end
  end
  s.by_default = s -- `s.by_default.returns(…)`: what it does when no `on_call_with` matches
  return s
end

local stubApi = setmetatable({ new = newStub }, { __call = function(_, target, key, ...) return newStub(target, key, ...) end })

local mockApi = setmetatable({
  revert = function(mocked)
    for key, value in pairs(mocked) do if isSpy(value) then value:revert() end end
  end,
  clear = function(mocked)
    for _, value in pairs(mocked) do if isSpy(value) then value:clear() end end
  end,
}, {
  -- Every function of the table, and of the tables in it (not a spy already, each table once), as luassert's
  -- `mock` walks them.
  __call = function(self, target, stubbed, seen)
    seen = seen or {}
    if seen[target] then return target end
    seen[target] = true
    for key, value in pairs(target) do
      if type(value) == "function" then
        if stubbed then newStub(target, key) else spyApi.on(target, key) end
      elseif type(value) == "table" and not isSpy(value) then
        self(value, stubbed, seen)
      end
    end
    return target
  end,
})

S.isSpy, S.spyMethods, S.spyApi, S.stubApi, S.mockApi = isSpy, spyMethods, spyApi, stubApi, mockApi

return S
