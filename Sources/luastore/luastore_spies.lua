-- luassert's spies, stubs and mocks for `luastore test` (luastore_assert.lua takes what this returns; it takes
-- luastore_values.lua's deep equality and matchers).
local V = ...
local deepcompare, isMatcher = V.deepcompare, V.isMatcher
local S = {}
-- `S.placed(s)`, when set, hears of each spy or stub put in a table's place (luastore_assert.lua's snapshots revert them).

local unpack, pack, insert = table.unpack, table.pack, table.insert

-- Spies, stubs and mocks ------------------------------------------------------------------------------------

local spyMeta = {}
local function isSpy(value) return type(value) == "table" and getmetatable(value) == spyMeta end

-- Whether a call's arguments (`actual`: the copies kept; `refs`: the values themselves) are what `expected` says,
-- as luassert's `matcharg` says: an expected argument that is a matcher tests the argument (`match.ref(v)` the
-- value itself, every other the copy); any other is compared deeply (where a matcher inside a table is a table).
local function argumentsMatch(expected, actual, refs)
  if expected.n ~= actual.n then return false end
  for i = 1, expected.n do
    local wanted = expected[i]
    if isMatcher(wanted) then
      if not wanted.test((refs ~= nil and wanted.byReference) and refs[i] or actual[i]) then return false end
    elseif not deepcompare(actual[i], wanted) then
      return false
    end
  end
  return true
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

-- (`original`: what `revert` gives back — a spy's own function, or what a spy or stub took the place of.)
local function newSpy(callback)
  local s = { calls = {}, returnvals = {}, callback = callback, responses = {}, original = callback }
  return setmetatable(s, spyMeta)
end

-- Whether a value can be called: a function, or a value whose metatable has `__call` (luassert's `util.callable`).
local function callable(value)
  if type(value) == "function" then return true end
  local meta = getmetatable(value)
  return type(meta) == "table" and meta.__call ~= nil
end

-- The values of a call, kept as luassert keeps them (copied deeply; `n` their count).
local function kept(values)
  local copy = { n = values.n }
  for i = 1, values.n do copy[i] = copied(values[i]) end
  return copy
end

spyMeta.__call = function(self, ...)
  local arguments = pack(...)
  self.calls[#self.calls + 1] = { vals = kept(arguments), refs = arguments }
  local results
  for _, response in ipairs(self.responses) do
    if argumentsMatch(response.arguments, arguments) then results = response.act(...) break end
  end
  if results == nil then results = pack(self.callback(...)) end
  -- (What it returned then, whatever becomes of it: kept as a call is, `{ vals = copies, refs = the values }`, as luassert keeps it.)
  self.returnvals[#self.returnvals + 1] = { vals = kept(results), refs = results }
  return unpack(results, 1, results.n)
end

local spyMethods = {
  clear = function(self)
    self.calls, self.returnvals = {}, {}
    return self
  end,
  revert = function(self)
    if self.target ~= nil and not self.reverted then self.target[self.key] = self.original end
    self.reverted = true
    return self.original
  end,
  called = function(self, times) return times == nil and #self.calls > 0 or #self.calls == times end,
  -- (Whether a call matched, and the values of the last that did, as luassert searches: from the last call back.)
  called_with = function(self, ...)
    local expected = pack(...)
    for i = #self.calls, 1, -1 do
      local call = self.calls[i]
      if argumentsMatch(expected, call.vals, call.refs) then return true, call.vals end
    end
    return false
  end,
  returned_with = function(self, ...)
    local expected = pack(...)
    for i = #self.returnvals, 1, -1 do
      local results = self.returnvals[i]
      if argumentsMatch(expected, results.vals, results.refs) then return true, results.vals end
    end
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
    local spyTable, expected = self, kept(pack(...)) -- (the arguments as they are now: a later change to them does not count)
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
  new = function(fn)
    if fn ~= nil and not callable(fn) then -- (luassert's words)
      error("Cannot spy on type '" .. type(fn) .. "', only on functions or callable elements", 2)
    end
    return newSpy(fn or function() end)
  end,
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

-- `stub(t, key, …)`: what it returns, or — one callable value — what it does (luassert's).
local function newStub(target, key, ...)
  local values = pack(...)
  if target ~= nil or key ~= nil then -- (luassert's checks and words; `stub()` alone is a blank stub)
    if type(target) ~= "table" or key == nil then
      error("stub.new(): Can only create stub on a table key, call with 2 params; table, key", 2)
    end
    if target[key] ~= nil and not callable(target[key]) then
      error("stub.new(): The element for which to create a stub must either be callable, or be nil", 2)
    end
  end
  local s = newSpy(values.n == 1 and callable(values[1]) and values[1] or function() return unpack(values, 1, values.n) end)
  s.original = nil
  if target ~= nil then
    s.target, s.key, s.original = target, key, target[key]
    target[key] = s
    if S.placed then S.placed(s) end
  end
  s.by_default = s -- `s.by_default.returns(…)`: what it does when no `on_call_with` matches
  return s
end

local stubApi = setmetatable({ new = newStub }, { __call = function(_, target, key, ...) return newStub(target, key, ...) end })

-- `action` ("clear" or "revert") done to every spy in a table and in the tables inside it, as luassert's `mock`
-- reaches them (each table once).
local function mockApply(object, action, seen)
  if type(object) ~= "table" then return end
  if isSpy(object) then return object[action](object) end
  seen = seen or {}
  if seen[object] then return object end
  seen[object] = true
  for _, value in pairs(object) do mockApply(value, action, seen) end
  return object
end

-- Every function of `target`, and of the tables in it (not a spy already, each table once), spied on — or, `stubbed`,
-- stubbed with `func` (luassert's `stub(t, key, func)`: a stub that does `func`, or returns the one value `func` is,
-- nil too) — as luassert's `mock` walks them.
local function mockWalk(target, stubbed, func, seen)
  if seen[target] then return target end
  seen[target] = true
  for key, value in pairs(target) do
    if type(value) == "function" then
      if stubbed then newStub(target, key, func) else spyApi.on(target, key) end
    elseif type(value) == "table" and not isSpy(value) then
      mockWalk(value, stubbed, func, seen)
    end
  end
  return target
end

local mockApi = setmetatable({
  revert = function(mocked) return mockApply(mocked, "revert") end,
  clear = function(mocked) return mockApply(mocked, "clear") end,
  new = function(target, stubbed, func) return mockWalk(target, stubbed, func, {}) end,
}, {
  -- `mock(t [, stubbed [, func]])`, as `mock.new`.
  __call = function(_, target, stubbed, func) return mockWalk(target, stubbed, func, {}) end,
})

S.isSpy, S.spyMethods, S.spyApi, S.stubApi, S.mockApi = isSpy, spyMethods, spyApi, stubApi, mockApi

return S
