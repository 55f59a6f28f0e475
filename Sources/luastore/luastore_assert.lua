-- luassert for `luastore test` (SpecTest.swift loads it, given luastore_values.lua and luastore_spies.lua, before
-- `luastore_spec.lua`, which takes it as its argument):
-- `assert` with its chains and assertions, spies, stubs, mocks, matchers, deep equality, and how values are
-- rendered in failure messages. It remembers the messages of the assertions that failed in the running test, so
-- that the blocks can tell a failure from an error as busted does (`forget`, `failed`).
local V, S = ...
local B = {}

local unpack, pack, concat = table.unpack, table.pack, table.concat
local format = string.format

-- The messages of the assertions that failed in the running test (without their "file:line: "): a test that
-- raises one of them failed; any other error is an error, as busted tells them apart.
local failedAssertions = {}
function B.forget() failedAssertions = {} end
function B.failed(message) return failedAssertions[message] == true end
-- (`assert(false, t)` raises `t` itself: the value, not a message, tells it is an assertion's.)

-- (What values look like and how they compare: luastore_values.lua; spies, stubs and mocks: luastore_spies.lua.)
local sortedKeys, render, typed = V.sortedKeys, V.render, V.typed
local same, deepcompare, matcherMeta, isMatcher = V.same, V.deepcompare, V.matcherMeta, V.isMatcher
local isSpy, spyMethods, spyApi, stubApi, mockApi = S.isSpy, S.spyMethods, S.spyApi, S.stubApi, S.mockApi

-- luassert: assert, its chains and its assertions -------------------------------------------------------------

local fillers = { a = true, an = true, the = true, is = true, are = true, was = true, has = true, does = true }
local negations = { ["not"] = true, no = true }
local assertions = {}   -- name -> function(arguments, state) -> ok, message, negatedMessage (each a text, or a
                        -- function making it: called only when the assertion fails)
local modifiers = {}    -- name -> function(state, arguments): binds a value (spy, array, message)

local arities = {}       -- name -> how many arguments it takes: the one after them is the failure's own message
-- What specs register (`assert:register(namespace, name, …)`), as luassert keeps it: modifiers that are words of a
-- chain (`assert.my_modifier.equal(…)`, each `callback(state)` run before the assertion, or `callback(state,
-- arguments, level)` when the chain is called at it), matchers (`match.is_mine(…)`: `callback(state, arguments,
-- level)` gives the test of a value), the assertions registered (their state is luassert's), and any other
-- namespace, kept.
local userModifiers, userMatchers, userAssertions, namespaces = {}, {}, {}, {}
local formatters = V.formatters -- (the newest first: `assert:add_formatter`)

local function register(names, check, arity)
  for _, name in ipairs(names) do assertions[name], arities[name] = check, arity end
end

local function fail(message, level)
  failedAssertions[message] = true
  error(message, level + 1)
end

local chainMeta = {}

-- Whether a value reads as text: a string, or a value whose metatable has a `__tostring` (luassert's
-- `util.hastostring`).
local function hasToString(value)
  if type(value) == "string" then return true end
  local meta = getmetatable(value)
  return type(meta) == "table" and type(meta.__tostring) == "function"
end

local function chain(state)
  return setmetatable({ state = state }, chainMeta)
end

local function extend(state, key)
  local tokens = { unpack(state.tokens) }
  for token in key:lower():gmatch("[^_%.]+") do tokens[#tokens + 1] = token end -- (any case: `assert.is.Nil`, as luassert)
  return { tokens = tokens, bound = state.bound, message = state.message, kind = state.kind, flipped = state.flipped }
end

-- The words of a chain no assertion or modifier takes, as luassert names them (`util.extract_keys`: from the end,
-- each token joined to the ones after it until a known name is found; what is left when the tokens run out).
local function unknownKey(tokens, fallback)
  local function known(key)
    return assertions[key] or modifiers[key] or fillers[key] or negations[key] or userModifiers[key]
  end
  local key, i = nil, #tokens
  while i > 0 do
    local token = tokens[i]
    key = key and (token .. "_" .. key) or token
    local longer = i > 1 and (tokens[i - 1] .. "_" .. key) or nil
    while i > 1 and longer and assertions[longer] do
      key = longer
      i = i - 1
      longer = tokens[i] .. "_" .. key
    end
    if known(key) then key = nil end
    i = i - 1
  end
  return key or fallback
end

-- Resolves a chain's tokens: fillers dropped, negations counted, the rest joined into the assertion's name.
local function resolve(tokens)
  local negated, words, all, mods = false, {}, {}, {}
  for _, token in ipairs(tokens) do
    if negations[token] then negated = not negated
    elseif userModifiers[token] then mods[#mods + 1] = userModifiers[token]
    else
      all[#all + 1] = token
      if not fillers[token] then words[#words + 1] = token end
    end
  end
  -- (A name registered with a filler in it, `has_property`, is found whole, as luassert finds it: the longest
  -- registered name the chain ends with, word for word — `assert.is_not.has_property(…)` too, but not
  -- `assert.has_no.property(…)`, whose words are not the name's.)
  if #all > #words then
    for first = 1, #tokens - 1 do
      local whole = concat(tokens, "_", first)
      if assertions[whole] or modifiers[whole] then
        local before = false
        for i = 1, first - 1 do if negations[tokens[i]] then before = not before end end
        return whole, before, mods
      end
    end
  end
  return concat(words, "_"), negated, mods
end

-- The state a registered assertion, modifier or matcher is given, as luassert's: `mod` false when negated,
-- `failure_message` the message given (`assert.message(m)`), `tokens`, and what a modifier bound (`payload`).
local function luassertState(state, negated, tokens)
  return { mod = not negated, failure_message = state.message, tokens = tokens or state.tokens, payload = state.bound }
end

chainMeta.__index = function(self, key)
  if type(key) ~= "string" then return nil end
  local state = rawget(self, "state")
  local extended = extend(state, key)
  local name = resolve(extended.tokens)
  local modifier = modifiers[name]
  if modifier then
    return function(...)
      local bound = { tokens = {}, bound = state.bound, message = state.message, kind = state.kind }
      for _, token in ipairs(extended.tokens) do
        if token ~= name and (negations[token] or fillers[token]) then bound.tokens[#bound.tokens + 1] = token end
      end
      modifier(bound, pack(...))
      return chain(bound)
    end
  end
  return chain(extended)
end

chainMeta.__call = function(self, ...)
  local state = rawget(self, "state")
  local name, negated, mods = resolve(state.tokens)
  if state.flipped then negated = not negated end
  local check = assertions[name]
  if check == nil and name == "" and #mods > 0 then
    -- A registered modifier called (`assert.my_modifier(x)`): each of the chain's is given the arguments; the
    -- chain goes on from its state, without its words, as luassert's does.
    local bound = luassertState(state, negated)
    for _, modifier in ipairs(mods) do modifier(bound, pack(...), 2) end
    return chain({ tokens = {}, bound = bound.payload, message = bound.failure_message, kind = state.kind, flipped = not bound.mod })
  end
  if check == nil then error("luassert: unknown modifier/assertion: '" .. unknownKey(state.tokens, name) .. "'", 2) end
  local arguments = pack(...)
  if #mods > 0 or userAssertions[name] then
    -- (Registered modifiers run before the assertion, on luassert's state: they may negate it or give it a message.)
    local bound = luassertState(state, negated)
    for _, modifier in ipairs(mods) do modifier(bound) end
    negated = not bound.mod
    state = { tokens = state.tokens, bound = bound.payload, message = bound.failure_message, kind = state.kind, luassert = bound }
  end
  local ok, message, negatedMessage, returned, given = check(arguments, state)
  if negated then ok, message = not ok, negatedMessage end
  if not ok then
    -- (An assertion's words are made only when it fails — luassert formats a failure's values then, and a
    -- formatter a spec added runs for those alone: `message` is a function making them.)
    if type(message) == "function" then message = message() end
    -- (A message given after the assertion's arguments — `assert.are.equal(1, 2, "numbers differ")` — or by
    -- `assert.message(m)` comes first, on a line of its own, as luassert writes it. A registered assertion whose
    -- message `say` does not know has none: then luassert says only "assertion failed!".)
    local arity = arities[name]
    local own = given
    if own == nil and arity ~= nil and arguments.n > arity then own = arguments[arity + 1] end
    if own == nil then own = state.message end
    if own ~= nil then
      -- (A message that reads as text is that text; any other value is shown as luassert shows values.)
      own = hasToString(own) and tostring(own) or typed(own)
      message = message and own .. "\n" .. message or own
    end
    fail(message or "assertion failed!", 2)
  end
  -- (What luassert's assertion gives back, held or negated: `has_match`'s captures, the error `has_error` caught.)
  if returned ~= nil then return unpack(returned, 1, returned.n) end
  return ...
end

-- A registered assertion's message, as luassert makes it: `say`'s text for the key given, with the arguments shown
-- as failure messages show them (nil when `say` does not know the key). Where no `say` module is found, the key is
-- taken as the text itself, a format of the arguments.
local function sayText(key, arguments)
  if key == nil then return nil end
  local shown = { n = arguments.n }
  for i = 1, arguments.n do shown[i] = typed(arguments[i]) end
  local found, say = pcall(require, "say")
  local meta = found and type(say) == "table" and getmetatable(say)
  if meta and meta.__call then
    local ok, text = pcall(say, key, shown)
    if ok then return text end
  end
  local ok, text = pcall(format, tostring(key), unpack(shown, 1, shown.n))
  return ok and text or tostring(key)
end

-- `assert:register(namespace, name, fn, positive, negative)`, luassert's way to add to a namespace: an assertion
-- (`fn(state, arguments, level)` says whether it holds; the messages are `say` keys, or texts, given the
-- arguments), a modifier, a matcher, or anything else (kept, as luassert keeps it). A name is found in any case.
local function registerIn(_, kind, name, fn, positive, negative)
  if type(kind) ~= "string" or type(name) ~= "string" then error("assert:register(namespace, name, callback, …) expected", 2) end
  name = name:lower()
  if kind == "modifier" then
    userModifiers[name] = fn
  elseif kind == "matcher" then
    userMatchers[name] = fn
  elseif kind == "assertion" then
    if type(fn) ~= "function" then error("assert:register: an assertion's callback must be a function", 2) end
    userAssertions[name] = true
    arities[name] = nil
    assertions[name] = function(arguments, state)
      local bound = state.luassert or luassertState(state, false)
      return fn(bound, arguments, 3) and true or false, function() return sayText(positive, arguments) end,
        function() return sayText(negative, arguments) end
    end
  else
    namespaces[kind] = namespaces[kind] or {}
    namespaces[kind][name] = { callback = fn, name = name, positive_message = positive, negative_message = negative }
  end
end

-- `assert:unregister(namespace, name)`: what was registered there under that name is forgotten.
local function unregisterIn(_, kind, name)
  if type(kind) ~= "string" or type(name) ~= "string" then error("assert:unregister(namespace, name) expected", 2) end
  name = name:lower()
  if kind == "modifier" then userModifiers[name] = nil
  elseif kind == "matcher" then userMatchers[name] = nil
  elseif kind == "assertion" then assertions[name], userAssertions[name], arities[name] = nil, nil, nil
  elseif namespaces[kind] then namespaces[kind][name] = nil
  end
end

-- luassert's state: parameters (`assert:set_parameter(name, value)`, read back by `get_parameter`), formatters
-- (`assert:add_formatter(f)`) and snapshots (`assert:snapshot()`): reverting one — `snap:revert()` or `snap()` —
-- reverts the snapshots taken after it, the spies and stubs put in a table's place since it was taken, and the
-- parameters set and formatters added since.
local snapshotMeta, levelMeta = {}, {}
local current = { parameters = {}, spies = {}, formatters = {} }
local function removeFormatter(formatter)
  for i = 1, #formatters do
    if formatters[i] == formatter then table.remove(formatters, i) return end
  end
end
local function revertSnapshot(snapshot)
  if getmetatable(snapshot) ~= snapshotMeta then error("Value provided is not a valid snapshot", 2) end
  if snapshot.next then revertSnapshot(snapshot.next) end
  for i = #snapshot.spies, 1, -1 do snapshot.spies[i]:revert() end
  for _, formatter in ipairs(snapshot.formatters) do removeFormatter(formatter) end
  snapshot.spies, snapshot.parameters, snapshot.formatters = {}, {}, {}
  setmetatable(snapshot, nil) -- (reverted: no longer a snapshot, as luassert's)
  current = snapshot.previous
  current.next = nil
end
snapshotMeta.__index = { revert = revertSnapshot }
snapshotMeta.__call = revertSnapshot
S.placed = function(s) current.spies[#current.spies + 1] = s end
local NIL = {} -- (a parameter set to nil in a snapshot: nil there, whatever an earlier snapshot holds)
local stateApi = {
  set_parameter = function(_, name, value)
    if value == nil then value = NIL end
    current.parameters[name] = value
  end,
  get_parameter = function(_, name)
    local snapshot = current
    while snapshot ~= nil do
      local value = snapshot.parameters[name]
      if value == NIL then return nil end
      if value ~= nil then return value end
      snapshot = snapshot.previous
    end
    return nil
  end,
  snapshot = function()
    local snapshot = setmetatable({ parameters = {}, spies = {}, formatters = {}, previous = current }, snapshotMeta)
    current.next = snapshot
    current = snapshot
    return snapshot
  end,
  add_spy = function(_, s) S.placed(s) end,
  -- A formatter shows a value in failure messages (a string), or leaves it to the next (nil); the newest first.
  add_formatter = function(_, formatter)
    table.insert(formatters, 1, formatter)
    table.insert(current.formatters, 1, formatter) -- (a snapshot's too, the newest first, as luassert lists them)
  end,
  remove_formatter = function(_, formatter) removeFormatter(formatter) end,
  -- `assert:format(args)`: each of `args[1..n]` as failure messages show it (but those `args.nofmt` names),
  -- in place; returns `args`.
  format = function(_, args)
    local nofmt, fmtargs = args.nofmt or {}, args.fmtargs or {}
    for i = 1, args.n or #args do
      if not nofmt[i] then args[i] = typed(args[i], fmtargs[i]) end
    end
    return args
  end,
  -- `assert(v, message, assert:level(n))` raises at level n, as luassert's.
  level = function(_, level) return setmetatable({ level = level }, levelMeta) end,
  get_level = function(_, level)
    if getmetatable(level) ~= levelMeta then return nil end
    return level.level
  end,
  register = registerIn,
  unregister = unregisterIn,
}
-- (How luastore_values.lua reads the parameters a table's rendering follows: `TableFormatLevel` and the others.)
V.parameter = function(name) return stateApi.get_parameter(nil, name) end

local assertTable = setmetatable({}, {
  __index = function(_, key)
    if type(key) ~= "string" then return nil end
    if stateApi[key] then return stateApi[key] end
    return chainMeta.__index(chain({ tokens = {} }), key)
  end,
  -- `assert(v, message, ...)` is Lua's assert: all its arguments back, or an error with the message (raised at
  -- the level `assert:level(n)` gives, as luassert's).
  __call = function(_, value, message, level, ...)
    if not value then
      if message == nil then message = "assertion failed!" end
      if type(message) == "string" or type(message) == "table" then failedAssertions[message] = true end
      error(message, (getmetatable(level) == levelMeta and tonumber(level.level) or 1) + 1)
    end
    return value, message, level, ...
  end,
})

-- Modifiers that bind a value: assert.spy(s), assert.stub(s), assert.array(t), assert.message(m).
modifiers.spy = function(state, arguments) -- (`assert.spy(s, "message")`: the failure's message too, as luassert takes it)
  state.bound, state.kind = arguments[1], "spy"
  if arguments[2] ~= nil then state.message = arguments[2] end
end
modifiers.stub = modifiers.spy
modifiers.array = function(state, arguments) state.bound, state.kind = arguments[1], "array" end
modifiers.message = function(state, arguments) state.message = arguments[1] end

-- luassert's refusal of an assertion given too few arguments: a failure, in its words.
local function needs(a, name, count)
  if a.n < count then
    fail("the '" .. name .. "' function requires a minimum of " .. count .. " arguments, got: " .. a.n, 4)
  end
end

-- luassert's words for a comparison: the headline, what was passed in, and what was expected — or, negated, what
-- was not ("Did not expect:").
local function compareMessage(headline, actual, expected, crumbs, negated)
  local where = crumbs and { crumbs = crumbs } or nil
  return headline .. "\nPassed in:\n" .. typed(actual, where) .. (negated and "\nDid not expect:\n" or "\nExpected:\n")
    .. typed(expected, where)
end

register({ "same" }, function(a)
  needs(a, "same", 2)
  local expected, actual = a[1], a[2]
  local equal, crumbs = deepcompare(expected, actual, true)
  return equal, function() return compareMessage("Expected objects to be the same.", actual, expected, crumbs) end,
    function() return compareMessage("Expected objects to not be the same.", actual, expected, crumbs, true) end
end, 2)

register({ "equals", "equal" }, function(a)
  needs(a, "equals", 2)
  local expected, actual = a[1], a[2]
  return actual == expected, function() return compareMessage("Expected objects to be equal.", actual, expected) end,
    function() return compareMessage("Expected objects to not be equal.", actual, expected, nil, true) end
end, 2)

register({ "near" }, function(a, state)
  needs(a, "near", 3)
  local numbers = { tonumber(a[1]), tonumber(a[2]), tonumber(a[3]) } -- (numeric strings too, as luassert)
  for i = 1, 3 do
    -- (luassert shows each argument as it checks it, whether or not the assertion holds: a formatter a spec
    -- added sees the three — but not where a matcher runs it, which showed its own as it was made.)
    local shown = not state.matching and typed(a[i])
    if numbers[i] == nil then
      fail("bad argument #" .. i .. " to 'near' (number or object convertible to a number expected, got " .. (shown or typed(a[i])) .. ")", 3)
    end
  end
  local expected, actual, tolerance = numbers[1], numbers[2], numbers[3]
  local function around() return typed(a[1]) .. " +/- " .. tostring(tolerance) end
  return actual >= expected - tolerance and actual <= expected + tolerance,
    function() return "Expected values to be near.\nPassed in:\n" .. typed(a[2]) .. "\nExpected:\n" .. around() end,
    function() return "Expected values to not be near.\nPassed in:\n" .. typed(a[2]) .. "\nDid not expect:\n" .. around() end
end, 3)

-- `matches` and `error_matches` take `init` and `plain` after the pattern, and a failure's message among them: the
-- first argument from `from` on that is neither a boolean nor a number (luassert's rule). The message, `init`, `plain`.
local function messageAndOptions(a, from)
  local options, count, message = {}, 0, nil
  for i = from, a.n do
    local item = a[i]
    if message == nil and item and type(item) ~= "boolean" and not tonumber(item) then
      message = item
    else -- (by position: `matches(p, s, nil, true)` is no `init` and `plain`)
      count = count + 1
      options[count] = item
    end
  end
  return message, options[1], options[2]
end

register({ "matches", "match" }, function(a, state)
  local given, init, plain = messageAndOptions(a, 3)
  local pattern, actual = a[1], a[2]
  if not state.matching then typed(actual) end -- (luassert shows the value as it checks it, as `near` does its own)
  if type(actual) ~= "string" and type(actual) ~= "number" then
    return false, function() return compareMessage("Expected a string to match the pattern.", actual, pattern) end,
      function() return compareMessage("Expected the value not to match the pattern.", actual, pattern) end
  end
  -- (What luassert's `matches` returns: the captures — the pattern, when plain — or nothing.)
  local found = tostring(actual):find(pattern, init, plain) ~= nil
  local captures = plain and (found and pack(pattern) or pack()) or pack(tostring(actual):match(pattern, init))
  return found, function() return compareMessage("Expected strings to match.", actual, pattern) end,
    function() return compareMessage("Expected strings not to match.", actual, pattern, nil, true) end, captures, given
end)

register({ "unique" }, function(a)
  -- (`unique(list [, deep] [, message])`, or the message second and `deep` third, as luassert reads them.)
  local list, deep, given = a[1], nil, nil
  if type(a[2]) == "boolean" or (a[2] == nil and a.n > 2) then
    deep, given = a[2], a[3]
  else
    deep, given = type(a[3]) == "boolean" and a[3] or nil, a[2]
  end
  local duplicate = false
  for i, item in pairs(list) do
    for j, other in pairs(list) do
      if i ~= j and ((deep and deepcompare(item, other, true)) or (not deep and item == other)) then duplicate = true end
    end
  end
  return not duplicate, function() return "Expected object to be unique:\n" .. typed(list) end,
    function() return "Expected object to not be unique:\n" .. typed(list) end, nil, given
end)

-- Errors: the message without its "file:line: " position is compared (luassert's rule).
local function stripPosition(problem)
  if type(problem) == "string" then return (problem:gsub("^.-:%d+: ", "", 1)) end
  return problem
end


-- Whether `value` can be called, as luassert's `util.callable` asks: a function, or a value with a `__call`.
local function callable(value)
  if type(value) == "function" then return true end
  local meta = getmetatable(value)
  return type(meta) == "table" and meta.__call ~= nil
end

register({ "error", "errors" }, function(a)
  local fn, expected = a[1], a[2]
  if not callable(fn) then
    error("bad argument #1 to 'error' (function or callable object expected, got " .. type(fn) .. ")", 4)
  end
  local ok, problem = pcall(fn)
  local caught = stripPosition(problem)
  local returned = pack(unpack(a, 1, a.n)) -- (what luassert's `has_error` returns: the error caught, then the rest)
  returned[1] = caught
  local function shownExpected() return expected == nil and "(error)" or typed(expected) end
  if ok then
    return false, function() return "Expected a different error.\nCaught:\n(no error)\nExpected:\n" .. shownExpected() end,
      "Expected no error, but caught:\n(no error)", returned
  end
  if expected == nil then return true, "", function() return "Expected no error, but caught:\n" .. typed(caught) end, returned end
  local matched
  if type(expected) == "string" and hasToString(caught) then -- (an error object compared with text as text)
    caught = tostring(caught)
    matched = caught == expected
  elseif type(expected) == "number" and type(caught) == "string" then
    matched = tostring(expected) == tostring(tonumber(caught))
  else
    matched = deepcompare(expected, caught, true)
  end
  returned[1] = caught
  return matched, function() return "Expected a different error.\nCaught:\n" .. typed(caught) .. "\nExpected:\n" .. typed(expected) end,
    function() return "Expected no error, but caught:\n" .. typed(caught) end, returned
end, 2)

register({ "error_matches", "error_match", "matches_error", "match_error" }, function(a)
  local given, init, plain = messageAndOptions(a, 3)
  local fn, pattern = a[1], a[2]
  -- (luassert's checks, in its words: the second names 'error', as luassert's does.)
  if a.n < 2 then error("the 'error_matches' function requires a minimum of 2 arguments, got: " .. a.n, 4) end
  if not callable(fn) then
    error("bad argument #1 to 'error_matches' (function or callable object expected, got " .. type(fn) .. ")", 4)
  end
  if pattern ~= nil and type(pattern) ~= "string" then
    error("bad argument #2 to 'error' (string expected, got " .. type(pattern) .. ")", 4)
  end
  local ok, problem = pcall(fn)
  problem = stripPosition(problem) -- (a string error is matched without its "file:line: ", as luassert does)
  -- (luassert's words: `has_error`'s; it gives back the error caught and the rest, or the captures when it matched.)
  local returned = pack(unpack(a, 1, a.n))
  returned[1] = problem
  local function words(caught) -- (`caught`: a function making how the error caught is shown)
    return function() return "Expected a different error.\nCaught:\n" .. caught() .. "\nExpected:\n" .. typed(pattern) end,
      function() return "Expected no error, but caught:\n" .. caught() end
  end
  if ok then
    local positive, negative = words(function() return "(no error)" end)
    return false, positive, negative, returned, given
  end
  if problem == nil and pattern == nil then return true, "", "Expected no error, but caught:\n(nil)", pack(), given end
  if hasToString(problem) or type(problem) == "number" or type(problem) == "boolean" then
    problem = tostring(problem)
    returned[1] = problem
  end
  local matched = false
  if type(problem) == "string" and pattern ~= nil then
    if plain then
      matched = problem:find(pattern, init, plain) ~= nil
      if matched then returned = pack(pattern) end
    else
      local captures = pack(problem:match(pattern, init))
      matched = captures[1] ~= nil
      if matched then returned = captures end
    end
  end
  local positive, negative = words(function() return typed(problem) end)
  return matched, positive, negative, returned, given
end)

register({ "truthy" }, function(a)
  needs(a, "truthy", 1)
  return a[1] ~= nil and a[1] ~= false, function() return "Expected to be truthy, but value was:\n" .. typed(a[1]) end,
    function() return "Expected to not be truthy, but value was:\n" .. typed(a[1]) end
end, 1)
register({ "falsy" }, function(a)
  needs(a, "falsy", 1)
  return a[1] == nil or a[1] == false, function() return "Expected to be falsy, but value was:\n" .. typed(a[1]) end,
    function() return "Expected to not be falsy, but value was:\n" .. typed(a[1]) end
end, 1)

for _, literal in ipairs({ { "true", true }, { "false", false } }) do
  register({ literal[1] }, function(a)
    return a[1] == literal[2],
      function() return "Expected objects to be the same.\nPassed in:\n" .. typed(a[1]) .. "\nExpected:\n" .. typed(literal[2]) end,
      function() return "Expected objects to not be the same.\nPassed in:\n" .. typed(a[1]) .. "\nDid not expect:\n" .. typed(literal[2]) end
  end, 1)
end

-- (`is_nil(v)` and the others are luassert's `same` of the value and a type, in its words: "Expected: type nil".)
for _, kind in ipairs({ "nil", "boolean", "number", "string", "table", "function", "userdata", "thread" }) do
  register({ kind }, function(a)
    return type(a[1]) == kind, function() return "Expected objects to be the same.\nPassed in:\n" .. typed(a[1]) .. "\nExpected:\ntype " .. kind end,
      function() return "Expected objects to not be the same.\nPassed in:\n" .. typed(a[1]) .. "\nDid not expect:\ntype " .. kind end
  end, 1)
end

register({ "returned_arguments" }, function(a)
  local expected, actual = tostring(a[1]), tostring(a.n - 1) -- (compared as text, as luassert compares them)
  return expected == actual, "Expected to be called with " .. expected .. " argument(s), but was called with " .. actual,
    "Expected not to be called with " .. expected .. " argument(s), but was called with " .. actual
end)

register({ "holes" }, function(a, state)
  local t = state.bound
  if type(t) ~= "table" then error("array(t): a table is needed", 4) end
  local length = a[1]
  if length == nil then -- (the largest integer key, as luassert takes it: not a border)
    length = 0
    for key in pairs(t) do
      if type(key) == "number" and key > length and math.floor(key) == key then length = key end
    end
  end
  local hole
  for i = 1, length do
    if t[i] == nil then hole = i break end
  end
  return hole ~= nil, "Expected array to have holes, but none was found.\n",
    function() return "Expected array to not have holes, hole found at position: " .. typed(hole) .. "\n" end, pack(hole)
end)

-- Spy assertions: assert.spy(s).was.called(n) and friends, in luassert's words.
local function spyCheck(name, test)
  register({ name }, function(a, state)
    local s = state.bound
    if not isSpy(s) then error("assert.spy(s): s is not a spy (got " .. type(s) .. ")", 4) end
    return test(s, a)
  end)
end

-- `called(n)`; without `n` "at least once" (`>0`) — and, negated, "exactly 0 times", as luassert turns it.
spyCheck("called", function(s, a)
  local count, times = #s.calls, a[1]
  local positive = "Expected to be called " .. tostring(times or ">0") .. " time(s), but was called " .. count .. " time(s)"
  if times == nil then
    return count > 0, positive, "Expected to be called 0 time(s), but was called " .. count .. " time(s)"
  end
  return count == times, positive, "Expected not to be called exactly " .. tostring(times) .. " time(s), but it was."
end)
-- (Each bound's negation is said as the opposite bound, as luassert registers them.)
local bounds = {
  called_at_least = { function(n, m) return n >= m end, "at least", "less than" },
  called_at_most = { function(n, m) return n <= m end, "at most", "more than" },
  called_more_than = { function(n, m) return n > m end, "more than", "at most" },
  called_less_than = { function(n, m) return n < m end, "less than", "at least" },
}
for name, bound in pairs(bounds) do
  spyCheck(name, function(s, a)
    local count = #s.calls
    local function said(words) return "Expected to be called " .. words .. " " .. tostring(a[1]) .. " time(s), but was called " .. count .. " time(s)" end
    return bound[1](count, a[1]), said(bound[2]), said(bound[3])
  end)
end

-- A call's values as luassert shows an argument list: `(values list) ((string) 'x', (nil))`; none kept: `(nil)`.
local function valuesList(list)
  if list == nil then return "(nil)" end
  local parts = {}
  for i = 1, list.n do parts[i] = typed(list[i]) end
  return "(values list) (" .. concat(parts, ", ") .. ")"
end

-- `called_with` and `returned_with`: the call that matched (the last such), or the last call when none did.
local function listCheck(name, kept, did, never, shown)
  spyCheck(name, function(s, a)
    local list = s[kept]
    local ok, found = spyMethods[name](s, unpack(a, 1, a.n))
    found = found or (list[#list] and list[#list].vals)
    return ok, function() return never .. "\n" .. shown .. " (last call if any):\n" .. valuesList(found) .. "\nExpected:\n" .. valuesList(a) end,
      function() return did .. "\n" .. shown .. " (last matching call):\n" .. valuesList(found) .. "\nDid not expect:\n" .. valuesList(a) end
  end)
end
listCheck("called_with", "calls", "Function was called with matching arguments at least once.",
  "Function was never called with matching arguments.", "Called with")
listCheck("returned_with", "returnvals", "Function returned matching arguments at least once.",
  "Function never returned matching arguments.", "Returned")

-- Matchers: match._, match.is_string(), match.same(v), match.none_of(…), match.is_not.X(…) ---------------------

-- A matcher: its test, and — for how luassert shows one, `(matcher) is.match((string) 'x')` — its name, the arguments
-- it was made with and whether it is negated (`mod` false: `no.`).
local function matcher(test, name, arguments, negated)
  return setmetatable({ test = test, name = name, arguments = arguments or pack(), mod = not negated }, matcherMeta)
end

local matchApi
-- A matcher's own name in luassert's refusals (`match.is_equal()`: "the 'equals' function requires …").
local matcherNames = { equal = "equals", equals = "equals", match = "matches", none_of = "none", any_of = "any", all_of = "all" }
-- (How many arguments a matcher needs where that is not its assertion's count less the value: luassert's checks.)
local matcherMinimum = { matches = 1, match = 1, near = 2, none_of = 1, any_of = 1, all_of = 1, unique = 0 }
local function matcherFor(name, negated, arguments)
  if name == "_" then return matcher(function() return true end, "_") end
  -- Arguments checked as luassert checks them, when the matcher is made (level 2: the tail call that made it).
  local shown = matcherNames[name] or name
  local expected = matcherMinimum[name] or (arities[name] and arities[name] - 1) or 0
  if arguments.n < expected then
    error("the '" .. shown .. "' function requires a minimum of " .. expected .. " arguments, got: " .. arguments.n, 2)
  end
  if name == "none_of" or name == "any_of" or name == "all_of" then
    for i = 1, arguments.n do
      if not isMatcher(arguments[i]) then
        error("bad argument #" .. i .. " to '" .. shown .. "' (matcher expected, got " .. type(arguments[i]) .. ")", 2)
      end
    end
  elseif name == "ref" and (arguments.n == 0 or not ({ table = true, ["function"] = true, userdata = true, thread = true })[type(arguments[1])]) then
    error("bad argument #1 to 'ref' (object expected, got " .. (arguments.n == 0 and "no value" or type(arguments[1])) .. ")", 2)
  elseif (name == "matches" or name == "match") and type(arguments[1]) ~= "string" then
    error("bad argument #1 to 'matches' (string expected, got " .. type(arguments[1]) .. ")", 2)
  elseif (name == "matches" or name == "match") and arguments[2] ~= nil and tonumber(arguments[2]) == nil then
    error("bad argument #2 to 'matches' (number expected, got " .. type(arguments[2]) .. ")", 2)
  elseif name == "near" then
    for i = 1, 2 do
      local shown = typed(arguments[i]) -- (shown as it is checked, as luassert shows it: a spec's formatter sees both)
      if tonumber(arguments[i]) == nil then
        error("bad argument #" .. i .. " to 'near' (number or object convertible to a number expected, got " .. shown .. ")", 2)
      end
    end
  end
  if name == "none_of" or name == "any_of" or name == "all_of" then
    local list = arguments
    return matcher(function(value)
      local hits = 0
      for i = 1, list.n do if list[i].test(value) then hits = hits + 1 end end
      local ok = (name == "none_of" and hits == 0) or (name == "any_of" and hits > 0) or (name == "all_of" and hits == list.n)
      if negated then return not ok end
      return ok
    end, name, arguments, negated)
  end
  if name == "ref" then
    local target = arguments[1]
    local byReference = matcher(function(value) return rawequal(value, target) == not negated end, name, arguments, negated)
    byReference.byReference = true -- (a spy's `called_with` gives it the value passed, not the copy it kept)
    return byReference
  end
  local check = assertions[name]
  if check == nil then error("match: no matcher named '" .. name .. "'", 3) end
  return matcher(function(value)
    local a = { n = arguments.n + 1 }
    for i = 1, arguments.n do a[i] = arguments[i] end
    -- The value stands where an assertion takes its actual value: after the expected one, if any.
    if arguments.n == 0 then a[1] = value else a[arguments.n + 1] = value end
    if name == "matches" or name == "match" or name == "near" then -- (the pattern or number first, then the value, then the rest)
      a = { n = arguments.n + 1, arguments[1], value }
      for i = 2, arguments.n do a[i + 1] = arguments[i] end
    end
    local ok = check(a, { matching = true })
    if negated then return not ok end
    return ok
  end, name, arguments, negated)
end

local matchMeta = {}
matchMeta.__index = function(self, key)
  if type(key) ~= "string" then return nil end
  if key == "_" then return matcherFor("_") end
  local tokens = { unpack(rawget(self, "tokens") or {}) }
  for token in key:lower():gmatch("[^_%.]+") do tokens[#tokens + 1] = token end
  local name, negated, mods = resolve(tokens)
  if name == "" or name == "not" then return setmetatable({ tokens = tokens }, matchMeta) end
  if userMatchers[name] then
    -- A registered matcher: its callback, given luassert's state and the arguments, gives the value's test; the
    -- chain's registered modifiers run first (they may negate it).
    local callback = userMatchers[name]
    return function(...)
      local bound = luassertState({}, negated, tokens)
      for _, modifier in ipairs(mods) do modifier(bound) end
      local test = callback(bound, pack(...), 2)
      local wanted = bound.mod
      return matcher(function(value) return (test(value) and true or false) == wanted end)
    end
  end
  return setmetatable({ tokens = tokens }, matchMeta) -- (a name goes on being a chain: `match.equals.Not(true)`)
end
-- A chain called: the matcher its words name, negated as many times as they say.
matchMeta.__call = function(self, ...)
  local name, negated = resolve(rawget(self, "tokens") or {})
  if assertions[name] or name == "none_of" or name == "any_of" or name == "all_of" or name == "ref" then
    return matcherFor(name, negated, pack(...))
  end
  error("match: no matcher named '" .. name .. "'", 2)
end
matchApi = setmetatable({ is_matcher = isMatcher }, matchMeta)

-- What the blocks and the host take ----------------------------------------------------------------------------

B.assert, B.spy, B.stub, B.mock, B.match = assertTable, spyApi, stubApi, mockApi, matchApi
B.fail, B.render, B.sortedKeys, B.same = fail, render, sortedKeys, same

return B
