// The sandbox's table functions that loop in C over a range a script chooses: `table.move`.
//
// Lua's own `table.move(a, f, e, t)` runs `e - f + 1` steps in C, where no hook fires: moving nothing into nothing
// costs no memory, so `table.move({}, 1, 1e12, 1, {})` ran for hours past any budget. This one gives Lua 5.4's
// results (the same order of reads and writes, metamethods included) and messages, and reads the clock every
// 1,024 steps, raising the budget's `timeout` error past the call's deadline.
//
// Everything here runs inside a protected call the host made, so raising is allowed: each function is `[-n, +m, e]`.
#include "clua_guard.h"

/// How many steps of a loop run between two reads of the clock.
#define STEPS_BETWEEN_CLOCK_READS 1024

/// What a table argument is used for, as Lua's `checktab` asks: a table, or a value whose metatable has the
/// metamethods that use needs.
enum { TABLE_READ = 1, TABLE_WRITE = 2 };

/// [-0, +0, e] Refuses argument `arg` unless it is a table or has the metamethods `needs` asks for (Lua's `checktab`,
/// with its message).
static void check_table(lua_State *L, int arg, int needs) {
    if (lua_type(L, arg) == LUA_TTABLE) return;
    int fields = 0;
    if (lua_getmetatable(L, arg)) {
        int missing = 0;
        if (needs & TABLE_READ) {
            lua_pushliteral(L, "__index");
            missing |= lua_rawget(L, -2 - fields++) == LUA_TNIL;
        }
        if (needs & TABLE_WRITE) {
            lua_pushliteral(L, "__newindex");
            missing |= lua_rawget(L, -2 - fields++) == LUA_TNIL;
        }
        lua_pop(L, fields + 1);
        if (!missing) return;
    }
    luaL_checktype(L, arg, LUA_TTABLE); /* raises Lua's "table expected, got …" */
}

/// `table.move(a1, f, e, t [, a2])` [-(4|5), +1, e]: moves `a1[f..e]` to `a2[t..]` (`a2` defaults to `a1`), forward
/// unless the ranges overlap with `t` inside them (then backward), as Lua 5.4 does; returns `a2`.
static int sandbox_move(lua_State *L) {
    lua_Integer f = luaL_checkinteger(L, 2);
    lua_Integer e = luaL_checkinteger(L, 3);
    lua_Integer t = luaL_checkinteger(L, 4);
    int destination = !lua_isnoneornil(L, 5) ? 5 : 1;
    check_table(L, 1, TABLE_READ);
    check_table(L, destination, TABLE_WRITE);
    if (e >= f) {
        luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
        lua_Integer n = e - f + 1;
        luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
        int steps = STEPS_BETWEEN_CLOCK_READS;
        if (t > e || t <= f || (destination != 1 && !lua_compare(L, 1, destination, LUA_OPEQ))) {
            for (lua_Integer i = 0; i < n; i++) {
                if (--steps == 0) {
                    steps = STEPS_BETWEEN_CLOCK_READS;
                    clua_check_deadline(L);
                }
                lua_geti(L, 1, f + i);
                lua_seti(L, destination, t + i);
            }
        } else {
            for (lua_Integer i = n - 1; i >= 0; i--) {
                if (--steps == 0) {
                    steps = STEPS_BETWEEN_CLOCK_READS;
                    clua_check_deadline(L);
                }
                lua_geti(L, 1, f + i);
                lua_seti(L, destination, t + i);
            }
        }
    }
    lua_pushvalue(L, destination);
    return 1;
}

// MARK: Registration

int clua_push_sandbox_tables(lua_State *L) {
    static const luaL_Reg functions[] = {
        { "move", sandbox_move },
        { NULL, NULL },
    };
    luaL_newlib(L, functions);
    return 1;
}
