-- A differential fuzzer of the sandbox's string functions against Lua's own (PatternFuzzTests loads it as a
-- trusted chunk; `scripts/fuzz-patterns N [SEED]` runs it long).
--
-- Arguments: Lua's own functions ({find, match, gmatch, gsub, format, tostring}), the sandbox's (the same), a
-- seed and a number of cases. Besides the pattern functions, `format` gets random conversions (flags, widths,
-- precisions, letters valid and not) over every kind of value but those with addresses, and `tostring` values
-- whose `__tostring` misbehaves. Each case is a random call — `find` (with and without `plain`), `match`, `gmatch`, `gsub` with a
-- string, table or function replacement and a limit — over a pattern drawn from the whole grammar (every class
-- including %z, sets with ranges, classes, negation and ']' and '-' in odd places, . * + - ?, anchors,
-- captures, position captures, back-references, %b, %f, and malformed patterns) and a subject with NUL and
-- bytes >= 0x80, and `init` negative, zero or past the end. Both implementations are called from the same
-- line, so even error positions must agree. Returns the number of cases run and, at the first difference, a
-- one-line reproducer.
local reference, sandbox, seed, cases = ...
local pack, concat, char = table.pack, table.concat, string.char
local mtype = math.type
-- The fuzzer describes values with Lua's own functions, so a bug under test cannot garble its reports.
local format, tostring = reference.format, reference.tostring

-- SplitMix64: the same cases for the same seed, on every machine.
local state = seed
local function random(n) -- 1..n
  state = state + 0x9E3779B97F4A7C15
  local z = state
  z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
  z = (z ~ (z >> 27)) * 0x94D049BB133111EB
  z = z ~ (z >> 31)
  return (z >> 1) % n + 1
end
local function pick(list) return list[random(#list)] end
local function chance(n) return random(n) == 1 end

-- Subjects --------------------------------------------------------------------------------------------------

local subjectBytes = {
  "a", "a", "a", "b", "b", "c", "x", "A", "Z", "0", "1", "9", " ", "\t", "\n", "(", ")", "[", "]", "%", "-",
  ".", "*", "+", "?", "^", "$", "_", ",", "\0", "\0", "\1", "\31", "\127", "\128", "\200", "\255", "é",
}

local function subject()
  local parts = {}
  for i = 1, random(21) - 1 do parts[i] = pick(subjectBytes) end
  return concat(parts)
end

-- Patterns --------------------------------------------------------------------------------------------------

local classes = { "a", "c", "d", "g", "l", "p", "s", "u", "w", "x", "z" }
local literals = { "a", "b", "c", "x", "A", "0", "1", " ", "\0", "\128", "\255", "_", ",", "\n" }
local escaped = { "%%", "%.", "%(", "%)", "%[", "%]", "%*", "%+", "%-", "%?", "%^", "%$", "%,", "%\0" }
local quantifiers = { "", "", "", "", "*", "+", "-", "?" }

local function class()
  local letter = pick(classes)
  return "%" .. (chance(3) and letter:upper() or letter)
end

local function setItem()
  local kind = random(6)
  if kind == 1 then return class() end
  if kind == 2 then return pick(literals) .. "-" .. pick(literals) end -- a range (possibly empty)
  if kind == 3 then return pick(escaped) end
  return pick(literals)
end

local function set()
  local parts = { "[" }
  if chance(3) then parts[#parts + 1] = "^" end
  if chance(6) then parts[#parts + 1] = "]" end   -- ']' first is a member
  if chance(8) then parts[#parts + 1] = "-" end   -- '-' first is a member
  for _ = 1, random(4) do parts[#parts + 1] = setItem() end
  if chance(8) then parts[#parts + 1] = "-" end   -- and last
  parts[#parts + 1] = "]"
  return concat(parts)
end

local function single()
  local kind = random(7)
  if kind == 1 then return "." end
  if kind == 2 then return class() end
  if kind == 3 then return set() end
  if kind == 4 then return pick(escaped) end
  return pick(literals)
end

local item
local function sequence(depth, count)
  local parts = {}
  for i = 1, count do parts[i] = item(depth) end
  return concat(parts)
end

function item(depth)
  local kind = random(16)
  if kind == 1 and depth < 3 then return "(" .. sequence(depth + 1, random(3) - 1) .. ")" end
  if kind == 2 then return "()" end
  if kind == 3 then return "%" .. (chance(4) and random(10) - 1 or random(2)) end -- back-reference (%0-%9)
  if kind == 4 then return "%b" .. pick(literals) .. pick({ "(", ")", "a", "b" }) end
  if kind == 5 then return "%f" .. set() end
  if kind == 6 and chance(4) then return "$" end                         -- '$' not at the end is itself
  return single() .. pick(quantifiers)
end

-- Ways to make a pattern malformed, each with one of Lua's messages.
local breakers = {
  function(p) return p .. "%" end,                                     -- ends with '%'
  function(p) return p .. "[a" end,                                    -- missing ']'
  function(p) return p .. "[%" end,
  function(p) return p .. "%b" end,                                    -- missing arguments to '%b'
  function(p) return p .. "%ba" end,
  function(p) return p .. "%fa" end,                                   -- missing '[' after '%f'
  function(p) return p .. ")" end,                                     -- invalid pattern capture
  function(p) return "(" .. p end,                                     -- unfinished capture
  function(p) return p .. "%" .. random(9) end,                        -- invalid capture index
  function(p) return ("("):rep(33) .. p .. (")"):rep(33) end,          -- too many captures
  function(p) return ("(a?"):rep(30) .. p .. (")"):rep(30) end,
  function(p) return p:sub(1, random(#p + 1) - 1) end,                 -- cut anywhere
}

local function pattern()
  local p = sequence(0, random(6) - 1)
  if chance(4) then p = "^" .. p end
  if chance(5) then p = p .. "$" end
  if chance(8) then p = pick(breakers)(p) end
  return p
end

-- Arguments ---------------------------------------------------------------------------------------------------

local function init(s)
  local kind = random(8)
  if kind == 1 then return 0 end
  if kind == 2 then return -random(#s + 4) end
  if kind == 3 then return #s + random(4) - 1 end
  if kind == 4 then return random(#s + 2) end
  if kind == 5 then return pick({ math.maxinteger, math.mininteger, 2.0, -1.0 }) end
  return nil
end

local function replacementString()
  local parts = {}
  for i = 1, random(5) - 1 do
    parts[i] = pick({ "%0", "%1", "%2", "%9", "%%", "%x", "<", ">", "a", "%", "\0" })
  end
  return concat(parts)
end

local replacementTable = { a = "A", b = 7, x = false, [""] = "E", [1] = "one", [2] = {}, ["\0"] = "NUL", c = 2.5 }

local function replacementFunction(...)
  local count = select("#", ...)
  local first = ...
  local kind = count + (type(first) == "string" and #first or 0)
  if first == "b" then return false end
  if first == "c" then return {} end                                   -- invalid replacement value
  if kind % 3 == 0 then return nil end
  if kind % 3 == 1 then return 42 end
  return concat(pack(...), "|", 1, count)
end

local function limit()
  local kind = random(6)
  if kind == 1 then return random(4) - 2 end
  if kind == 2 then return 1.5 end                                     -- no integer representation
  return nil
end

-- format and tostring ------------------------------------------------------------------------------------------

-- Values without addresses (the sandbox prints none on purpose: README), but with every other kind of value,
-- including tables that name themselves through `__tostring` or `__name`, and `__tostring`s that misbehave.
local named = setmetatable({}, { __tostring = function() return "named" end })
local badlyNamed = setmetatable({}, { __tostring = function() return {} end })
local numberNamed = setmetatable({}, { __tostring = function() return 42 end })
local values = {
  0, 1, -1, 42, 255, math.maxinteger, math.mininteger, 0.0, -0.0, 0.1, -2.5, 1e300, 1e-300, 1 / 0, -1 / 0, 0 / 0,
  3.14159, 2 ^ 53, "", "x", "a\0b", "quote\"back\\slash\nnl", "\200\255", "12", " 7 ", "a\0009", "\0012\r\t\127", true, false, nil, named,
  badlyNamed, numberNamed,
}
local flagChars = { "-", "+", " ", "#", "0" }
local letters = { "c", "d", "i", "u", "o", "x", "X", "a", "A", "f", "F", "e", "E", "g", "G", "q", "s", "%", "z", "l", "" }

local function conversion()
  if chance(2) then return "%" .. pick(letters) end -- most conversions have no flags, width or precision
  local parts = { "%" }
  for _ = 1, random(3) - 1 do parts[#parts + 1] = pick(flagChars) end
  if chance(2) then parts[#parts + 1] = tostring(random(120) - 1) end
  if chance(3) then parts[#parts + 1] = "." .. (chance(4) and "" or tostring(random(120) - 1)) end
  parts[#parts + 1] = pick(letters)
  return concat(parts)
end

local function formatArguments()
  local parts, count = {}, 0
  for _ = 1, random(4) - 1 do
    count = count + 1
    parts[count] = chance(2) and conversion() or pick({ "text", " ", "%%", "\0", "é" })
  end
  local arguments = { n = 1, concat(parts) }
  for i = 1, random(5) - 1 do
    arguments[i + 1] = pick(values)
    arguments.n = i + 1
  end
  return arguments
end

-- Calls, from one line each so that positions in error messages agree --------------------------------------

local function describe(value)
  local kind = type(value)
  if kind == "string" then return format("%q", value) end
  if kind == "number" then return mtype(value) .. ":" .. format("%q", value) end
  return tostring(value)
end

local function outcome(ok, ...)
  local parts = { tostring(ok) }
  for i = 1, select("#", ...) do parts[#parts + 1] = describe((select(i, ...))) end
  return concat(parts, ", ")
end

local function find(lib, ...) return outcome(pcall(function(...) local r = pack(lib.find(...)) return table.unpack(r, 1, r.n) end, ...)) end
local function match(lib, ...) return outcome(pcall(function(...) local r = pack(lib.match(...)) return table.unpack(r, 1, r.n) end, ...)) end
local function gsub(lib, ...) return outcome(pcall(function(...) local r = pack(lib.gsub(...)) return table.unpack(r, 1, r.n) end, ...)) end
local function stringformat(lib, ...) return outcome(pcall(function(...) local r = pack(lib.format(...)) return table.unpack(r, 1, r.n) end, ...)) end
local function tostringcall(lib, ...) return outcome(pcall(function(...) local r = pack(lib.tostring(...)) return table.unpack(r, 1, r.n) end, ...)) end
local function gmatch(lib, ...)
  local items = {}
  local ok, problem = pcall(function(...)
    for a, b, c in lib.gmatch(...) do
      items[#items + 1] = describe(a) .. "/" .. describe(b) .. "/" .. describe(c)
      if #items > 40 then break end
    end
  end, ...)
  return tostring(ok) .. " " .. concat(items, "; ") .. " " .. tostring(problem)
end

local function show(...)
  local parts = {}
  for i = 1, select("#", ...) do
    local value = (select(i, ...))
    parts[i] = type(value) == "function" and "<function>" or type(value) == "table" and "<table>" or describe(value)
  end
  return concat(parts, ", ")
end

for case = 1, cases do
  local s, p = subject(), pattern()
  local operation = random(8)
  local name, arguments
  if operation == 1 then
    name, arguments = "find", pack(s, p, init(s))
  elseif operation == 2 then
    name, arguments = "find", pack(s, p, init(s), pick({ true, false, 1 }))
  elseif operation == 3 then
    name, arguments = "match", pack(s, p, init(s))
  elseif operation == 4 then
    name, arguments = "gmatch", pack(s, p, init(s))
  elseif operation == 7 then
    name, arguments = "format", formatArguments()
  elseif operation == 8 then
    local value = pick(values)
    name, arguments = "tostring", chance(10) and pack() or pack(value)
  else
    local replacement = pick({ replacementString(), replacementString(), replacementTable, replacementFunction, 12 })
    name, arguments = "gsub", pack(s, p, replacement, limit())
  end
  local run = ({ find = find, match = match, gmatch = gmatch, gsub = gsub, format = stringformat, tostring = tostringcall })[name]
  local expected = run(reference, table.unpack(arguments, 1, arguments.n))
  local actual = run(sandbox, table.unpack(arguments, 1, arguments.n))
  if expected ~= actual then
    return case, format("seed %d case %d: string.%s(%s) -- Lua: %s -- sandbox: %s", seed, case, name,
      show(table.unpack(arguments, 1, arguments.n)), expected, actual)
  end
end
return cases
