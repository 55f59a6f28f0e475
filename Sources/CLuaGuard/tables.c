// The sandbox's table functions that loop in C over a range a script chooses: `table.move`, `insert`, `remove`,
// `concat` and `sort`.
//
// Lua's own run their loops in C, where no hook fires, over a range the script picks — or a length its `__len`
// says: moving nothing into nothing costs no memory, so `table.move({}, 1, 1e12, 1, {})` ran for hours past any
// budget, and so did `table.insert(t, 1, v)` on a table whose `__len` answers 1e12. These give Lua 5.4's results
// (the same reads and writes in the same order, metamethods included) and messages, and read the clock every
// 1,024 steps, raising the budget's `timeout` error past the call's deadline. `table.sort`'s comparisons of numbers,
// strings or a proxy's C metamethods run no Lua instruction either: it counts its comparisons the same way.
// (`unpack` is bounded by the stack, `pack` by its arguments.)
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

// MARK: Sorting

/// Intervals shorter than this take their middle element as the pivot; longer ones, once a partition came out too
/// imbalanced, a pivot in their middle half chosen by `Sort.pivots`.
#define PIVOT_CHOICE_LIMIT 100u

/// What one `table.sort` call carries through its recursion: the clock's countdown, and the state of the
/// sequence its pivots are drawn from once a partition came out too imbalanced — a fixed sequence, where Lua 5.4
/// seeds from the clock, so that a sort's result (equal elements' order included) is the same in every run and
/// in a replay.
typedef struct Sort {
    Steps steps;
    unsigned int pivots;
} Sort;

/// The next number of `sort->pivots`' sequence (xorshift; never 0).
static unsigned int next_pivot_seed(Sort *sort) {
    unsigned int x = sort->pivots;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    sort->pivots = x;
    return x;
}

/// [-0, +0, e] Whether the value at `a` sorts before the one at `b` (negative indices): by the order function
/// (argument 2), or by `<`.
static int sorts_before(lua_State *L, Sort *sort, int a, int b) {
    step(L, &sort->steps);
    if (lua_isnil(L, 2)) return lua_compare(L, a, b, LUA_OPLT);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, a - 1); /* (the function is above them now) */
    lua_pushvalue(L, b - 2); /* (and the first value too) */
    lua_call(L, 2, 1);
    int result = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return result;
}

/// [-2, +0, e] `t[i] = ` the top value, then `t[j] = ` the one below it (the table is argument 1).
static void put_both(lua_State *L, lua_Unsigned i, lua_Unsigned j) {
    lua_seti(L, 1, (lua_Integer)i);
    lua_seti(L, 1, (lua_Integer)j);
}

/// [-1, +0, e] With the pivot on the stack (and at `up - 1`), moves the elements of `lo..up` below it before it
/// and those above it after it; returns where the pivot ends (every element before it ≤, after it ≥).
static lua_Unsigned partition(lua_State *L, Sort *sort, lua_Unsigned lo, lua_Unsigned up) {
    lua_Unsigned i = lo, j = up - 1;
    for (;;) {
        /* up from `lo` while the element is below the pivot */
        for (;;) {
            lua_geti(L, 1, (lua_Integer)++i);
            if (!sorts_before(L, sort, -1, -2)) break;
            if (i == up - 1) luaL_error(L, "invalid order function for sorting"); /* (below itself) */
            lua_pop(L, 1);
        }
        /* down from `up - 1` while the pivot is below the element */
        for (;;) {
            lua_geti(L, 1, (lua_Integer)--j);
            if (!sorts_before(L, sort, -3, -1)) break;
            if (j < i) luaL_error(L, "invalid order function for sorting"); /* (past what is below it) */
            lua_pop(L, 1);
        }
        if (j < i) {
            lua_pop(L, 1);
            put_both(L, up - 1, i); /* the pivot to its place, what was there to `up - 1` */
            return i;
        }
        put_both(L, i, j);
    }
}

/// [-0, +0, e] Sorts `t[lo..up]` (the table is argument 1): quicksort on the median of the first, middle and last
/// elements, recursing into the shorter side and looping on the longer, as Lua 5.4's `table.sort` does, in the
/// same reads, comparisons and writes.
static void sort_interval(lua_State *L, Sort *sort, lua_Unsigned lo, lua_Unsigned up, unsigned int seed) {
    while (lo < up) {
        lua_geti(L, 1, (lua_Integer)lo);
        lua_geti(L, 1, (lua_Integer)up);
        if (sorts_before(L, sort, -1, -2)) put_both(L, lo, up);
        else lua_pop(L, 2);
        if (up - lo == 1) return;
        lua_Unsigned p;
        if (up - lo < PIVOT_CHOICE_LIMIT || seed == 0) {
            p = (lo + up) / 2;
        } else {
            lua_Unsigned quarter = (up - lo) / 4;
            p = seed % (quarter * 2) + (lo + quarter);
        }
        lua_geti(L, 1, (lua_Integer)p);
        lua_geti(L, 1, (lua_Integer)lo);
        if (sorts_before(L, sort, -2, -1)) {
            put_both(L, p, lo);
        } else {
            lua_pop(L, 1);
            lua_geti(L, 1, (lua_Integer)up);
            if (sorts_before(L, sort, -1, -2)) put_both(L, p, up);
            else lua_pop(L, 2);
        }
        if (up - lo == 2) return;
        lua_geti(L, 1, (lua_Integer)p); /* the pivot: kept on the stack, and moved to `up - 1` */
        lua_pushvalue(L, -1);
        lua_geti(L, 1, (lua_Integer)(up - 1));
        put_both(L, p, up - 1);
        p = partition(L, sort, lo, up);
        lua_Unsigned shorter;
        if (p - lo < up - p) {
            sort_interval(L, sort, lo, p - 1, seed);
            shorter = p - lo;
            lo = p + 1;
        } else {
            sort_interval(L, sort, p + 1, up, seed);
            shorter = up - p;
            up = p - 1;
        }
        if ((up - lo) / 128 > shorter) seed = next_pivot_seed(sort); /* too imbalanced: pivots chosen from now on */
    }
}

/// `table.sort(t [, comp])` [-(1|2), +0, e]: as Lua 5.4's, reading the clock as it goes (a sort whose comparisons
/// run in C — numbers, strings, a proxy's metamethods — runs no Lua instruction for a hook to stop).
static int sandbox_sort(lua_State *L) {
    lua_Integer n = checked_length(L, TABLE_READ | TABLE_WRITE);
    if (n > 1) {
        luaL_argcheck(L, n < INT_MAX, 1, "array too big");
        if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
        lua_settop(L, 2);
        Sort sort = { { STEPS_BETWEEN_CLOCK_READS }, 0x2545F491u };
        sort_interval(L, &sort, 1, (lua_Unsigned)n, 0);
    }
    return 0;
}

// MARK: Registration

int clua_push_sandbox_tables(lua_State *L) {
    static const luaL_Reg functions[] = {
        { "move", sandbox_move },
        { "insert", sandbox_insert },
        { "remove", sandbox_remove },
        { "concat", sandbox_concat },
        { "sort", sandbox_sort },
        { NULL, NULL },
    };
    luaL_newlib(L, functions);
    return 1;
}
