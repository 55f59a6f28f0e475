-- The spec API of `luastore test` (SpecTest.swift loads it into each spec file's fresh VM; embedded into the
-- binary at build time): busted's blocks and hooks, LuaStore's `expect`, and the host's interface; luassert's
-- `assert`, spies, stubs, mocks and matchers come from `luastore_assert.lua`, this chunk's argument. Each test runs
-- in its own call from the host, with its own time budget; the host asks for the items in order (`next`, `name`,
-- `status`, `run`, `finish`). Its second argument is the host's `placedpcall` (a protected call that says where an
-- error was raised).
local assertions, placedpcall = ...
local spec = {}

local unpack, concat, insert, sort = table.unpack, table.concat, table.insert, table.sort

-- Blocks and tests ---------------------------------------------------------------------------------------------

local root = { name = nil, children = {}, befores = {}, afters = {}, setups = {}, lazySetups = {}, teardowns = {},
  lazyTeardowns = {} }
local current = root
local tests = {}         -- in run order: { name, block, body, pending, line, finallies, kind }
local running            -- the test being run

local function newBlock(name)
  return { name = name, parent = current, children = {}, befores = {}, afters = {}, setups = {}, lazySetups = {},
    teardowns = {}, lazyTeardowns = {} }
end

-- The line of the call `level` frames above callerLine's caller, from the error mechanism (scripts have no
-- debug library). (Frames from `error`: 1 is pcall, 2 callerLine, 3 its caller.)
local function callerLine(level)
  local _, problem = pcall(error, "", level + 3)
  local line = type(problem) == "string" and problem:match(":(%d+): $")
  return line and tonumber(line) or nil
end

-- What busted shows of an error that is neither a string nor has `__tostring`: Penlight's `pretty.write` of it (a
-- field a line, indented two spaces, names sorted, numbers as Penlight writes them, a table met again `<cycle>`).
local prettyKeywords = {}
for word in ("and break do else elseif end false for function if in local nil not or repeat return then true until while")
    :gmatch("%a+") do
  prettyKeywords[word] = true -- (Penlight's list: `goto` is not in it)
end

local function prettyText(value)
  if type(value) ~= "number" then return tostring(value) end
  if value ~= value then return "NaN" end
  if value == math.huge then return "Inf" end
  if value == -math.huge then return "-Inf" end
  if math.floor(value) == value and math.tointeger(value) then return string.format("%d", value) end
  return string.format("%.14g", value)
end

local function prettyQuote(text)
  local equals, from = nil, 1
  local padded = text .. "]"
  while true do -- (the longest run of `=` between two like brackets, each search starting where the last ended)
    local _, stop, _, run = padded:find("([%[%]])(=*)%1", from)
    if not run then break end
    equals, from = math.max(equals or 0, #run), stop
  end
  if (text:find("\n") or equals) and not text:find("\r") then
    local level = string.rep("=", (equals or -1) + 1)
    if text:find("^\n") then text = "\n" .. text end
    return "[" .. level .. "[" .. text .. "]" .. level .. "]"
  end
  return (string.format("%q", text):gsub("\r", "\\r"))
end

local function prettyWrite(value)
  if type(value) == "string" then return prettyQuote(value) end
  if type(value) ~= "table" then return prettyText(value) end
  local lines, line, writing = {}, "", {}
  local function put(text) line = line .. text end
  local function putLine(text)
    if #line > 0 then text, line = line .. text, "" end
    lines[#lines + 1] = text
  end
  local function dropLastComma()
    if lines[#lines]:sub(-1) == "," then lines[#lines] = lines[#lines]:sub(1, -2) end
  end
  local function write(v, outer, inner)
    if type(v) == "string" then
      putLine(prettyQuote(v) .. ",")
    elseif type(v) ~= "table" then
      local text = prettyText(v)
      putLine((text:find(" ") and prettyQuote(text) or text) .. ",")
    elseif writing[v] then
      putLine("<cycle>,")
    else
      writing[v] = true
      local deeper = inner .. "  "
      putLine("{")
      local listed, i = {}, 1
      while v[i] ~= nil do
        put(inner)
        write(v[i], inner, deeper)
        listed[i], i = true, i + 1
      end
      local named = {}
      for key in next, v do
        if type(key) ~= "number" then named[#named + 1] = key end
      end
      sort(named, function(a, b)
        if type(a) == type(b) then return prettyText(a) < prettyText(b) end
        return type(a) < type(b)
      end)
      local function entry(key)
        local isNumber = type(key) == "number"
        if isNumber and listed[key] then return end
        local name = type(key) == "string" and key or prettyText(key)
        if isNumber or not (name:find("^[%a_][%w_]*$") and not prettyKeywords[name]) then
          if not isNumber then
            name = prettyQuote(name)
            if name:find("^%[") then name = " " .. name .. " " end
          end
          name = "[" .. name .. "]"
        end
        put(inner .. name .. " = ")
        write(v[key], inner, deeper)
      end
      for _, key in ipairs(named) do entry(key) end
      for key in next, v do
        if type(key) == "number" then entry(key) end
      end
      writing[v] = nil
      dropLastComma()
      putLine(outer .. "},")
    end
  end
  write(value, "", "  ")
  dropLastComma()
  return concat(lines, "\n")
end

-- What busted reports of what a test or a hook raised (`problem`, raised at `place`): a string as it is; a value
-- with `__tostring` as that shows it; nil as "Nil error"; anything else as `pretty.write` writes it — placed where
-- it was raised (`file:line: …`) unless it says where already.
local function bustedMessage(problem, place)
  local text
  if type(problem) == "string" then
    text = problem
  else
    local meta = getmetatable(problem)
    text = problem == nil and "Nil error" or (type(meta) == "table" and meta.__tostring) and tostring(problem)
      or prettyWrite(problem)
  end
  if place and not text:find("^[^\n]-:%d+: ") then text = place .. ": " .. text end
  return text
end

-- Runs `body` as busted runs a test's or a hook's code: `true`, or `false` and the message busted reports of what
-- it raised (`bustedMessage`) — and what it raised itself.
local function runPlaced(body)
  local ok, problem, place = placedpcall(body)
  if ok then return true end
  return false, bustedMessage(problem, place), problem
end

-- What busted calls: a function, or a value whose metatable has `__call`.
local function callable(value)
  if type(value) == "function" then return true end
  local meta = getmetatable(value)
  return type(meta) == "table" and meta.__call ~= nil
end

-- A block's or a test's name as busted takes it: a string or a number as its text; none, the word that made it
-- (`it(nil, f)` is "it"); anything else is refused (busted's run fails on it).
local function blockName(name, word, level)
  if name == nil then return word end
  if type(name) == "string" or type(name) == "number" then return tostring(name) end
  error(word .. "(name, function) expected", level + 1)
end

-- A block's body runs when the run reaches it, as in busted: after the tests and blocks before it have run (their
-- before_each hooks included), registering the block's own children (see spec.next). A block whose body cannot be
-- called (`describe("todo")`) is left out, as busted leaves it out.
local function describe(name, body, word)
  name = blockName(name, word or "describe", 2)
  if not callable(body) then return end
  local block = newBlock(name)
  block.body = body
  block.line = callerLine(1)
  insert(current.children, block)
end

-- A fixed shuffle (busted's is seeded by the clock; specs must be repeatable here).
local function shuffle(list)
  local state = 0x2545F491
  for i = #list, 2, -1 do
    state = (state * 1103515245 + 12345) % 2147483648
    local j = state % i + 1
    list[i], list[j] = list[j], list[i]
  end
end

local function addTest(name, body, pending, word)
  name = blockName(name, word or "it", 3)
  if body ~= nil and not callable(body) then body = nil end -- (a body that cannot be called is none, as for busted)
  if body == nil and not pending then return end -- (busted 2.1 leaves out a test without a body)
  insert(current.children, { test = true, name = name, body = body, pending = pending, line = callerLine(2) })
end

-- What `pending(message)` inside a running test raises: the test stops and is reported pending, as in busted.
local pendingMeta = { __tostring = function(self) return "pending: " .. tostring(self.message) end }

local function it(name, body) addTest(name, body, false) end
local function pending(name, body)
  if running ~= nil then error(setmetatable({ message = name, line = callerLine(1) }, pendingMeta), 0) end
  addTest(name, body, true)
end

local function hook(list, kind)
  return function(body)
    if type(body) ~= "function" then error(kind .. "(function) expected", 2) end
    insert(current[list], body)
    current[list .. "Lines"] = current[list .. "Lines"] or {}
    current[list .. "Lines"][#current[list]] = callerLine(1)
  end
end

local function finally(body)
  if running == nil then error("finally(function) belongs inside a test", 2) end
  if type(body) ~= "function" then error("finally(function) expected", 2) end
  running.finallies = { body } -- (a test has one: the last given, as busted keeps it)
end

local function randomize(on)
  current.randomized = on ~= false
end

-- Entering and leaving blocks while tests run: setups when a block's first test runs (strict ones whether or
-- not any test in it will run, lazy ones only then), teardowns when its last has run.
local entered = {}   -- the chain of blocks entered, outermost first
local setupFailure = {} -- block -> true when one of its setups failed (its tests do not run)

local function runAll(list)
  for i = 1, #list do list[i]() end
end

-- Hooks that failed outside a test (a teardown), each reported as an error of its own, named after its block and
-- kind ("a teardown"), as busted reports it; `spec.next` hands them out before the next test.
local hookFailures = {}

local function fullChainName(block)
  local names = {}
  while block ~= nil and block.name ~= nil do insert(names, 1, block.name) block = block.parent end
  return concat(names, " ")
end

-- A failure of a block's hook `i` of `list` (or of a test: `name`, `line`) to report as an item of its own.
local function reportHookFailure(problem, block, list, i, kind, name, line)
  local blockName = block and fullChainName(block) or ""
  hookFailures[#hookFailures + 1] = { failedBlock = true, fullName = name or (blockName == "" and kind or blockName .. " " .. kind), chain = {},
    line = line or (block[list .. "Lines"] and block[list .. "Lines"][i]), problem = problem }
end

-- Runs a block's hooks of `list` (teardowns, after_each), each protected: one that fails is an item of its own.
local function runHooks(block, list, kind)
  for i, body in ipairs(block[list]) do
    local ok, problem = runPlaced(body)
    if not ok then reportHookFailure(problem, block, list, i, kind) end
  end
end

-- Runs the before_each hooks of the blocks of `chain`, outermost first, until one fails: whether all ran, and
-- what failed and where.
local function runBefores(chain)
  for depth = 1, #chain do
    local block = chain[depth]
    for i, body in ipairs(block.befores) do
      local ok, problem, raised = runPlaced(body)
      if not ok then return false, problem, block, i, raised end
    end
  end
  return true
end

-- Runs a block's setups of `list` until one fails: that one is an error of its own ("a setup"), and the block's
-- tests do not run (busted reports neither them nor the setups after it).
local function runSetups(block, list, kind)
  if setupFailure[block] then return end
  for i, body in ipairs(block[list]) do
    local ok, problem = runPlaced(body)
    if not ok then
      setupFailure[block] = true
      reportHookFailure(problem, block, list, i, kind)
      return
    end
  end
end

local function leave(depth)
  while #entered > depth do
    local block = entered[#entered]
    entered[#entered] = nil
    if block.lazyEntered then runHooks(block, "lazyTeardowns", "lazy_teardown") end -- (the lazy ones first, as busted)
    runHooks(block, "teardowns", "teardown")
  end
end

local function enter(chain, lazy)
  local depth = 0
  while depth < #entered and entered[depth + 1] == chain[depth + 1] do depth = depth + 1 end
  leave(depth)
  for i = depth + 1, #chain do
    local block = chain[i]
    entered[i] = block
    runSetups(block, "setups", "setup")
  end
  if lazy then
    for i = 1, #chain do
      local block = chain[i]
      if not block.lazyEntered then
        block.lazyEntered = true
        runSetups(block, "lazySetups", "lazy_setup")
      end
    end
  end
end

-- The host's interface -----------------------------------------------------------------------------------------

-- The walk: a stack of the blocks being run, each with the index of its child run last. `spec.next()` goes on
-- from there to the next test, running the bodies of the blocks it enters on the way (registering their
-- children); a body that raises is an item of its own, an error, and its block has no tests.
-- (The file is the outermost block, as busted has it: hooks a spec file registers outside any `describe` run
-- around each of its tests, its setups and teardowns when it is entered and left.)
local walk = { { block = root, chain = { root }, index = 0 } }

local function fullName(chain, name)
  local names = {}
  for i = 1, #chain do names[#names + 1] = chain[i].name end
  names[#names + 1] = name
  return concat(names, " ")
end

-- The next hook failure waiting to be reported, as an item (see `hookFailures`).
local function nextHookFailure()
  local failure = table.remove(hookFailures, 1)
  if failure == nil then return nil end
  tests[#tests + 1] = failure
  return #tests
end

function spec.next()
  local waiting = nextHookFailure()
  if waiting ~= nil then return waiting end
  if #root.children > 0 and root.randomized and not root.shuffled then
    root.shuffled = true
    shuffle(root.children)
  end
  while #walk > 0 do
    local frame = walk[#walk]
    frame.index = frame.index + 1
    local child = frame.block.children[frame.index]
    if child == nil then
      walk[#walk] = nil
    elseif child.test then
      child.fullName, child.chain = fullName(frame.chain, child.name), frame.chain
      tests[#tests + 1] = child
      return #tests
    else
      local chain = { unpack(frame.chain) }
      chain[#chain + 1] = child
      enter(frame.chain, false) -- (the enclosing blocks' setups run before the body, as busted runs them)
      local saved = current
      current = child
      local ok, problem = runPlaced(child.body)
      current = saved
      if not ok then
        tests[#tests + 1] = { failedBlock = true, fullName = fullName(frame.chain, child.name), chain = frame.chain,
          line = child.line, problem = problem }
        return #tests
      end
      if child.randomized then shuffle(child.children) end
      walk[#walk + 1] = { block = child, chain = chain, index = 0 }
      enter(chain, false) -- (its setups run as the run enters it, as busted's do: a block with no test too)
    end
    waiting = nextHookFailure() -- (a teardown that failed as the walk left a block)
    if waiting ~= nil then return waiting end
  end
  leave(0) -- (the last blocks' teardowns: what fails there is reported too)
  return nextHookFailure()
end

function spec.name(index) return tests[index].fullName end
function spec.line(index) return tests[index].line end
function spec.status(index)
  local test = tests[index]
  return test.failedBlock and "error" or test.pending and "pending" or "test"
end
function spec.matches(index, pattern) return tests[index].fullName:find(pattern) ~= nil end
-- Raises again what the body of a block that failed raised (the host reports it as an error).
function spec.raise(index) error(tests[index].problem, 0) end

-- Runs the after_each hooks of test `index` from the innermost (even when the test failed): one that fails is an
-- item of its own.
function spec.after(index)
  local chain = tests[index].chain
  for i = #chain, 1, -1 do runHooks(chain[i], "afters", "after_each") end
end

-- Runs test `index`: its blocks' setups as needed, the before_each hooks from the outermost, the test and its
-- finally handlers; the host reports the outcome, then runs its after_each hooks (`spec.after`), as busted tells a
-- test's end before them.
function spec.run(index)
  local test = tests[index]
  test.kind = "error" -- (a setup that failed, or an error outside an assertion)
  assertions.forget()
  enter(test.chain, true)
  for i = 1, #test.chain do
    if setupFailure[test.chain[i]] then return "skipped" end -- (its block's setup failed: reported on its own)
  end
  test.finallies = {}
  running = test
  -- As busted runs them: a before_each that fails is the error (named after its block: "a before_each"), not the
  -- test; the test's `finally` that fails after the test failed is an error of its own besides; an after_each
  -- that fails is an error of its own ("a after_each"), the test's outcome standing.
  -- (Only the test's own body fails it: an assertion that fails in a before_each or a finally is an error, as in
  -- busted, where only `it` blocks make failures.)
  local ok, message, failedBlock, hookIndex, problem = runBefores(test.chain)
  local inBody = false
  if not ok then
    local blockName = fullChainName(failedBlock)
    test.fullName = blockName == "" and "before_each" or blockName .. " before_each"
    test.line = failedBlock.beforesLines and failedBlock.beforesLines[hookIndex] or test.line
  else
    ok, message, problem = runPlaced(test.body)
    inBody = not ok
  end
  for i = #test.finallies, 1, -1 do
    local cleaned, why, raised = runPlaced(test.finallies[i])
    if not cleaned then
      if ok then ok, message, problem = false, why, raised
      else reportHookFailure(why, nil, nil, nil, nil, test.fullName, test.line) end
    end
  end
  running = nil
  if not ok then
    if getmetatable(problem) == pendingMeta then
      if inBody then return "pending", problem.message, problem.line end
      message = "'pending' not supported inside current context block" -- (in a before_each or a finally: busted's words)
    end
    if inBody and type(problem) == "string" and assertions.failed((problem:gsub("^.-:%d+: ", "", 1))) then test.kind = "failure" end
    if inBody and type(problem) == "table" and assertions.failed(problem) then test.kind = "failure" end
    error(message, 0)
  end
end

-- Whether test `index`, which raised, failed an assertion ("failure") or raised anything else ("error").
function spec.kind(index) return tests[index].kind or "error" end

-- Leaves every block (their teardowns) once the last test has run.
function spec.finish()
  leave(0)
end

local fail, same, render = assertions.fail, assertions.same, assertions.render

-- expect (LuaStore's own style; luassert's failures and rendering) --------------------------------------------------------------------------------

local function expect(actual)
  local positive, negative = {}, {}
  local function add(name, check, describeIt)
    positive[name] = function(...)
      if not check(...) then fail(describeIt(...), 2) end
    end
    negative[name] = function(...)
      if check(...) then fail("not " .. describeIt(...), 2) end
    end
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

-- The globals a spec file sees (SpecTest.swift defines each) ----------------------------------------------------

-- Blocks, tests and hooks are registered by blocks, not by a running test (or its hooks): busted refuses them there.
local function outsideTests(name, register)
  return function(...)
    if running ~= nil then error("'" .. name .. "' not supported inside current context block", 2) end
    return register(...)
  end
end

-- (Each under the word that names a block or test given no name, as busted names it: `context` is a describe, `spec`
-- and `test` are its.)
local function describeAs(word) return function(name, body) return describe(name, body, word) end end
-- (`itAs`'s call is not a tail call, as `it`'s is not: `addTest` reads its caller's caller's line, the spec file's.)
local function itAs(word) return function(name, body) addTest(name, body, false, word) end end
spec.globals = {
  describe = describeAs("describe"), context = describeAs("describe"), insulate = describeAs("insulate"),
  expose = describeAs("expose"), it = itAs("it"), spec = itAs("it"), test = itAs("it"), pending = pending,
  before_each = hook("befores", "before_each"), after_each = hook("afters", "after_each"),
  setup = hook("setups", "setup"), strict_setup = hook("setups", "strict_setup"),
  lazy_setup = hook("lazySetups", "lazy_setup"),
  teardown = hook("teardowns", "teardown"), strict_teardown = hook("teardowns", "strict_teardown"),
  lazy_teardown = hook("lazyTeardowns", "lazy_teardown"),
  finally = finally, randomize = randomize,
}
for _, name in ipairs({ "describe", "context", "insulate", "expose", "it", "spec", "test", "before_each", "after_each",
  "setup", "strict_setup", "lazy_setup", "teardown", "strict_teardown", "lazy_teardown", "randomize" }) do
  spec.globals[name] = outsideTests(name, spec.globals[name])
end
for name, value in pairs({
  assert = assertions.assert, spy = assertions.spy, stub = assertions.stub, mock = assertions.mock,
  match = assertions.match, expect = expect,
}) do spec.globals[name] = value end

-- The modules specs require by name, as busted's and luassert's own: `require("luassert")` is `assert`,
-- `require("busted")` the blocks and hooks (package.preload: what the app's folder and the module path hold is
-- not looked at for these names).
local preloads = {
  luassert = assertions.assert, ["luassert.spy"] = assertions.spy, ["luassert.stub"] = assertions.stub,
  ["luassert.mock"] = assertions.mock, ["luassert.match"] = assertions.match, busted = spec.globals,
  -- (`require("busted.runner")()` at a spec's top runs the file stand-alone under `lua`; under a runner it does
  -- nothing, as busted's does.)
  ["busted.runner"] = function() end,
}
for name, module in pairs(preloads) do
  package.preload[name] = function() return module end
end

-- Makes `require(name)` give `module` (the host's own modules for specs: `luastore.session`), handing it the way
-- assertions fail (so that what it finds wrong counts as a failure, not an error) and how values are rendered.
function spec.preload(name, module)
  if type(module.bind) == "function" then module.bind({ fail = assertions.fail, render = assertions.render, sortedKeys = assertions.sortedKeys }) end
  package.preload[name] = function() return module end
end

-- The names of `spec.globals`, space-separated, for the host to define each.
function spec.globalnames()
  local names = {}
  for name in pairs(spec.globals) do names[#names + 1] = name end
  sort(names)
  return concat(names, " ")
end

return spec
