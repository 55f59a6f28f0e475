#define _GNU_SOURCE // (timegm, and struct tm's tm_gmtoff and tm_zone)
// `os` in the sandbox (`clua_open_os`, clua_guard.h). Where the host gives the system (`luakit`, `luastore test`),
// Lua's own clock, dates and environment. In a scripted store, a recorded clock: the host sets the time once per
// crossing into the VM (`CLuaGuard.clockMillis`, the time the journal records for the actions it runs), and
// `os.time()`, `os.date()` and `os.clock()` read it, so that a replay, given the recorded times, reads what the
// session read. Dates are in UTC, or at the fixed offset the host set (a named zone's rules change with the
// system's time zone database, which a replay on another machine would read differently). What would end or
// change the process, or touch files, raises naming the function, in both.
#include "clua_guard.h"
#include <limits.h>

#define REFUSED(name)                                                                                               \
    static int refused_##name(lua_State *L) {                                                                       \
        return luaL_error(L, "os." #name " is not available in the sandbox (a script may not end or change the "    \
                             "process, nor touch files)");                                                          \
    }
REFUSED(exit)
REFUSED(execute)
REFUSED(remove)
REFUSED(rename)
REFUSED(tmpname)
REFUSED(setlocale)

/// The recorded time, in whole seconds (rounded down, as `time()` counts them).
static int64_t recorded_seconds(const CLuaGuard *g) {
    int64_t seconds = g->clockMillis / 1000;
    return (g->clockMillis % 1000 < 0) ? seconds - 1 : seconds;
}

/// Argument `arg` as a time (`os.date`'s second argument, `os.difftime`'s): an integer `time_t` holds.
static time_t checked_time(lua_State *L, int arg) {
    lua_Integer t = luaL_checkinteger(L, arg);
    luaL_argcheck(L, (time_t)t == t, arg, "time out-of-bounds");
    return (time_t)t;
}

/// A field of a date table (`os.time(t)`), less `delta`; `fallback` when absent (< 0: it must be there). The
/// messages are Lua's.
static int date_field(lua_State *L, const char *key, int fallback, int delta) {
    int isInteger;
    int type = lua_getfield(L, -1, key);
    lua_Integer value = lua_tointegerx(L, -1, &isInteger);
    if (!isInteger) {
        if (type != LUA_TNIL) return luaL_error(L, "field '%s' is not an integer", key);
        if (fallback < 0) return luaL_error(L, "field '%s' missing in date table", key);
        value = fallback;
    } else {
        if (!(value >= 0 ? value - delta <= INT_MAX : INT_MIN + delta <= value))
            return luaL_error(L, "field '%s' is out-of-bound", key);
        value -= delta;
    }
    lua_pop(L, 1);
    return (int)value;
}

static void set_date_field(lua_State *L, const char *key, int value, int delta) {
    if (value > LUA_MAXINTEGER - delta) {
        luaL_error(L, "field '%s' is out-of-bound", key);
        return;
    }
    lua_pushinteger(L, (lua_Integer)value + delta);
    lua_setfield(L, -2, key);
}

/// Sets a date table's fields (at the top of the stack) from `tm`, in Lua's order.
static void set_date_fields(lua_State *L, const struct tm *tm) {
    set_date_field(L, "year", tm->tm_year, 1900);
    set_date_field(L, "month", tm->tm_mon, 1);
    set_date_field(L, "day", tm->tm_mday, 0);
    set_date_field(L, "hour", tm->tm_hour, 0);
    set_date_field(L, "min", tm->tm_min, 0);
    set_date_field(L, "sec", tm->tm_sec, 0);
    set_date_field(L, "yday", tm->tm_yday, 1);
    set_date_field(L, "wday", tm->tm_wday, 1);
    lua_pushboolean(L, tm->tm_isdst > 0);
    lua_setfield(L, -2, "isdst");
}

/// `os.time([t])`: the recorded time; or the date table `t` (read as local time: at the host's offset) as a
/// time, its fields normalized in place as Lua's `mktime` leaves them.
static int recorded_time(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    if (lua_isnoneornil(L, 1)) {
        lua_pushinteger(L, (lua_Integer)recorded_seconds(g));
        return 1;
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = date_field(L, "year", -1, 1900);
    tm.tm_mon = date_field(L, "month", -1, 1);
    tm.tm_mday = date_field(L, "day", -1, 0);
    tm.tm_hour = date_field(L, "hour", 12, 0);
    tm.tm_min = date_field(L, "min", 0, 0);
    tm.tm_sec = date_field(L, "sec", 0, 0);
    lua_getfield(L, 1, "isdst");
    int daylight = lua_toboolean(L, -1);
    lua_pop(L, 1);
    time_t local = timegm(&tm); // (normalizes `tm`: calendar arithmetic is the same at any fixed offset)
    if (local == (time_t)-1) return luaL_error(L, "time result cannot be represented in this installation");
    if (daylight) { // (as glibc's `mktime` takes it where there is no daylight saving time: the hour before)
        local -= 3600;
        gmtime_r(&local, &tm);
    }
    set_date_fields(L, &tm);
    lua_pushinteger(L, (lua_Integer)local - g->utcOffsetSeconds);
    return 1;
}

/// Whether `conversion` (after a `%`) begins with a conversion `strftime` knows (C99's, as Lua checks them):
/// its length, or 0.
static size_t conversion_length(const char *conversion, size_t length) {
    static const char single[] = "aAbBcCdDeFgGhHIjmMnprRStTuUVwWxXyYzZ%";
    static const char *const pairs[] = { "Ec", "EC", "Ex", "EX", "Ey", "EY", "Od", "Oe", "OH", "OI", "Om", "OM",
                                         "OS", "Ou", "OU", "OV", "Ow", "OW", "Oy" };
    if (length >= 1 && conversion[0] != '\0' && strchr(single, conversion[0]) != NULL) return 1;
    if (length >= 2) {
        for (size_t index = 0; index < sizeof pairs / sizeof pairs[0]; index++) {
            if (conversion[0] == pairs[index][0] && conversion[1] == pairs[index][1]) return 2;
        }
    }
    return 0;
}

/// `os.date([format [, time]])` at the recorded time (or `time`): local time is the host's offset from UTC
/// (`!` asks for UTC), `*t` a date table, anything else `strftime`'s conversions, checked as Lua checks them.
static int recorded_date(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    size_t length;
    const char *format = luaL_optlstring(L, 1, "%c", &length);
    time_t t = lua_isnoneornil(L, 2) ? (time_t)recorded_seconds(g) : checked_time(L, 2);
    const char *end = format + length;
    int32_t offset = g->utcOffsetSeconds;
    int utc = *format == '!';
    if (utc) {
        offset = 0;
        format++;
    }
    struct tm tm;
    time_t shifted;
    if (__builtin_add_overflow(t, (time_t)offset, &shifted) || gmtime_r(&shifted, &tm) == NULL) {
        return luaL_error(L, "date result cannot be represented in this installation");
    }
    char zone[8];
    if (!utc) { // (as `localtime` fills them: UTC's name, or the offset's, as a POSIX `TZ` of a bare offset)
        tm.tm_gmtoff = offset;
        int32_t magnitude = offset < 0 ? -offset : offset;
        if (offset == 0) {
            snprintf(zone, sizeof zone, "UTC");
        } else if (magnitude % 3600 == 0) {
            snprintf(zone, sizeof zone, "%c%02d", offset < 0 ? '-' : '+', (int)(magnitude / 3600));
        } else {
            snprintf(zone, sizeof zone, "%c%02d%02d", offset < 0 ? '-' : '+', (int)(magnitude / 3600),
                     (int)(magnitude % 3600 / 60));
        }
        tm.tm_zone = zone;
    }
    if (strcmp(format, "*t") == 0) {
        lua_createtable(L, 0, 9);
        set_date_fields(L, &tm);
        return 1;
    }
    luaL_Buffer buffer;
    luaL_buffinit(L, &buffer);
    char conversion[4] = { '%' };
    while (format < end) {
        if (*format != '%') {
            luaL_addchar(&buffer, *format++);
            continue;
        }
        format++;
        size_t size = conversion_length(format, (size_t)(end - format));
        if (size == 0) {
            return luaL_argerror(L, 1, lua_pushfstring(L, "invalid conversion specifier '%%%s'", format));
        }
        memcpy(conversion + 1, format, size);
        conversion[size + 1] = '\0';
        format += size;
        char *space = luaL_prepbuffsize(&buffer, 250);
        luaL_addsize(&buffer, strftime(space, 250, conversion, &tm));
    }
    luaL_pushresult(&buffer);
    return 1;
}

/// `os.clock()`: the seconds of the store's recorded clock since the store started (a replay reads the same).
static int recorded_clock(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    lua_pushnumber(L, (lua_Number)(g->clockMillis - g->clockStartMillis) / 1000.0);
    return 1;
}

/// `os.getenv(name)`: what the host set for the store (recorded with it), or nil.
static int recorded_getenv(lua_State *L) {
    const char *name = luaL_checkstring(L, 1);
    if (lua_getfield(L, LUA_REGISTRYINDEX, CLUA_ENVIRONMENT_FIELD) != LUA_TTABLE) {
        lua_pushnil(L);
        return 1;
    }
    if (lua_getfield(L, -1, name) != LUA_TSTRING) {
        lua_pushnil(L);
    }
    return 1;
}

int clua_open_os(lua_State *L) {
    int recorded = lua_toboolean(L, 1);
    lua_getglobal(L, LUA_OSLIBNAME); // Lua's, opened with the other libraries
    int lua = lua_gettop(L);
    lua_createtable(L, 0, 11);
    static const char *const kept[] = { "time", "clock", "date", "getenv", "difftime" };
    static const lua_CFunction replacing[] = { recorded_time, recorded_clock, recorded_date, recorded_getenv, NULL };
    for (size_t index = 0; index < sizeof kept / sizeof kept[0]; index++) {
        if (recorded && replacing[index] != NULL) {
            lua_pushcfunction(L, replacing[index]);
        } else {
            lua_getfield(L, lua, kept[index]);
        }
        lua_setfield(L, -2, kept[index]);
    }
    static const luaL_Reg refusing[] = {
        { "exit", refused_exit }, { "execute", refused_execute }, { "remove", refused_remove },
        { "rename", refused_rename }, { "tmpname", refused_tmpname }, { "setlocale", refused_setlocale },
    };
    for (size_t index = 0; index < sizeof refusing / sizeof refusing[0]; index++) {
        lua_pushcfunction(L, refusing[index].func);
        lua_setfield(L, -2, refusing[index].name);
    }
    lua_pushvalue(L, -1);
    lua_setglobal(L, LUA_OSLIBNAME);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, LUA_OSLIBNAME);
    lua_settop(L, 0);
    return 0;
}
