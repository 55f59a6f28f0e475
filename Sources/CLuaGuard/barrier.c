// The common cases of a write barrier's `__index` and `__newindex`, in C.
//
// LuaStore keeps an app's state in plain Lua tables and hands scripts proxies: empty tables whose metamethods
// forward to the real table, journal every write (so a failing transaction can be undone) and record what
// changed (so readers re-run only when their inputs did). Written in Lua, each access to the state cost a Lua
// function call plus several C calls for type tests (Lua has no cheaper way to ask whether a value is a
// table); `state.count = state.count + 1` cost ≈ 250 ns, ten times the reducer itself. Here the same work
// costs a few raw table operations, and everything that is not the common case — read tracking, a key or
// value that is a table, a key that appears or goes away, an error to raise — is handed, unchanged, to the Lua
// functions the barrier was made with, which do exactly what the Lua metamethods did before.
//
// The functions are made by `makebarrier{…}` (trusted host code only) and close over the tables the Lua side
// keeps; the shared status table says which mode the runtime is in and how long the journal is.
#include "clua_guard.h"

// Slots of the status table (kept in step with the Lua runtime that uses the barrier).
#define STATUS_MODE 1           /* 0: no function is running; 1: writing (reduce, migrate); 2: reading */
#define STATUS_JOURNAL_COUNT 2  /* how many journal slots the open transaction has filled */
#define STATUS_CHANGES 3        /* real table -> { key -> true }: what changed since the last flush */
#define STATUS_SUBSCRIPTIONS_DIRTY 4
#define MODE_WRITE 1

// __index upvalues
#define INDEX_TARGETS lua_upvalueindex(1)   /* proxy -> real table */
#define INDEX_PROXIES lua_upvalueindex(2)   /* real table -> proxy */
#define INDEX_STATUS lua_upvalueindex(3)
#define INDEX_FALLBACK lua_upvalueindex(4)  /* the Lua __index, for everything else */

// __newindex upvalues
#define WRITE_TARGETS lua_upvalueindex(1)
#define WRITE_JOURNAL lua_upvalueindex(2)     /* (table, key, old value) triples */
#define WRITE_DEPENDENTS lua_upvalueindex(3)  /* real table -> key -> readers */
#define WRITE_STATUS lua_upvalueindex(4)
#define WRITE_FALLBACK lua_upvalueindex(5)    /* the Lua __newindex, for everything else */
#define WRITE_NOTE lua_upvalueindex(6)        /* note(real, byKey, key): records a change for readers */

static int is_writing(lua_State *L, int status) {
    int isnum = 0;
    lua_Integer mode = (lua_rawgeti(L, status, STATUS_MODE), lua_tointegerx(L, -1, &isnum));
    lua_pop(L, 1);
    return isnum && mode == MODE_WRITE;
}

/// Calls the Lua fallback with the metamethod's arguments and returns what it returns.
static int fall_back(lua_State *L, int fallback, int arguments, int results) {
    lua_settop(L, arguments);
    lua_pushvalue(L, fallback);
    lua_insert(L, 1);
    lua_call(L, arguments, results);
    return results;
}

/// `__index(proxy, key)` while writing: the real table's value, a table as its proxy.
static int barrier_index(lua_State *L) {
    if (!is_writing(L, INDEX_STATUS) || lua_type(L, 2) == LUA_TTABLE) return fall_back(L, INDEX_FALLBACK, 2, 1);
    lua_settop(L, 2);
    lua_pushvalue(L, 1);
    if (lua_rawget(L, INDEX_TARGETS) != LUA_TTABLE) return fall_back(L, INDEX_FALLBACK, 2, 1); /* 3: real */
    lua_pushvalue(L, 2);
    if (lua_rawget(L, 3) != LUA_TTABLE) return 1; /* 4: the value */
    lua_pushvalue(L, 4);
    if (lua_rawget(L, INDEX_PROXIES) != LUA_TNIL) return 1; /* its proxy, made before */
    return fall_back(L, INDEX_FALLBACK, 2, 1);
}

/// `__newindex(proxy, key, value)` while writing, for a key that stays (neither the old nor the new value is
/// nil) and values that are not tables: journaled, written, recorded for the readers of that table.
static int barrier_newindex(lua_State *L) {
    lua_settop(L, 3);
    int keyType = lua_type(L, 2);
    int valueType = lua_type(L, 3);
    if (!is_writing(L, WRITE_STATUS) || keyType == LUA_TTABLE || keyType == LUA_TNIL || valueType == LUA_TTABLE ||
        valueType == LUA_TNIL) {
        return fall_back(L, WRITE_FALLBACK, 3, 0);
    }
    lua_pushvalue(L, 1);
    if (lua_rawget(L, WRITE_TARGETS) != LUA_TTABLE) return fall_back(L, WRITE_FALLBACK, 3, 0); /* 4: real */
    lua_pushvalue(L, 2);
    int oldType = lua_rawget(L, 4); /* 5: the old value */
    if (oldType == LUA_TNIL || oldType == LUA_TTABLE) return fall_back(L, WRITE_FALLBACK, 3, 0);
    if (lua_rawequal(L, 5, 3)) return 0;
    // (A NaN key never gets here: no table holds a value under NaN, so its old value is nil.)
    int isnum = 0;
    lua_Integer count = (lua_rawgeti(L, WRITE_STATUS, STATUS_JOURNAL_COUNT), lua_tointegerx(L, -1, &isnum));
    lua_pop(L, 1);
    if (!isnum) return fall_back(L, WRITE_FALLBACK, 3, 0);
    // Journal first: growing it may raise (memory), and then nothing has changed yet.
    lua_pushvalue(L, 4);
    lua_rawseti(L, WRITE_JOURNAL, count + 1);
    lua_pushvalue(L, 2);
    lua_rawseti(L, WRITE_JOURNAL, count + 2);
    lua_pushvalue(L, 5);
    lua_rawseti(L, WRITE_JOURNAL, count + 3);
    lua_pushinteger(L, count + 3);
    lua_rawseti(L, WRITE_STATUS, STATUS_JOURNAL_COUNT);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_rawset(L, 4); /* the key exists: no allocation, no error */
    lua_pushvalue(L, 4);
    if (lua_rawget(L, WRITE_DEPENDENTS) == LUA_TNIL) return 0; /* 6: who reads this table */
    // Often the change is recorded already (the same field written since the last flush) and the
    // subscriptions are stale anyway: then there is nothing to add.
    if (lua_rawgeti(L, WRITE_STATUS, STATUS_SUBSCRIPTIONS_DIRTY) == LUA_TBOOLEAN && lua_toboolean(L, -1) &&
        lua_rawgeti(L, WRITE_STATUS, STATUS_CHANGES) == LUA_TTABLE) {
        lua_pushvalue(L, 4);
        if (lua_rawget(L, -2) == LUA_TTABLE) {
            lua_pushvalue(L, 2);
            if (lua_rawget(L, -2) == LUA_TBOOLEAN) return 0;
        }
    }
    lua_settop(L, 6);
    lua_pushvalue(L, WRITE_NOTE);
    lua_pushvalue(L, 4);
    lua_pushvalue(L, 6);
    lua_pushvalue(L, 2);
    lua_call(L, 3, 0);
    return 0;
}

// beginaction upvalues
#define BEGIN_JOURNAL lua_upvalueindex(1)
#define BEGIN_STATUS lua_upvalueindex(2)

/// `beginaction(action, restart)`: the start of one action's transaction in a run — `false` (and nothing
/// else) when the action has no string `type`; otherwise, with `restart`, a fresh time budget for it
/// (`restartbudget()`), then the last transaction's journal dropped and the mode set to writing; `true`.
/// One call instead of three, per action.
static int barrier_begin_action(lua_State *L) {
    int isnum = 0;
    if (lua_type(L, 1) != LUA_TTABLE || lua_getfield(L, 1, "type") != LUA_TSTRING) {
        lua_pushboolean(L, 0);
        return 1;
    }
    if (lua_toboolean(L, 2)) clua_restart_budget_now(L);
    lua_Integer count = (lua_rawgeti(L, BEGIN_STATUS, STATUS_JOURNAL_COUNT), lua_tointegerx(L, -1, &isnum));
    if (isnum) {
        for (lua_Integer i = 1; i <= count; i++) {
            lua_pushnil(L);
            lua_rawseti(L, BEGIN_JOURNAL, i);
        }
    }
    lua_pushinteger(L, 0);
    lua_rawseti(L, BEGIN_STATUS, STATUS_JOURNAL_COUNT);
    lua_pushinteger(L, MODE_WRITE);
    lua_rawseti(L, BEGIN_STATUS, STATUS_MODE);
    lua_pushboolean(L, 1);
    return 1;
}

int clua_make_barrier(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    static const char *const indexFields[] = { "targets", "proxies", "status", "index" };
    static const char *const writeFields[] = { "targets", "journal", "dependents", "status", "newindex", "note" };
    for (int i = 0; i < 4; i++) {
        if (lua_getfield(L, 1, indexFields[i]) == LUA_TNIL) return luaL_error(L, "makebarrier: %s is missing", indexFields[i]);
    }
    lua_pushcclosure(L, barrier_index, 4);
    for (int i = 0; i < 6; i++) {
        if (lua_getfield(L, 1, writeFields[i]) == LUA_TNIL) return luaL_error(L, "makebarrier: %s is missing", writeFields[i]);
    }
    lua_pushcclosure(L, barrier_newindex, 6);
    lua_getfield(L, 1, "journal");
    lua_getfield(L, 1, "status");
    lua_pushcclosure(L, barrier_begin_action, 2);
    return 3;
}
