-- A string-heavy workload: a JSON encoder and decoder in plain Lua (escaping with gsub, scanning with find,
-- match and byte), round-tripping a ≈ 1.2 MB document. Run whole by `luakit` and by the stock `lua5.4`.
local byte, char, concat, find, format, gsub, match, sub = string.byte, string.char, table.concat, string.find,
  string.format, string.gsub, string.match, string.sub

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
local function escape(c) return escapes[c] or format("\\u%04x", byte(c)) end

local encode
local function encodeTable(t, out)
  if t[1] ~= nil or next(t) == nil then
    out[#out + 1] = "["
    for i = 1, #t do
      if i > 1 then out[#out + 1] = "," end
      encode(t[i], out)
    end
    out[#out + 1] = "]"
  else
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      encode(k, out)
      out[#out + 1] = ":"
      encode(t[k], out)
    end
    out[#out + 1] = "}"
  end
end

function encode(value, out)
  local kind = type(value)
  if kind == "string" then
    out[#out + 1] = '"' .. gsub(value, '[%z\1-\31\\"]', escape) .. '"'
  elseif kind == "number" then
    out[#out + 1] = math.type(value) == "integer" and format("%d", value) or format("%.14g", value)
  elseif kind == "boolean" then
    out[#out + 1] = value and "true" or "false"
  elseif kind == "table" then
    encodeTable(value, out)
  else
    out[#out + 1] = "null"
  end
end

local decodeValue
local function skip(s, i) return (find(s, "[^ \t\r\n]", i)) or #s + 1 end

local unescapes = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }
local function decodeString(s, i)
  local parts, start = {}, i + 1
  while true do
    local at = find(s, '["\\]', start)
    if byte(s, at) == 34 then
      parts[#parts + 1] = sub(s, start, at - 1)
      return concat(parts), at + 1
    end
    parts[#parts + 1] = sub(s, start, at - 1)
    local kind = sub(s, at + 1, at + 1)
    if kind == "u" then
      parts[#parts + 1] = char(tonumber(sub(s, at + 2, at + 5), 16) % 256)
      start = at + 6
    else
      parts[#parts + 1] = unescapes[kind]
      start = at + 2
    end
  end
end

function decodeValue(s, i)
  i = skip(s, i)
  local c = byte(s, i)
  if c == 34 then return decodeString(s, i) end
  if c == 123 then
    local t = {}
    i = skip(s, i + 1)
    if byte(s, i) == 125 then return t, i + 1 end
    while true do
      local key
      key, i = decodeString(s, skip(s, i))
      i = skip(s, i) + 1
      t[key], i = decodeValue(s, i)
      i = skip(s, i)
      if byte(s, i) == 125 then return t, i + 1 end
      i = i + 1
    end
  end
  if c == 91 then
    local t = {}
    i = skip(s, i + 1)
    if byte(s, i) == 93 then return t, i + 1 end
    while true do
      t[#t + 1], i = decodeValue(s, i)
      i = skip(s, i)
      if byte(s, i) == 93 then return t, i + 1 end
      i = i + 1
    end
  end
  local literal = match(s, "^[%w%.%+%-]+", i)
  if literal == "true" then return true, i + 4 end
  if literal == "false" then return false, i + 5 end
  if literal == "null" then return nil, i + 4 end
  return tonumber(literal), i + #literal
end

local document = {}
for i = 1, 8000 do
  document[i] = {
    id = i, name = "item " .. i, price = i * 1.25, tags = { "red", "green", "blue\n" .. i },
    note = 'a "quoted" note\twith\\escapes and \1 control', active = i % 2 == 0,
  }
end

local total = 0
for _ = 1, 3 do
  local out = {}
  encode(document, out)
  local text = concat(out)
  local decoded = decodeValue(text, 1)
  total = total + #text + #decoded
end
return total
