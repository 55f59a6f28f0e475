-- os under luakit (LuaLimits.system = .system): Lua's clock, dates and environment — results and messages as Lua's.
local out = {}
local function p(...) local t = table.pack(...) for i = 1, t.n do t[i] = tostring(t[i]) end out[#out + 1] = table.concat(t, " ") end
p(math.type(os.time()), math.type(os.clock()), os.time() > 1.7e9)
p(os.date("!%Y-%m-%d %H:%M:%S", 86400 * 365 + 3723), os.date("!%A %B %j", 0), os.date("!%c", 1e9))
local t = os.date("!*t", 1234567890)
p(t.year, t.month, t.day, t.hour, t.min, t.sec, t.wday, t.yday, t.isdst)
p(os.time({ year = 2020, month = 2, day = 30, hour = 12 }) - os.time({ year = 2020, month = 3, day = 1, hour = 12 }))
p(os.difftime(10, 4), pcall(os.difftime, 5), math.type(os.difftime(1, 1)))
p(os.getenv("HOME") == os.getenv("HOME"), os.getenv("LUASTORE_SURELY_NOT_SET_ANYWHERE"))
p(pcall(os.date, "%Ez"))
p(pcall(os.time, { year = 2020 }))
p(pcall(os.time, { year = 2020, month = 1, day = "x" }))
p(pcall(os.getenv))
p(pcall(os.difftime))
p(type(os), type(require("os")), require("os") == os)
print(table.concat(out, "\n"))
