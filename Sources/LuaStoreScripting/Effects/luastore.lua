-- The `luastore` module scripts `require` (EffectsModule.swift defines it): constructors for effects, each a
-- plain table. lua/luastore.d.lua declares the same functions for editors; a test checks that they agree.
local luastore = {}

-- Raises at the script's line: `depth` is how many of this module's functions stand between the constructor the
-- script called and `fail` (0: the constructor called it; each helper adds one).
local function fail(fn, message, depth)
  error("luastore." .. fn .. ": " .. message, 3 + (depth or 0))
end

local function field(fn, value, name, expected, optional, depth)
  depth = (depth or 0) + 1
  if value == nil then
    if optional then return end
    fail(fn, "'" .. name .. "' is required (a " .. expected .. ")", depth)
  end
  if type(value) ~= expected then
    fail(fn, "'" .. name .. "' must be a " .. expected .. " (got " .. type(value) .. ")", depth)
  end
end

-- The longest wait a command may ask for, in seconds (a year): `ScriptEffect.longestWait`, which checks it again.
local LONGEST_WAIT = 31536000

-- Raises unless `seconds` is a wait the store can keep: finite, at most a year, and positive (or, `zero`, not
-- negative).
local function checkwait(fn, seconds, name, zero)
  if seconds ~= seconds or seconds > LONGEST_WAIT then
    local shown = seconds ~= seconds and "NaN" or tostring(seconds)
    fail(fn, "'" .. name .. "' must be a number of seconds up to " .. LONGEST_WAIT .. " (a year), not " .. shown, 1)
  end
  if zero and seconds < 0 then fail(fn, "'" .. name .. "' must not be negative", 1) end
  if not zero and seconds <= 0 then fail(fn, "'" .. name .. "' must be positive", 1) end
end

local function checkaction(fn, value, name)
  field(fn, value, name, "table", false, 1)
  if type(value.type) ~= "string" then fail(fn, "'" .. name .. ".type' must be a string (got " .. type(value.type) .. ")", 1) end
end

--- An HTTP request. On success the store dispatches `{type = success, id, status, headers, body, json}`;
--- on failure `{type = failure, id, reason, message, status, body}`.
function luastore.http(request)
  field("http", request, "request", "table")
  field("http", request.url, "url", "string")
  field("http", request.method, "method", "string", true)
  field("http", request.headers, "headers", "table", true)
  field("http", request.body, "body", "string", true)
  field("http", request.timeout, "timeout", "number", true)
  field("http", request.success, "success", "string")
  field("http", request.failure, "failure", "string")
  if request.timeout ~= nil then checkwait("http", request.timeout, "timeout") end
  local headers = {}
  for name, value in pairs(request.headers or {}) do
    if type(name) ~= "string" or type(value) ~= "string" then fail("http", "'headers' must map strings to strings") end
    headers[name] = value
  end
  local id = request.id
  if id ~= nil and type(id) ~= "string" and type(id) ~= "number" then fail("http", "'id' must be a string or a number") end
  return {
    kind = "http", url = request.url, method = request.method or "GET", headers = headers, body = request.body,
    timeout = request.timeout, success = request.success, failure = request.failure, id = id,
  }
end

--- Dispatches `action` once, after `seconds`.
function luastore.delay(seconds, action)
  field("delay", seconds, "seconds", "number")
  checkwait("delay", seconds, "seconds", true)
  checkaction("delay", action, "action")
  return { kind = "delay", seconds = seconds, action = action }
end

--- Dispatches `action` every `seconds` while the subscription is declared.
function luastore.timer(seconds, action)
  field("timer", seconds, "seconds", "number")
  checkwait("timer", seconds, "seconds")
  checkaction("timer", action, "action")
  return { kind = "timer", every = seconds, action = action }
end

local function storageKey(fn, key)
  field(fn, key, "key", "string", false, 1)
  if not key:match("^[%w_%-]+$") then fail(fn, "'key' may hold only letters, digits, '_' and '-'", 1) end
end

--- Saves `value` (any data; nil deletes) under `key` in the host's storage folder.
function luastore.save(key, value)
  storageKey("save", key)
  return { kind = "save", key = key, value = value }
end

--- Loads what was saved under `key`; the store then dispatches `{type = success, key, value}` (value nil if none).
function luastore.load(key, success)
  storageKey("load", key)
  field("load", success, "success", "string")
  return { kind = "load", key = key, success = success }
end

--- Writes a line to the host's log.
function luastore.log(message)
  field("log", message, "message", "string")
  return { kind = "log", message = message }
end

return luastore
