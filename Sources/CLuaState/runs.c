// Runs of actions (`runs_`): the loop that reduces a list of actions, each its own transaction with its own time
// budget, stopping where the host must look before the next (commands, stale subscriptions, what the readers gave
// within the run). The barrier as a whole, and its contract: docs/design.md, "The write barrier".
#include "barrier.h"
#include <string.h>
#include "clua_state_layouts.h"

_Static_assert(CLUA_RUN_FLUSHED + CLUA_FLUSH_RESULT_COUNT == CLUA_RUN_FLUSH_FAILURE, "a run's flush fills its slots");
_Static_assert(CLUA_RUN_FLUSH_TIMED_OUT == CLUA_RUN_RESULT_COUNT, "a run's last result is its count");
_Static_assert(CLUA_RUN_RECORDS_LENGTH == CLUA_RUN_RESULT_COUNT_WITHOUT_FLUSH, "a run without a flush ends at its records");
_Static_assert(CLUA_RUN_POSITION_FLUSHED + CLUA_FLUSH_RESULT_COUNT == CLUA_RUN_POSITION_RESULT_COUNT + 1, "runPosition's flush ends it");

// MARK: Results

/// [-0, +0, e] Stores at `slot` (an absolute stack index) the value on top, popping it.
static void put(lua_State *L, int slot) {
    lua_replace(L, slot);
}

/// [-0, +0, e] Stores what the readers gave within the run (the `flushed` upvalue's lists, `b->flushed` outcomes)
/// from `slot` on, in a flush's layout (`CLUA_FLUSH_RESULTS`).
static void put_flushed(lua_State *L, Barrier *b, int slot) {
    int flushed = lua_gettop(L) + 1;
    lua_pushinteger(L, b->flushed);
    put(L, slot + CLUA_FLUSH_COUNT);
    lua_pushvalue(L, UPVALUE(RUN_FLUSHED));
    lua_getfield(L, flushed, "ids");
    put(L, slot + CLUA_FLUSH_READERS);
    lua_getfield(L, flushed, "values");
    put(L, slot + CLUA_FLUSH_VALUES);
    lua_getfield(L, flushed, "failed");
    put(L, slot + CLUA_FLUSH_FAILED);
    lua_pop(L, 1);
    if (b->flushed > 0 && b->flushedUniform) {
        lua_pushinteger(L, b->flushedReader);
        put(L, slot + CLUA_FLUSH_UNIFORM);
    }
}

/// How a run ended, for `run_results`.
typedef struct RunEnd {
    lua_Integer position;
    int commands;   /* stack index of the commands the action returned (0: none) */
    int dirty;      /* whether subscriptions must run again: 1, 0, or -1 for nil */
    int refused;
    int failure;    /* stack index of the readers' error (0: none) */
    int timedOut;
} RunEnd;

/// What `run`'s stack holds, slot by slot, while it loops: its arguments first (the flush moved down to where
/// `stopWhenDirty` was read), then what each action's call leaves.
enum {
    RUN_SLOT_REDUCE = 1,   /* the app's reduce */
    RUN_SLOT_LIST = 2,     /* the actions */
    RUN_SLOT_FLUSH = 5,    /* the readers' flush (nil: none) */
    RUN_SLOT_PROXY = 6,    /* the state's proxy */
    RUN_SLOT_ACTION = 7,   /* the action being reduced; after a flush that failed, its error */
    RUN_SLOT_RESULT = 8,   /* what reduce returned (a new state, or nil) */
    RUN_SLOT_COMMANDS = 9, /* the commands it returned */
};

/// `run`'s arguments after the list, read once.
typedef struct RunOptions {
    lua_Integer first, last;
    int stopWhenDirty; /* stop after an action that made the subscriptions stale */
    int flush;         /* a flush was given: the readers run within the run */
    int alwaysDirty;   /* say at every end whether subscriptions are stale (a run of one action) */
    lua_Integer every, untilFlush; /* the host's notification points */
} RunOptions;

/// [-0, +n, e] Pushes a run's results in their layout (`CLUA_RUN_RESULTS`): `flush`, whether the readers ran
/// within it (then all of them; otherwise up to the records). Returns how many.
static int run_results(lua_State *L, Barrier *b, RunEnd end, int flush) {
    int count = flush ? CLUA_RUN_RESULT_COUNT : CLUA_RUN_RESULT_COUNT_WITHOUT_FLUSH;
    luaL_checkstack(L, count + 4, "a run's results");
    int base = lua_gettop(L); /* result i lies at base + i */
    lua_settop(L, base + count);
    lua_pushinteger(L, end.position);
    put(L, base + CLUA_RUN_POSITION);
    if (end.commands != 0) {
        lua_pushvalue(L, UPVALUE(RUN_UNWRAP));
        lua_pushvalue(L, end.commands);
        lua_pushliteral(L, "the commands");
        lua_call(L, 2, 1);
        put(L, base + CLUA_RUN_COMMANDS);
    }
    if (end.dirty >= 0) {
        lua_pushboolean(L, end.dirty);
        put(L, base + CLUA_RUN_DIRTY);
    }
    lua_pushboolean(L, end.refused);
    put(L, base + CLUA_RUN_REFUSED);
    if (b->journaling) { /* the run's journal records, and their length (what `records()` gives) */
        lua_Integer length = b->encoded;
        if (lua_rawgeti(L, UPVALUE(RUN_ENCODED), 1) != LUA_TUSERDATA || (size_t)length > lua_rawlen(L, -1)) length = 0;
        put(L, base + CLUA_RUN_RECORDS);
        lua_pushinteger(L, length);
        put(L, base + CLUA_RUN_RECORDS_LENGTH);
        b->encoded = 0;
    }
    if (flush) {
        if (end.failure == 0) {
            lua_pushvalue(L, UPVALUE(RUN_SETTLED));
            lua_call(L, 0, 1);
        } else {
            lua_pushboolean(L, 0);
        }
        put(L, base + CLUA_RUN_SETTLED);
        put_flushed(L, b, base + CLUA_RUN_FLUSHED);
        if (end.failure != 0) {
            lua_pushvalue(L, end.failure);
            put(L, base + CLUA_RUN_FLUSH_FAILURE);
        }
        lua_pushboolean(L, end.timedOut);
        put(L, base + CLUA_RUN_FLUSH_TIMED_OUT);
    }
    // The run returns: its last action committed (nothing above raised for it). A failure from here on, before the
    // next transaction begins, is none of its own: `rollback` leaves it.
    b->committed = 1;
    return count;
}

/// [-0, +0, -] Remembers the state's root (the table at `index`) for the paths cached in this generation.
static void know_root(lua_State *L, Barrier *b, int index) {
    b->root = lua_topointer(L, index);
    b->rootGeneration = b->pathGeneration;
}

/// [-1, +0, e] Raises the message on top — what the checks made as an action commits refuse (a state it returned
/// that is not one, a table in two places, or inside itself), which has no line of its own — placed where the
/// reducer at `reducer` is defined (`app.lua:3: …`), as the commands a reducer returns are placed; as it is when
/// the reducer is the host's (an app that mounts plugins composes them).
static int raise_placed(lua_State *L, int reducer) {
    lua_Debug definition;
    lua_pushvalue(L, reducer);
    if (lua_getinfo(L, ">S", &definition) && definition.linedefined > 0 && strncmp(definition.short_src, "host:", 5) != 0) {
        lua_pushfstring(L, "%s:%d: %s", definition.short_src, definition.linedefined, lua_tostring(L, -1));
        lua_replace(L, -2);
    }
    return lua_error(L);
}

/// `run(reduce, list, first, last, flags [, flush [, every [, untilFlush]]])` [-(5…8), +(6|13), e]:
/// reduces `list[first..last]`
/// in order, each action its own transaction with its own time budget (restarted for every action after the
/// first). `flags` are `CLUA_RUN_FLAGS` or'd (`STOP_WHEN_DIRTY`, `ALWAYS_DIRTY`). Stops after an
/// action the host must look at before the next: one without a string `type` (returns
/// its position, nil, nil, true), one that returned commands (its position, the commands, whether subscriptions
/// are stale), one that made the subscriptions stale with `STOP_WHEN_DIRTY` (its position, nil, true). With a
/// `flush` function, it is called (protected, with a time budget of its own) at the host's notification points —
/// after the `untilFlush`-th action of the run (default 1), then after every `every`-th (default 1: every
/// action) — when a key some reader read has changed since the last flush (`observed`), or an action since
/// replaced the state; if it fails, the
/// run stops there (its position, nil, whether subscriptions are stale, false, the error, whether it was the
/// time budget — which then recovers: see `clua_recover_budget`); if it returns true
/// (what it gave must be read before the next action changes it), too (its position, nil, whether subscriptions
/// are stale). Otherwise returns
/// `last`. The results are laid out as `CLUA_RUN_RESULTS` says (`RunResult`, in `StateRuntime+Calls.swift`, reads them): with a
/// `flush`, all of them; otherwise up to the records. With `ALWAYS_DIRTY` (a run of one action, `reduce`), whether
/// subscriptions are stale is given at every end. A failing action raises; `position()` then says which one it
/// was, and its writes are in the journal.
int runs_run(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, RUN_SLOT_REDUCE, LUA_TFUNCTION);
    luaL_checktype(L, RUN_SLOT_LIST, LUA_TTABLE);
    const lua_Integer flags = luaL_checkinteger(L, 5);
    RunOptions options = {
        .first = luaL_checkinteger(L, 3), .last = luaL_checkinteger(L, 4),
        .stopWhenDirty = (flags & CLUA_RUN_STOP_WHEN_DIRTY) != 0, .alwaysDirty = (flags & CLUA_RUN_ALWAYS_DIRTY) != 0,
        .flush = lua_type(L, 6) == LUA_TFUNCTION, .every = luaL_optinteger(L, 7, 1), .untilFlush = luaL_optinteger(L, 8, 1),
    };
    luaL_argcheck(L, options.every >= 1 && options.untilFlush >= 1 && options.untilFlush <= options.every, 7,
                  "notification points out of range");
    const int flush = options.flush;
    lua_Integer untilFlush = options.untilFlush;
    int replacedSinceFlush = 0;
    lua_settop(L, 6); /* the flush on top */
    lua_replace(L, RUN_SLOT_FLUSH); /* (6, where the flush was, takes the state's proxy, below) */
    b->encoded = 0; /* the host has read the last run's records */
    if (b->random != NULL) memcpy(b->recordedRandom, b->random, sizeof b->recordedRandom);
    // 6: the state's proxy, found once per run: nothing trims the caches during a run, and only `adopt`
    // replaces the state.
    lua_pushvalue(L, UPVALUE(RUN_STATE));
    lua_rawget(L, UPVALUE(RUN_HOLDER));
    know_root(L, b, -1);
    proxies_push(L, b, 0, 0);
    for (lua_Integer i = options.first; i <= options.last; i++) {
        b->position = i;
        if (b->rootGeneration != b->pathGeneration) { /* (the last action moved tables, or replaced the state) */
            lua_pushvalue(L, UPVALUE(RUN_STATE));
            lua_rawget(L, UPVALUE(RUN_HOLDER));
            know_root(L, b, -1);
            lua_pop(L, 1);
        }
        if (lua_rawgeti(L, RUN_SLOT_LIST, i) != LUA_TTABLE || (lua_pushvalue(L, UPVALUE(RUN_TYPE)), lua_rawget(L, RUN_SLOT_ACTION)) != LUA_TSTRING) {
            return run_results(L, b, (RunEnd){ .position = i, .dirty = options.alwaysDirty ? b->subscriptionsDirty : -1, .refused = 1 }, flush);
        }
        if (i > options.first) clua_restart_budget_now(L);
        uint64_t previousCall = b->epoch;
        begin_transaction(b);
        const void *rootProxy = lua_topointer(L, RUN_SLOT_PROXY);
        proxies_stamp(L, b, rootProxy); /* the state's proxy, handed to this action's call */
        // The state's real table, found last by the action before (no call between), is this one's too: the
        // same proxy, handed again, maps to the same table (`push_last_real`).
        if (b->lastProxy == rootProxy && b->lastEpoch == previousCall) b->lastEpoch = b->epoch;
        lua_copy(L, RUN_SLOT_REDUCE, RUN_SLOT_RESULT); /* reduce, over the action's type */
        lua_pushvalue(L, RUN_SLOT_PROXY);
        lua_pushvalue(L, RUN_SLOT_ACTION);
        lua_call(L, 2, 2); /* the result and the commands */
        int replaced = !lua_isnil(L, RUN_SLOT_RESULT) && !lua_rawequal(L, RUN_SLOT_RESULT, RUN_SLOT_PROXY);
        if (replaced) {
            lua_pushvalue(L, UPVALUE(RUN_ADOPT));
            lua_pushvalue(L, RUN_SLOT_RESULT);
            lua_call(L, 1, 1);
            if (!lua_isnil(L, -1)) return raise_placed(L, RUN_SLOT_REDUCE);
            lua_pop(L, 1);
            lua_pushvalue(L, UPVALUE(RUN_STATE)); /* the new state's proxy */
            lua_rawget(L, UPVALUE(RUN_HOLDER));
            proxies_push(L, b, 0, 0);
            lua_replace(L, RUN_SLOT_PROXY);
        }
        if (b->moved) {
            b->moved = 0;
            lua_pushvalue(L, UPVALUE(RUN_SETTLE));
            lua_call(L, 0, 1);
            if (!lua_isnil(L, -1)) return raise_placed(L, RUN_SLOT_REDUCE);
            lua_pop(L, 1);
        }
        set_mode(b, MODE_CLOSED);
        if (b->journaling && !changes_record(L, b, i)) { /* (raised as the reducer's error is: the action is undone) */
            return luaL_error(L, "what the action changed cannot be recorded exactly (the state holds only data: UTF-8 "
                                 "strings, booleans, finite numbers and tables of those)");
        }
        if (b->journaling) changes_record_random(L, b, i);
        if (!lua_isnil(L, RUN_SLOT_COMMANDS)) return run_results(L, b, (RunEnd){ .position = i, .commands = RUN_SLOT_COMMANDS, .dirty = b->subscriptionsDirty }, flush);
        if (options.stopWhenDirty && b->subscriptionsDirty) return run_results(L, b, (RunEnd){ .position = i, .dirty = 1 }, flush);
        replacedSinceFlush |= replaced;
        int atPoint = flush && --untilFlush == 0; /* a notification point of the host's */
        if (atPoint) untilFlush = options.every;
        if (atPoint && (replacedSinceFlush || b->observed)) {
            replacedSinceFlush = 0;
            lua_settop(L, RUN_SLOT_PROXY);
            clua_restart_budget_now(L); /* (the readers' own budget, as in a call of their own) */
            lua_pushvalue(L, RUN_SLOT_FLUSH);
            if (lua_pcall(L, 0, 1, 0) != LUA_OK) { /* its error, where the action was */
                // A spent budget: its message gets the script's place, and the budget recovers so that the
                // run can return (a spent budget raises again at every instruction, the runtime's too).
                CLuaGuard *g = clua_guard(L);
                int timedOut = g->timedOut;
                if (timedOut) {
                    if (g->failureLine > 0 && lua_type(L, RUN_SLOT_ACTION) == LUA_TSTRING) {
                        lua_pushfstring(L, "%s:%d: %s", g->failureSource, g->failureLine, lua_tostring(L, RUN_SLOT_ACTION));
                        lua_replace(L, RUN_SLOT_ACTION);
                    }
                    clua_recover_budget(L);
                }
                return run_results(L, b, (RunEnd){ .position = i, .dirty = b->subscriptionsDirty, .failure = RUN_SLOT_ACTION, .timedOut = timedOut }, flush);
            }
            if (lua_toboolean(L, RUN_SLOT_ACTION) && i < options.last) { /* what it gave must be read before the next action */
                return run_results(L, b, (RunEnd){ .position = i, .dirty = b->subscriptionsDirty }, flush);
            }
        }
        lua_settop(L, RUN_SLOT_PROXY);
    }
    return run_results(L, b, (RunEnd){ .position = options.last, .dirty = options.alwaysDirty ? b->subscriptionsDirty : -1 }, flush);
}

// MARK: The functions

/// `dirty()` [-0, +1, -]: whether the subscriptions are stale.
int runs_dirty(lua_State *L) {
    lua_pushboolean(L, barrier(L)->subscriptionsDirty);
    return 1;
}

/// `setdirty(flag)` [-1, +0, -]. (Clearing it makes the writes `noted` remembers worth noting again: one of them
/// may make the subscriptions stale anew.)
int runs_setdirty(lua_State *L) {
    Barrier *b = barrier(L);
    b->subscriptionsDirty = lua_toboolean(L, 1);
    if (!b->subscriptionsDirty) b->readsGeneration++;
    return 0;
}

/// `scriptlevel(level)` [-1, +1, -]: for `error` in a metamethod's Lua half (which the barrier's C called), the level
/// of the script's line that made the access `level` names: that one, or the first Lua frame out from it when a C
/// function made it for the script (`table.insert(state.list, v)`, whose own frame has no line). Levels count as
/// the caller's `error` does: this function's frame is `lua_getstack`'s 0, its caller's 1.
int runs_scriptlevel(lua_State *L) {
    lua_Integer level = luaL_checkinteger(L, 1);
    lua_Debug ar;
    for (lua_Integer at = level; at < level + 64 && lua_getstack(L, (int)at, &ar); at++) {
        lua_getinfo(L, "S", &ar);
        if (strcmp(ar.what, "C") != 0) {
            lua_pushinteger(L, at);
            return 1;
        }
    }
    lua_pushinteger(L, level);
    return 1;
}

/// `position([n])` [-(0|1), +1, -]: the action of the last run that was being reduced; with `n`, that it is `n`
/// now (a run about to begin: a failure before its first action is that action's).
int runs_position(lua_State *L) {
    if (lua_gettop(L) >= 1) barrier(L)->position = luaL_checkinteger(L, 1);
    lua_pushinteger(L, barrier(L)->position);
    return 1;
}

/// `refusal(position, flush)` [-2, +(6|14), e]: a run's results for an action refused before it ran (not even a
/// table), at `position`; with `flush`, with the readers' part (nothing ran).
int runs_refusal(lua_State *L) {
    Barrier *b = barrier(L);
    lua_Integer position = luaL_checkinteger(L, 1);
    int flush = lua_toboolean(L, 2);
    lua_settop(L, 0);
    return run_results(L, b, (RunEnd){ .position = position, .dirty = 0, .refused = 1 }, flush);
}

/// `positionresults()` [-0, +6, e]: which action of the last run was being reduced (a run that raised), and what
/// the readers gave before it, laid out as `CLUA_RUN_POSITION_RESULTS`.
int runs_positionresults(lua_State *L) {
    int base = lua_gettop(L);
    lua_settop(L, base + CLUA_RUN_POSITION_RESULT_COUNT);
    Barrier *b = barrier(L);
    lua_pushinteger(L, b->position);
    put(L, base + CLUA_RUN_POSITION_POSITION);
    put_flushed(L, b, base + CLUA_RUN_POSITION_FLUSHED);
    return CLUA_RUN_POSITION_RESULT_COUNT;
}

/// `flushresults()` [-0, +(1|4), e]: what the readers gave (a flush), laid out as `CLUA_FLUSH_RESULTS` — only the
/// count when none ran.
int runs_flushresults(lua_State *L) {
    Barrier *b = barrier(L);
    if (b->flushed == 0) {
        lua_pushinteger(L, 0);
        return 1;
    }
    int base = lua_gettop(L) + 1; /* (a flush's layout counts from 0) */
    lua_settop(L, base - 1 + CLUA_FLUSH_RESULT_COUNT);
    put_flushed(L, b, base);
    return CLUA_FLUSH_RESULT_COUNT;
}
