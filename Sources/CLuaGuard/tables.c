// The sandbox's table functions that loop in C over a range a script chooses: `table.move`, `insert`, `remove` and
// `concat`.
//
// Lua's own run their loops in C, where no hook fires, over a range the script picks — or a length its `__len`
// says: moving nothing into nothing costs no memory, so `table.move({}, 1, 1e12, 1, {})` ran for hours past any
// budget, and so did `table.insert(t, 1, v)` on a table whose `__len` answers 1e12. These give Lua 5.4's results
// (the same reads and writes in the same order, metamethods included) and messages, and read the clock every
// 1,024 steps, raising the budget's `timeout` error past the call's deadline. (`table.sort` writes what it moves,
// so the memory cap bounds it; `unpack` is bounded by the stack, `pack` by its arguments.)
//
// Everything here runs inside a protected call the host made, so raising is allowed: each function is `[-n, +m, e]`.
#include "clua_guard.h"

/// How many steps of a loop run between two reads of the clock.
#define STEPS_BETWEEN_CLOCK_READS 1024

/// What a table argument is used for, as Lua's `checktab` asks: a table, or a value whose metatable has the
/// metamethods that use needs.
enum { TABLE_READ = 1, TABLE_WRITE = 2, TABLE_LENGTH = 4 };

/// A loop's countdown to its next look at the clock.
typedef struct Steps {
    int left;
} Steps;

/// [-0, +0, e] Counts a step; every `STEPS_BETWEEN_CLOCK_READS` raises the budget's `timeout` once it is spent.
static inline void step(lua_State *L, Steps *steps) {
    if (--steps->left > 0) return;
    steps->left = STEPS_BETWEEN_CLOCK_READS;
    clua_check_deadline(L);
}

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
        if (needs & TABLE_LENGTH) {
            lua_pushliteral(L, "__len");
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
        Steps steps = { STEPS_BETWEEN_CLOCK_READS };
        if (t > e || t <= f || (destination != 1 && !lua_compare(L, 1, destination, LUA_OPEQ))) {
            for (lua_Integer i = 0; i < n; i++) {
                step(L, &steps);
                lua_geti(L, 1, f + i);
                lua_seti(L, destination, t + i);
            }
        } else {
            for (lua_Integer i = n - 1; i >= 0; i--) {
                step(L, &steps);
                lua_geti(L, 1, f + i);
                lua_seti(L, destination, t + i);
            }
        }
    }
    lua_pushvalue(L, destination);
    return 1;
}

/// [-0, +0, e] The length of the table argument 1 (`#`, its `__len` included), after checking it is one that
/// `needs` allows.
static lua_Integer checked_length(lua_State *L, int needs) {
    check_table(L, 1, needs | TABLE_LENGTH);
    return luaL_len(L, 1);
}

/// `table.insert(t, [pos,] value)` [-(2|3), +0, e]: as Lua 5.4's: at the end, or at `pos` in `1..#t + 1`, moving
/// the elements after it up one.
static int sandbox_insert(lua_State *L) {
    lua_Integer end = checked_length(L, TABLE_READ | TABLE_WRITE);
    end = (lua_Integer)((lua_Unsigned)end + 1u); /* the first empty place (wrapping as Lua's `luaL_intop`) */
    lua_Integer position;
    switch (lua_gettop(L)) {
    case 2:
        position = end;
        break;
    case 3: {
        position = luaL_checkinteger(L, 2);
        luaL_argcheck(L, (lua_Unsigned)position - 1u < (lua_Unsigned)end, 2, "position out of bounds");
        Steps steps = { STEPS_BETWEEN_CLOCK_READS };
        for (lua_Integer i = end; i > position; i--) {
            step(L, &steps);
            lua_geti(L, 1, i - 1);
            lua_seti(L, 1, i);
        }
        break;
    }
    default:
        return luaL_error(L, "wrong number of arguments to 'insert'");
    }
    lua_seti(L, 1, position);
    return 0;
}

/// `table.remove(t [, pos])` [-(1|2), +1, e]: as Lua 5.4's: removes and returns `t[pos]` (default `#t`), moving the
/// elements after it down one.
static int sandbox_remove(lua_State *L) {
    lua_Integer size = checked_length(L, TABLE_READ | TABLE_WRITE);
    lua_Integer position = luaL_optinteger(L, 2, size);
    if (position != size) {
        luaL_argcheck(L, (lua_Unsigned)position - 1u <= (lua_Unsigned)size, 1, "position out of bounds"); /* (#1, as Lua 5.4.4 says) */
    }
    lua_geti(L, 1, position);
    Steps steps = { STEPS_BETWEEN_CLOCK_READS };
    for (; position < size; position++) {
        step(L, &steps);
        lua_geti(L, 1, position + 1);
        lua_seti(L, 1, position);
    }
    lua_pushnil(L);
    lua_seti(L, 1, position);
    return 1;
}

/// [-0, +0, e] Adds `t[i]` (argument 1) to the buffer, refusing what is neither a string nor a number.
static void add_field(lua_State *L, luaL_Buffer *buffer, lua_Integer i) {
    lua_geti(L, 1, i);
    if (!lua_isstring(L, -1)) {
        luaL_error(L, "invalid value (%s) at index %I in table for 'concat'", luaL_typename(L, -1), (LUAI_UACINT)i);
    }
    luaL_addvalue(buffer);
}

/// `table.concat(t [, sep [, i [, j]]])` [-(1…4), +1, e]: as Lua 5.4's.
static int sandbox_concat(lua_State *L) {
    lua_Integer last = checked_length(L, TABLE_READ);
    size_t separatorLength;
    const char *separator = luaL_optlstring(L, 2, "", &separatorLength);
    lua_Integer i = luaL_optinteger(L, 3, 1);
    last = luaL_optinteger(L, 4, last);
    luaL_Buffer buffer;
    luaL_buffinit(L, &buffer);
    Steps steps = { STEPS_BETWEEN_CLOCK_READS };
    for (; i < last; i++) {
        step(L, &steps);
        add_field(L, &buffer, i);
        luaL_addlstring(&buffer, separator, separatorLength);
    }
    if (i == last) add_field(L, &buffer, i);
    luaL_pushresult(&buffer);
    return 1;
}

// MARK: Registration

int clua_push_sandbox_tables(lua_State *L) {
    static const luaL_Reg functions[] = {
        { "move", sandbox_move },
        { "insert", sandbox_insert },
        { "remove", sandbox_remove },
        { "concat", sandbox_concat },
        { NULL, NULL },
    };
    luaL_newlib(L, functions);
    return 1;
}
