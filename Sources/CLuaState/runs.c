// Runs of actions (`runs_`): the loop that reduces a list of actions, each its own transaction with its own time
// budget, stopping where the host must look before the next (commands, stale subscriptions, what the readers gave
// within the run). The barrier as a whole, and its contract: `barrier.c`.
#include "barrier.h"

/// [-0, +0, -] Remembers the state's root (the table at `index`) for the paths cached in this generation.
static void know_root(lua_State *L, Barrier *b, int index) {
    b->root = lua_topointer(L, index);
    b->rootGeneration = b->pathGeneration;
}

/// `run(reduce, list, first, last, stopWhenDirty [, flush])` [-(5|6), +(1|3|4|5), e]: reduces `list[first..last]`
/// in order, each action its own transaction with its own time budget (restarted for every action after the
/// first). Stops after an action the host must look at before the next: one without a string `type` (returns
/// its position, nil, nil, true), one that returned commands (its position, the commands, whether subscriptions
/// are stale), one that made the subscriptions stale when `stopWhenDirty` (its position, nil, true). With a
/// `flush` function, it is called (protected, with a time budget of its own) after each action after which a key
/// some reader read has changed since the last flush (`observed`), or that replaced the state; if it fails, the
/// run stops there (its position, nil, whether subscriptions are stale, false, the error, whether it was the
/// time budget — which then recovers: see `clua_recover_budget`); if it returns true
/// (what it gave must be read before the next action changes it), too (its position, nil, whether subscriptions
/// are stale). Otherwise returns
/// `last`. (These are the results `StateRuntime.RunResult` names.) A failing action raises; `position()` then
/// says which one it was, and its writes are in the journal.
int runs_run(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TFUNCTION);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer first = luaL_checkinteger(L, 3), last = luaL_checkinteger(L, 4);
    int stopWhenDirty = lua_toboolean(L, 5);
    int flush = lua_type(L, 6) == LUA_TFUNCTION;
    lua_settop(L, 6);
    lua_replace(L, 5); /* 5: the flush (6 is the state's proxy, below) */
    b->encoded = 0; /* the host has read the last run's records */
    // 6: the state's proxy, found once per run: nothing trims the caches during a run, and only `adopt`
    // replaces the state.
    lua_pushvalue(L, UPVALUE(RUN_STATE));
    lua_rawget(L, UPVALUE(RUN_HOLDER));
    know_root(L, b, -1);
    proxies_push(L, b, 0, 0);
    for (lua_Integer i = first; i <= last; i++) {
        b->position = i;
        if (b->rootGeneration != b->pathGeneration) { /* (the last action moved tables, or replaced the state) */
            lua_pushvalue(L, UPVALUE(RUN_STATE));
            lua_rawget(L, UPVALUE(RUN_HOLDER));
            know_root(L, b, -1);
            lua_pop(L, 1);
        }
        if (lua_rawgeti(L, 2, i) != LUA_TTABLE || (lua_pushvalue(L, UPVALUE(RUN_TYPE)), lua_rawget(L, 7)) != LUA_TSTRING) {
            /* 7: the action */
            lua_pushinteger(L, i);
            lua_pushnil(L);
            lua_pushnil(L);
            lua_pushboolean(L, 1);
            return 4;
        }
        if (i > first) clua_restart_budget_now(L);
        begin_transaction(b);
        proxies_stamp(L, b, lua_topointer(L, 6)); /* the state's proxy, handed to this action's call */
        lua_copy(L, 1, 8); /* reduce, over the action's type */
        lua_pushvalue(L, 6);
        lua_pushvalue(L, 7);
        lua_call(L, 2, 2); /* 8: result, 9: commands */
        int replaced = !lua_isnil(L, 8) && !lua_rawequal(L, 8, 6);
        if (replaced) {
            lua_pushvalue(L, UPVALUE(RUN_ADOPT));
            lua_pushvalue(L, 8);
            lua_call(L, 1, 0);
            lua_pushvalue(L, UPVALUE(RUN_STATE)); /* the new state's proxy */
            lua_rawget(L, UPVALUE(RUN_HOLDER));
            proxies_push(L, b, 0, 0);
            lua_replace(L, 6);
        }
        if (b->moved) {
            b->moved = 0;
            lua_pushvalue(L, UPVALUE(RUN_SETTLE));
            lua_call(L, 0, 0);
        }
        b->mode = MODE_CLOSED;
        if (b->journaling) changes_record(L, b, i);
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
        if (flush && (replaced || b->observed)) {
            lua_settop(L, 6);
            clua_restart_budget_now(L); /* (the readers' own budget, as in a call of their own) */
            lua_pushvalue(L, 5);
            if (lua_pcall(L, 0, 1, 0) != LUA_OK) { /* 7: its error */
                // A spent budget: its message gets the script's place, and the budget recovers so that the
                // run can return (a spent budget raises again at every instruction, the runtime's too).
                CLuaGuard *g = clua_guard(L);
                int timedOut = g->timedOut;
                if (timedOut) {
                    if (g->failureLine > 0 && lua_type(L, 7) == LUA_TSTRING) {
                        lua_pushfstring(L, "%s:%d: %s", g->failureSource, g->failureLine, lua_tostring(L, 7));
                        lua_replace(L, 7);
                    }
                    clua_recover_budget(L);
                }
                lua_pushinteger(L, i);
                lua_pushnil(L);
                lua_pushboolean(L, b->subscriptionsDirty);
                lua_pushboolean(L, 0);
                lua_pushvalue(L, 7);
                lua_pushboolean(L, timedOut);
                return 6;
            }
            if (lua_toboolean(L, 7) && i < last) { /* what it gave must be read before the next action */
                lua_pushinteger(L, i);
                lua_pushnil(L);
                lua_pushboolean(L, b->subscriptionsDirty);
                return 3;
            }
        }
        lua_settop(L, 6);
    }
    lua_pushinteger(L, last);
    return 1;
}

// MARK: The functions

/// `dirty()` [-0, +1, -]: whether the subscriptions are stale.
int runs_dirty(lua_State *L) {
    lua_pushboolean(L, barrier(L)->subscriptionsDirty);
    return 1;
}

/// `setdirty(flag)` [-1, +0, -].
int runs_setdirty(lua_State *L) {
    barrier(L)->subscriptionsDirty = lua_toboolean(L, 1);
    return 0;
}

/// `position()` [-0, +1, -]: the action of the last run that was being reduced.
int runs_position(lua_State *L) {
    lua_pushinteger(L, barrier(L)->position);
    return 1;
}
