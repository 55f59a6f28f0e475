// A journaling write barrier over proxy tables, and the loop that reduces a run of actions through it, in C.
//
// LuaStore keeps an app's state in plain Lua tables and hands scripts proxies: empty tables whose metamethods
// forward to the real table, journal every write (so a failing transaction can be undone) and record what
// changed (so readers re-run only when their inputs did). Written in Lua, each access to the state cost a Lua
// function call plus several C calls for type tests (Lua has no cheaper way to ask whether a value is a
// table), and the loop over a run of actions several more C calls per action: `state.count = state.count + 1`
// in a run cost ≈ 390 ns per action, thirteen times the reducer itself. Here the common cases cost a few raw
// table operations, and everything else — read tracking, a key or value that is a table, a key that appears
// or goes away, an error to raise — is handed, unchanged, to the Lua functions the barrier was made with.
//
// The barrier's own state (mode, journal length, whether the declared subscriptions are stale, the position
// in a run) lives in a C struct every function of one barrier shares, so the hot paths read it for free; the
// Lua side reads and sets it through the functions `makebarrier` returns.
#include "clua_guard.h"

enum { MODE_CLOSED = 0, MODE_WRITE = 1, MODE_READ = 2 };

typedef struct Barrier {
    lua_Integer mode;           /* MODE_CLOSED; MODE_WRITE (reduce, migrate); MODE_READ (props, selectors) */
    lua_Integer count;          /* journal slots the open (or last) transaction filled */
    lua_Integer filled;         /* journal slots that may hold something (from earlier transactions) */
    lua_Integer position;       /* the action of a run being reduced */
    lua_Integer flushes;        /* how many times the change set was handed over and started afresh */
    lua_Integer made;           /* proxies made since the caches were last emptied */
    lua_Integer lastNotedAt;    /* `flushes` when __newindex remembered the last change it saw recorded */
    int subscriptionsDirty;     /* `subscriptions` must run again before its result is used */
} Barrier;

// Every function's first upvalues: the Barrier userdata, then what making a proxy needs.
#define CONTROL lua_upvalueindex(1)
#define TARGETS lua_upvalueindex(2)   /* proxy -> real table */
#define PROXIES lua_upvalueindex(3)   /* real table -> proxy */
#define META lua_upvalueindex(4)      /* the proxies' metatable */
#define WEAK_KEYS lua_upvalueindex(5) /* { __mode = "k" } */
#define WEAK_ALL lua_upvalueindex(6)  /* { __mode = "kv" } */
#define FIRST_OWN_UPVALUE 7

/// How many proxies may be made before the caches turn weak (so proxies no one holds any more can be
/// collected: props walking a large list, say); the Lua side empties or replaces them between calls.
#define PROXIES_BEFORE_WEAK 4096

static Barrier *barrier(lua_State *L) { return (Barrier *)lua_touserdata(L, CONTROL); }

/// [-1, +1] Replaces the real table on top with its proxy, made now if it has none.
static void to_proxy(lua_State *L, Barrier *b) {
    lua_pushvalue(L, -1);
    if (lua_rawget(L, PROXIES) != LUA_TNIL) { /* made before */
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    lua_createtable(L, 0, 0); /* real, proxy */
    lua_pushvalue(L, META);
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_pushvalue(L, -3);
    lua_rawset(L, TARGETS); /* targets[proxy] = real */
    lua_pushvalue(L, -2);
    lua_pushvalue(L, -2);
    lua_rawset(L, PROXIES); /* proxies[real] = proxy */
    lua_remove(L, -2);
    if (++b->made == PROXIES_BEFORE_WEAK) {
        lua_pushvalue(L, WEAK_KEYS);
        lua_setmetatable(L, TARGETS);
        lua_pushvalue(L, WEAK_ALL);
        lua_setmetatable(L, PROXIES);
    }
}

/// Calls the Lua fallback with the metamethod's arguments and returns what it returns.
static int fall_back(lua_State *L, int fallback, int arguments, int results) {
    lua_settop(L, arguments);
    lua_pushvalue(L, fallback);
    lua_insert(L, 1);
    lua_call(L, arguments, results);
    return results;
}

/// Appends (table, key, old value) at the given stack indices to the journal. May raise (memory) before
/// anything is recorded.
static void journal_append(lua_State *L, Barrier *b, int journal, int table, int key, int old) {
    if (b->count + 3 > b->filled) b->filled = b->count + 3; /* first: a slot filled before a raise is emptied too */
    lua_pushvalue(L, table);
    lua_rawseti(L, journal, b->count + 1);
    lua_pushvalue(L, key);
    lua_rawseti(L, journal, b->count + 2);
    lua_pushvalue(L, old);
    lua_rawseti(L, journal, b->count + 3);
    b->count += 3;
}

/// Empties the journal's slots past the open transaction's, so what earlier transactions replaced can be
/// collected. Not needed for correctness (only the first `count` slots are ever read), so it is done at
/// flushes and rollbacks, not at every transaction.
static void clear_journal_tail(lua_State *L, Barrier *b, int journal) {
    for (lua_Integer i = b->count + 1; i <= b->filled; i++) {
        lua_pushnil(L);
        lua_rawseti(L, journal, i);
    }
    b->filled = b->count;
}

/// Drops the last transaction's journal (its slots are overwritten, not emptied) and opens a new one.
static void begin_transaction(Barrier *b) {
    b->count = 0;
    b->mode = MODE_WRITE;
}

// MARK: The metamethods

#define INDEX_FALLBACK lua_upvalueindex(FIRST_OWN_UPVALUE) /* the Lua __index, for everything else */

/// `__index(proxy, key)` while writing: the real table's value, a table as its proxy.
static int barrier_index(lua_State *L) {
    Barrier *b = barrier(L);
    // (Lua calls a metamethod with exactly its arguments; anything else is handed over.)
    if (b->mode != MODE_WRITE || lua_gettop(L) != 2 || lua_type(L, 2) == LUA_TTABLE) {
        return fall_back(L, INDEX_FALLBACK, 2, 1);
    }
    lua_pushvalue(L, 1);
    if (lua_rawget(L, TARGETS) != LUA_TTABLE) return fall_back(L, INDEX_FALLBACK, 2, 1); /* 3: real */
    lua_pushvalue(L, 2);
    if (lua_rawget(L, 3) == LUA_TTABLE) { /* 4: the value */
        // The script is about to use this table (it asked for it): start fetching it, and what usually lies
        // right after it (its slots, allocated next when it was made), while its proxy is found or made. In a
        // large state the table is rarely in cache, and each miss costs ≈ 100 ns.
        const char *table = (const char *)lua_topointer(L, 4);
        __builtin_prefetch(table);
        __builtin_prefetch(table + 64);
        __builtin_prefetch(table + 128);
        to_proxy(L, b);
    }
    return 1;
}

/// `proxy(real)`: the proxy of a real table, made now if it has none.
static int barrier_proxy(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    to_proxy(L, barrier(L));
    return 1;
}

/// `made()`: proxies made since `made(0)` (which the Lua side calls when it empties the caches).
static int barrier_made(lua_State *L) {
    Barrier *b = barrier(L);
    if (lua_gettop(L) >= 1) b->made = luaL_checkinteger(L, 1);
    lua_pushinteger(L, b->made);
    return 1;
}

#define WRITE_JOURNAL lua_upvalueindex(FIRST_OWN_UPVALUE)        /* (table, key, old value) triples */
#define WRITE_DEPENDENTS lua_upvalueindex(FIRST_OWN_UPVALUE + 1) /* real table -> key -> readers */
#define WRITE_CHANGES lua_upvalueindex(FIRST_OWN_UPVALUE + 2)    /* { [1] = real -> { key -> true } since the last flush } */
#define WRITE_FALLBACK lua_upvalueindex(FIRST_OWN_UPVALUE + 3)   /* the Lua __newindex, for everything else */
#define WRITE_NOTE lua_upvalueindex(FIRST_OWN_UPVALUE + 4)       /* note(real, byKey, key): records a change */
#define WRITE_LAST_TABLE lua_upvalueindex(FIRST_OWN_UPVALUE + 5) /* the table and key of the last change seen */
#define WRITE_LAST_KEY lua_upvalueindex(FIRST_OWN_UPVALUE + 6)   /* recorded, valid while `flushes` is `lastNotedAt` */

/// Remembers that the change of `real[key]` (at 4 and 2) is recorded in the current change set.
static void remember_noted(lua_State *L, Barrier *b) {
    lua_pushvalue(L, 4);
    lua_replace(L, WRITE_LAST_TABLE);
    lua_pushvalue(L, 2);
    lua_replace(L, WRITE_LAST_KEY);
    b->lastNotedAt = b->flushes;
}

/// `__newindex(proxy, key, value)` while writing, for a key that stays (neither the old nor the new value is
/// nil) and values that are not tables: journaled, written, recorded for the readers of that table.
static int barrier_newindex(lua_State *L) {
    Barrier *b = barrier(L);
    int keyType = lua_type(L, 2);
    int valueType = lua_type(L, 3);
    if (b->mode != MODE_WRITE || lua_gettop(L) != 3 || keyType == LUA_TTABLE || keyType == LUA_TNIL || valueType == LUA_TTABLE ||
        valueType == LUA_TNIL) {
        return fall_back(L, WRITE_FALLBACK, 3, 0);
    }
    lua_pushvalue(L, 1);
    if (lua_rawget(L, TARGETS) != LUA_TTABLE) return fall_back(L, WRITE_FALLBACK, 3, 0); /* 4: real */
    lua_pushvalue(L, 2);
    int oldType = lua_rawget(L, 4); /* 5: the old value (taken by the journal below) */
    // (A NaN key never gets past this: no table holds a value under NaN, so its old value is nil.)
    if (oldType == LUA_TNIL || oldType == LUA_TTABLE) return fall_back(L, WRITE_FALLBACK, 3, 0);
    if (lua_rawequal(L, 5, 3)) return 0;
    // Journaled first: growing the journal may raise, and then nothing has changed yet. (The old value is on
    // top, where the journal takes it from; its slots are filled last to first.)
    if (b->count + 3 > b->filled) b->filled = b->count + 3;
    lua_rawseti(L, WRITE_JOURNAL, b->count + 3);
    lua_pushvalue(L, 2);
    lua_rawseti(L, WRITE_JOURNAL, b->count + 2);
    lua_pushvalue(L, 4);
    lua_rawseti(L, WRITE_JOURNAL, b->count + 1);
    b->count += 3;
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_rawset(L, 4); /* the key exists: no allocation, no error */
    // Often the change is recorded already (the same field written since the last flush) and the
    // subscriptions are stale anyway: then there is nothing to add. The same field as last time is known
    // without a lookup.
    if (b->subscriptionsDirty && b->lastNotedAt == b->flushes && lua_rawequal(L, 4, WRITE_LAST_TABLE) &&
        lua_rawequal(L, 2, WRITE_LAST_KEY)) {
        return 0;
    }
    lua_pushvalue(L, 4);
    if (lua_rawget(L, WRITE_DEPENDENTS) == LUA_TNIL) return 0; /* 5: who reads this table */
    if (b->subscriptionsDirty && lua_rawgeti(L, WRITE_CHANGES, 1) == LUA_TTABLE) {
        lua_pushvalue(L, 4);
        if (lua_rawget(L, -2) == LUA_TTABLE) {
            lua_pushvalue(L, 2);
            if (lua_rawget(L, -2) != LUA_TNIL) {
                remember_noted(L, b);
                return 0;
            }
        }
    }
    lua_settop(L, 5);
    lua_pushvalue(L, WRITE_NOTE);
    lua_pushvalue(L, 4);
    lua_pushvalue(L, 5);
    lua_pushvalue(L, 2);
    lua_call(L, 3, 0);
    remember_noted(L, b);
    return 0;
}

// MARK: Runs of actions

#define RUN_HOLDER lua_upvalueindex(FIRST_OWN_UPVALUE)    /* holder.state is the app's state table */
#define RUN_ADOPT lua_upvalueindex(FIRST_OWN_UPVALUE + 1) /* adopt(result): installs a state the reducer returned */
#define RUN_TYPE lua_upvalueindex(FIRST_OWN_UPVALUE + 2)  /* "type" */
#define RUN_STATE lua_upvalueindex(FIRST_OWN_UPVALUE + 3) /* "state" */

/// `run(reduce, list, first, last, stopWhenDirty)`: reduces `list[first..last]` in order, each action its own
/// transaction with its own time budget (restarted for every action after the first). Stops after an action
/// the host must look at before the next: one without a string `type` (returns its position, nil, nil,
/// true), one that returned commands (its position, the commands, whether subscriptions are stale), one that
/// made the subscriptions stale when `stopWhenDirty` (its position, nil, true). Otherwise returns `last`. A
/// failing action raises; `position()` then says which one it was, and its writes are in the journal.
static int barrier_run(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TFUNCTION);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer first = luaL_checkinteger(L, 3), last = luaL_checkinteger(L, 4);
    int stopWhenDirty = lua_toboolean(L, 5);
    lua_settop(L, 5);
    // 6: the state's proxy, found once per run: nothing trims the caches during a run, and only `adopt`
    // replaces the state.
    lua_pushvalue(L, RUN_STATE);
    lua_rawget(L, RUN_HOLDER);
    to_proxy(L, b);
    for (lua_Integer i = first; i <= last; i++) {
        b->position = i;
        if (lua_rawgeti(L, 2, i) != LUA_TTABLE || (lua_pushvalue(L, RUN_TYPE), lua_rawget(L, 7)) != LUA_TSTRING) {
            /* 7: the action */
            lua_pushinteger(L, i);
            lua_pushnil(L);
            lua_pushnil(L);
            lua_pushboolean(L, 1);
            return 4;
        }
        if (i > first) clua_restart_budget_now(L);
        begin_transaction(b);
        lua_copy(L, 1, 8); /* reduce, over the action's type */
        lua_pushvalue(L, 6);
        lua_pushvalue(L, 7);
        lua_call(L, 2, 2); /* 8: result, 9: commands */
        if (!lua_isnil(L, 8) && !lua_rawequal(L, 8, 6)) {
            lua_pushvalue(L, RUN_ADOPT);
            lua_pushvalue(L, 8);
            lua_call(L, 1, 0);
            lua_pushvalue(L, RUN_STATE); /* the new state's proxy */
            lua_rawget(L, RUN_HOLDER);
            to_proxy(L, b);
            lua_replace(L, 6);
        }
        b->mode = MODE_CLOSED;
        if (!lua_isnil(L, 9)) {
            lua_pushinteger(L, i);
            lua_pushvalue(L, 9);
            lua_pushboolean(L, b->subscriptionsDirty);
            return 3;
        }
        if (stopWhenDirty && b->subscriptionsDirty) {
            lua_pushinteger(L, i);
            lua_pushnil(L);
            lua_pushboolean(L, 1);
            return 3;
        }
        lua_settop(L, 6);
    }
    lua_pushinteger(L, last);
    return 1;
}

// MARK: The Lua side's view of the barrier's state

#define JOURNAL lua_upvalueindex(FIRST_OWN_UPVALUE)

/// `begin()`: drops the last transaction's journal and opens one (writing).
static int barrier_begin(lua_State *L) {
    begin_transaction(barrier(L));
    return 0;
}

/// `record(table, key, old)`: journals a write the Lua side makes itself.
static int barrier_record(lua_State *L) {
    lua_settop(L, 3);
    journal_append(L, barrier(L), JOURNAL, 1, 2, 3);
    return 0;
}

/// `rollback()`: undoes the open or last transaction, newest write first, and closes it.
static int barrier_rollback(lua_State *L) {
    Barrier *b = barrier(L);
    for (lua_Integer i = b->count - 2; i >= 1; i -= 3) {
        lua_rawgeti(L, JOURNAL, i);
        lua_rawgeti(L, JOURNAL, i + 1);
        lua_rawgeti(L, JOURNAL, i + 2);
        if (lua_type(L, -3) == LUA_TTABLE && !lua_isnil(L, -2)) lua_rawset(L, -3);
        lua_settop(L, 0);
    }
    b->count = 0;
    clear_journal_tail(L, b, JOURNAL);
    b->mode = MODE_CLOSED;
    return 0;
}

/// `mode()`: 0 (no function runs), 1 (writing), 2 (reading). `setmode(m)`.
static int barrier_mode(lua_State *L) {
    lua_pushinteger(L, barrier(L)->mode);
    return 1;
}

static int barrier_set_mode(lua_State *L) {
    lua_Integer mode = luaL_checkinteger(L, 1);
    luaL_argcheck(L, mode >= MODE_CLOSED && mode <= MODE_READ, 1, "a mode is 0, 1 or 2");
    barrier(L)->mode = mode;
    return 0;
}

/// `dirty()`: whether the subscriptions are stale. `setdirty(flag)`.
static int barrier_dirty(lua_State *L) {
    lua_pushboolean(L, barrier(L)->subscriptionsDirty);
    return 1;
}

static int barrier_set_dirty(lua_State *L) {
    barrier(L)->subscriptionsDirty = lua_toboolean(L, 1);
    return 0;
}

/// `flushed()`: the change set was handed over and starts afresh; the journal keeps only what the last
/// transaction needs to be undone.
static int barrier_flushed(lua_State *L) {
    Barrier *b = barrier(L);
    b->flushes += 1;
    clear_journal_tail(L, b, JOURNAL);
    return 0;
}

/// `position()`: the action of the last run that was being reduced.
static int barrier_position(lua_State *L) {
    lua_pushinteger(L, barrier(L)->position);
    return 1;
}

// MARK: makebarrier

/// Pushes a closure of `function` over the barrier (at `control`), what making proxies needs, the named fields
/// of the table at 1, and `spare` more upvalues (nil) the function keeps for itself.
static void push_closure(lua_State *L, int control, lua_CFunction function, const char *const *fields, int count,
                         int spare) {
    static const char *const shared[] = { "targets", "proxies", "meta", "weakkeys", "weakall" };
    lua_pushvalue(L, control);
    for (int i = 0; i < 5; i++) {
        if (lua_getfield(L, 1, shared[i]) != LUA_TTABLE) luaL_error(L, "makebarrier: %s is missing", shared[i]);
    }
    for (int i = 0; i < count; i++) {
        if (lua_getfield(L, 1, fields[i]) == LUA_TNIL) luaL_error(L, "makebarrier: %s is missing", fields[i]);
    }
    for (int i = 0; i < spare; i++) lua_pushnil(L);
    lua_pushcclosure(L, function, 1 + 5 + count + spare);
}

int clua_make_barrier(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    // The state is kept when the barrier is made again over new caches (`control` names the old one's).
    if (lua_getfield(L, 1, "control") == LUA_TUSERDATA) {
        if (lua_rawlen(L, 2) != sizeof(Barrier)) return luaL_error(L, "makebarrier: control is not a barrier's");
    } else {
        lua_pop(L, 1);
        Barrier *b = (Barrier *)lua_newuserdatauv(L, sizeof(Barrier), 0);
        memset(b, 0, sizeof *b);
        b->mode = MODE_CLOSED;
        b->lastNotedAt = -1;
        b->subscriptionsDirty = 1;
    }
    int control = 2;
    lua_createtable(L, 0, 16); /* 3: the functions */
    lua_pushvalue(L, control);
    lua_setfield(L, 3, "control");

    static const char *const indexFields[] = { "index" };
    push_closure(L, control, barrier_index, indexFields, 1, 0);
    lua_setfield(L, 3, "index");
    static const char *const writeFields[] = { "journal", "dependents", "changes", "newindex", "note" };
    push_closure(L, control, barrier_newindex, writeFields, 5, 2); /* + the last change seen recorded */
    lua_setfield(L, 3, "newindex");
    static const char *const runFields[] = { "holder", "adopt" };
    push_closure(L, control, barrier_run, runFields, 2, 2);
    lua_pushliteral(L, "type");
    lua_setupvalue(L, -2, FIRST_OWN_UPVALUE + 2);
    lua_pushliteral(L, "state");
    lua_setupvalue(L, -2, FIRST_OWN_UPVALUE + 3);
    lua_setfield(L, 3, "run");

    static const char *const journalField[] = { "journal" };
    static const struct { const char *name; lua_CFunction function; int usesJournal; } plain[] = {
        { "begin", barrier_begin, 0 }, { "record", barrier_record, 1 }, { "rollback", barrier_rollback, 1 },
        { "mode", barrier_mode, 0 }, { "setmode", barrier_set_mode, 0 }, { "dirty", barrier_dirty, 0 },
        { "setdirty", barrier_set_dirty, 0 }, { "position", barrier_position, 0 }, { "flushed", barrier_flushed, 1 },
        { "proxy", barrier_proxy, 0 }, { "made", barrier_made, 0 },
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        push_closure(L, control, plain[i].function, journalField, plain[i].usesJournal, 0);
        lua_setfield(L, 3, plain[i].name);
    }
    return 1;
}
