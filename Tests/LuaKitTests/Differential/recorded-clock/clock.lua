-- os.date and os.time(t) at explicit times, formats and date tables, and their errors: stock lua5.4 under a TZ of a
-- fixed offset prints what a VM with the recorded clock at that offset prints (RecordedClockTests).
-- A table's fields, sorted: "day=1 hour=12 …".
local function fields(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(t[k]) end
  return table.concat(parts, " ")
end

local times = { 0, 1, -1, 86399, 951782400, 1709164800, 1735689599, 1772357400, -2208988800, 4102444800, 253402300799 }
local formats = { "%c", "%x", "%X", "%Y-%m-%d %H:%M:%S", "%a %A %b %B %d %e %j %U %W %u %w", "%y %C %G %g %V %D %F %T %R %r %p %I",
  "%Z %z", "%Ec %EC %Ex %EX %Ey %EY %Od %Oe %OH %OI %Om %OM %OS %Ou %OU %OV %Ow %OW %Oy", "%%", "%n%t", "plain text", "", "%h" }
for _, t in ipairs(times) do
  for _, f in ipairs(formats) do
    print(t, f, os.date(f, t), os.date("!" .. f, t))
  end
  for _, utc in ipairs({ "*t", "!*t" }) do print(t, utc, fields(os.date(utc, t))) end
end
local function show(t)
  local ok, result = pcall(os.time, t)
  print(ok, result, fields(t))
end
show({ year = 2020, month = 14, day = 35, hour = 25 })
show({ year = 2024, month = 2, day = 29 })
show({ year = 2024, month = 3, day = 0, hour = 0, min = -1, sec = 61 })
show({ year = 1969, month = 12, day = 31, hour = 23, min = 59, sec = 58 })
show({ year = 2000, month = 1, day = 1, isdst = true })
show({ year = 2000, month = 1 })
show({ year = 2000, day = 1 })
show({ month = 1, day = 1 })
show({ year = "2000", month = "5", day = "7" })
show({ year = 2000.5, month = 1, day = 1 })
show({ year = 2000, month = true, day = 1 })
show({ year = 2^40, month = 1, day = 1 })
print(pcall(os.date, "%Q", 0))
print(pcall(os.date, "%E", 0))
print(pcall(os.date, "abc%", 0))
print(pcall(os.date, "%Ez", 0))
print(pcall(os.date, "%Y", 1.5))
print(pcall(os.date, "%Y", "x"))
print(pcall(os.date, 5, 0))
print(pcall(os.time, 5))
print(os.difftime(10, 4), pcall(os.difftime, 10), pcall(os.difftime))
print(math.type(os.time()), type(os.clock()), type(os.date()))
