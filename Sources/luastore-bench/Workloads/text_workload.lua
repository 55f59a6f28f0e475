-- A string-heavy workload: templating, trimming, url-encoding, splitting, formatting. Run whole by `luakit`
-- and by the stock `lua5.4` (scripts/bench: strings.text_script_vs_stock_lua_ratio).
local template = "Hello {name}, you have {count} new {things} since {date}."
local words = {}
for w in ("the quick brown fox jumps over the lazy dog and keeps running far away"):gmatch("%a+") do words[#words + 1] = w end
local function render(t, vars) return (t:gsub("{(%w+)}", vars)) end
local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end
local function urlencode(s) return (s:gsub("[^%w%-_%.~]", function(c) return string.format("%%%02X", c:byte()) end)) end
local total = 0
for i = 1, 200000 do
  local vars = { name = words[i % #words + 1], count = tostring(i), things = "messages", date = "2026-11-22" }
  local text = render(template, vars)
  local padded = "   " .. text .. "   "
  local t = trim(padded)
  local u = urlencode(t)
  local a, b = t:find("you have", 1, true)
  local k, v = ("key" .. i .. "=value" .. i):match("^(%w+)=(%w+)$")
  total = total + #u + (a or 0) + #k + #v + #string.format("%d:%s:%.2f", i, k, i / 3)
end
return total
