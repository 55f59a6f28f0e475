// Readers (`reads_`): while props, a selector or `subscriptions` runs (READ mode), what it reads, marked in the
// record of what it read last time (a reader that reads what it read before allocates nothing) or noted as fresh;
// the change set handed over at a flush (every reader of what changed marked due, once); the emptied key sets kept
// for the next records. The barrier as a whole, and its contract: `barrier.c`.
#include "barrier.h"

/// [-0, +1, m] The set of keys of the table at `real` in the record at `record` (of reads, or the change set),
/// made (from the spare sets, or new) when the record has none.
void reads_key_set(lua_State *L, Barrier *b, int record, int real) {
    lua_pushvalue(L, real);
    if (lua_rawget(L, record) == LUA_TTABLE) return;
    lua_pop(L, 1);
    if (b->spareSets > 0) {
        lua_getiuservalue(L, UPVALUE(CONTROL), SPARE_SETS);
        lua_rawgeti(L, -1, b->spareSets);
        lua_pushnil(L);
        lua_rawseti(L, -3, b->spareSets--);
        lua_remove(L, -2);
    } else {
        lua_createtable(L, 0, 1);
    }
    lua_pushvalue(L, real);
    lua_pushvalue(L, -2);
    lua_rawset(L, record); /* record[real] = keys */
}

/// [-0, +0, m] Notes, while a reader runs, that it read the key at `key` of the table at `real` (absolute
/// indices): a read its last record holds is marked there (counted the first time), any other goes into the
/// record of fresh reads. Mostly a reader reads what it read last time, and then nothing is allocated and its
/// record stands (`endread`). A read of nil or NaN is not noted.
void reads_note_read(lua_State *L, Barrier *b, int real, int key) {
    if (b->mode != MODE_READ) return;
    // Nothing is ever stored under nil or NaN: such a read gives nil, now and after any write.
    int keyType = lua_type(L, key);
    if (keyType == LUA_TNIL) return;
    if (keyType == LUA_TNUMBER && !lua_isinteger(L, key) && lua_tonumber(L, key) != lua_tonumber(L, key)) return;
    if (lua_getiuservalue(L, UPVALUE(CONTROL), LAST_READS) == LUA_TTABLE) { /* last */
        lua_pushvalue(L, real);
        if (lua_rawget(L, -2) == LUA_TTABLE) { /* last, keys */
            lua_pushvalue(L, key);
            int type = lua_rawget(L, -2); /* last, keys, mark */
            if (type != LUA_TNIL) {
                if (type != LUA_TNUMBER || lua_tointeger(L, -1) != b->readStamp) {
                    lua_pushvalue(L, key);
                    lua_pushinteger(L, b->readStamp);
                    lua_rawset(L, -4);
                    b->matchedReads++;
                }
                lua_pop(L, 3);
                return;
            }
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (lua_getiuservalue(L, UPVALUE(CONTROL), FRESH_READS) != LUA_TTABLE) { /* fresh */
        lua_pop(L, 1);
        lua_createtable(L, 0, 2);
        lua_pushvalue(L, -1);
        lua_setiuservalue(L, UPVALUE(CONTROL), FRESH_READS);
    }
    reads_key_set(L, b, lua_gettop(L), real); /* fresh, keys */
    lua_pushvalue(L, key);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pushvalue(L, key);
        lua_pushboolean(L, 1);
        lua_rawset(L, -4);
        b->freshReads++;
    }
    lua_pop(L, 3);
}

// MARK: The functions

/// `mode()` [-0, +1, -]: `B.CLOSED`, `B.WRITE` or `B.READ`.
int reads_mode(lua_State *L) {
    lua_pushinteger(L, barrier(L)->mode);
    return 1;
}

/// `setmode(mode [, last])` [-(1|2), +0, e]: with `B.READ`, a reader starts, `last` the record of what it read
/// last time (real table -> set of keys; none for its first run): its reads are noted (`reads_note_read`) until
/// `endread`. Leaving READ mode otherwise (a reader that failed) drops what was noted.
int reads_setmode(lua_State *L) {
    Barrier *b = barrier(L);
    lua_Integer mode = luaL_checkinteger(L, 1);
    luaL_argcheck(L, mode == MODE_CLOSED || mode == MODE_WRITE || mode == MODE_READ, 1, "not a mode of the barrier");
    if (mode == MODE_READ) next_call(b);
    if (mode == MODE_READ || b->mode == MODE_READ) { /* a reader starts, or one that failed ends */
        lua_settop(L, 2);
        if (mode != MODE_READ || lua_type(L, 2) != LUA_TTABLE) {
            lua_pushnil(L);
            lua_replace(L, 2);
        }
        lua_setiuservalue(L, UPVALUE(CONTROL), LAST_READS);
        lua_pushnil(L);
        lua_setiuservalue(L, UPVALUE(CONTROL), FRESH_READS);
        b->readStamp++;
        b->matchedReads = 0;
        b->freshReads = 0;
    }
    b->mode = mode;
    return 0;
}

/// `endread(count)` [-1, +(0|2), m]: ends a reader's run (the barrier closes). When it read exactly what its
/// last record holds (`count` reads, the shared set of what it read of `holder` aside), returns nothing: the
/// record stands, and so do its entries in the index of readers. Otherwise returns a new record of what it read
/// (without the shared set, which the Lua side adds) and how many reads it holds.
int reads_endread(lua_State *L) {
    Barrier *b = barrier(L);
    lua_Integer count = luaL_optinteger(L, 1, -1);
    lua_settop(L, 0);
    luaL_checkstack(L, 8, NULL);
    lua_getiuservalue(L, UPVALUE(CONTROL), LAST_READS); /* 1 */
    lua_getiuservalue(L, UPVALUE(CONTROL), FRESH_READS); /* 2 */
    lua_pushnil(L);
    lua_setiuservalue(L, UPVALUE(CONTROL), LAST_READS);
    lua_pushnil(L);
    lua_setiuservalue(L, UPVALUE(CONTROL), FRESH_READS);
    b->mode = MODE_CLOSED;
    if (b->freshReads == 0 && b->matchedReads == count) return 0;
    b->readsGeneration++; /* the reader's record changes (the writes `noted` remembers may concern it now) */
    if (lua_type(L, 2) != LUA_TTABLE) {
        lua_createtable(L, 0, 2);
        lua_replace(L, 2);
    }
    if (lua_type(L, 1) == LUA_TTABLE && b->matchedReads > 0) {
        lua_pushnil(L);
        while (lua_next(L, 1) != 0) { /* 3: real, 4: keys */
            if (lua_type(L, 4) == LUA_TTABLE && !lua_rawequal(L, 4, UPVALUE(READER_HOLDER_STATE))) {
                lua_pushnil(L); /* 5: the new record's set for real, once there is a key for it */
                lua_pushnil(L);
                while (lua_next(L, 4) != 0) { /* 6: key, 7: mark */
                    if (lua_type(L, 7) == LUA_TNUMBER && lua_tointeger(L, 7) == b->readStamp) {
                        if (lua_isnil(L, 5)) {
                            reads_key_set(L, b, 2, 3);
                            lua_replace(L, 5);
                        }
                        lua_pushvalue(L, 6);
                        lua_pushboolean(L, 1);
                        lua_rawset(L, 5);
                    }
                    lua_pop(L, 1);
                }
            }
            lua_settop(L, 3);
        }
    }
    lua_settop(L, 2);
    lua_pushinteger(L, b->matchedReads + b->freshReads);
    return 2;
}

/// `note(real, key)` [-2, +0, m]: notes that the running reader read `real[key]` (`key` may be a marker:
/// its structure, all of it; see `reads_note_read`); nothing when no reader runs.
int reads_note(lua_State *L) {
    lua_settop(L, 2);
    reads_note_read(L, barrier(L), 1, 2);
    return 0;
}

/// `recycle(record [, id])` [-(1|2), +0, -]: empties a read record that is not kept, its key sets kept for the
/// next records (the shared set of what every reader reads of `holder` excepted); with `id`, the reader whose
/// entries in the index of readers (`dependents`) the record's reads were: they are removed.
int reads_recycle(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 2);
    int withID = !lua_isnil(L, 2);
    luaL_checkstack(L, 8, NULL);
    b->readsGeneration++; /* a reader's record goes (see `noted`) */
    lua_getiuservalue(L, UPVALUE(CONTROL), SPARE_SETS); /* 3 */
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) { /* real, keys */
        if (withID && lua_type(L, -1) == LUA_TTABLE) {
            lua_pushvalue(L, -2);
            if (lua_rawget(L, UPVALUE(READER_DEPENDENTS)) == LUA_TTABLE) { /* byKey */
                lua_pushnil(L);
                while (lua_next(L, -3) != 0) { /* key, true */
                    lua_pop(L, 1);
                    lua_pushvalue(L, -1);
                    if (lua_rawget(L, -3) == LUA_TTABLE) { /* ids */
                        lua_pushvalue(L, 2);
                        lua_pushnil(L);
                        lua_rawset(L, -3);
                    }
                    lua_pop(L, 1);
                }
            }
            lua_pop(L, 1);
        }
        if (lua_type(L, -1) == LUA_TTABLE && !lua_rawequal(L, -1, UPVALUE(READER_HOLDER_STATE)) &&
            b->spareSets < SPARE_SETS_MAX) {
            empty_table(L, lua_gettop(L));
            lua_rawseti(L, 3, ++b->spareSets);
        } else {
            lua_pop(L, 1);
        }
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, 1); /* record[real] = nil (allowed while traversing) */
    }
    return 0;
}

/// `clear(t, …)` [-n, +0, -]: empties the tables given (their slots kept, for refilling without rehashing), as a
/// loop of `t[k] = nil` over `next` would, without running the loop in Lua (the proxy caches are emptied every
/// few hundred proxies made).
int reads_clear(lua_State *L) {
    int count = lua_gettop(L);
    for (int t = 1; t <= count; t++) {
        if (lua_type(L, t) == LUA_TTABLE) empty_table(L, t);
    }
    return 0;
}

/// `emptysets(map, spares, count, limit)` [-4, +1, m]: empties `map` (anything -> a set of keys) and keeps up to
/// `limit` of its emptied sets in `spares`, which holds `count`; returns how many it holds now. (Reused sets
/// spare the collector a table per use; the change set is emptied after every flush.)
int reads_emptysets(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Integer count = luaL_checkinteger(L, 3), limit = luaL_checkinteger(L, 4);
    lua_settop(L, 2);
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) { /* k, set */
        if (lua_type(L, -1) == LUA_TTABLE) {
            empty_table(L, lua_gettop(L));
            if (count < limit) {
                lua_pushvalue(L, -1);
                lua_rawseti(L, 2, ++count);
            }
        }
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, 1); /* map[k] = nil: allowed while traversing */
    }
    lua_pushinteger(L, count);
    return 1;
}

/// [-0, +0, m] Marks due each reader id of the set at `ids` (if it is one) not marked yet: `isDue[id] = true`,
/// appended to `due`, which holds `*count`.
static void mark_ids(lua_State *L, int ids, int isDue, int due, lua_Integer *count) {
    if (lua_type(L, ids) != LUA_TTABLE) return;
    lua_pushnil(L);
    while (lua_next(L, ids) != 0) { /* id, true */
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        if (lua_rawget(L, isDue) == LUA_TNIL) {
            lua_pushvalue(L, -2);
            lua_pushboolean(L, 1);
            lua_rawset(L, isDue);
            lua_pushvalue(L, -2);
            lua_rawseti(L, due, ++*count);
        }
        lua_pop(L, 1);
    }
}

/// [-0, +0, -] The change set was handed over: nothing is noted or observed since, and the journal keeps only
/// what the last transaction needs to be undone. (`JOURNAL_UPVALUES`.)
static void start_afresh(lua_State *L, Barrier *b) {
    b->flushes += 1;
    b->observed = 0;
    journal_clear_tail(L, b, UPVALUE(JOURNAL));
}

/// `takechanges(changes, dependents, all, isDue, due, count)` [-6, +1, m]: hands the change set over, in one
/// walk: marks due, once each, every reader of what it names — `dependents[real][key]` for each changed key of a
/// table, and `dependents[real][all]`, the readers of all of it — as `isDue[id] = true` appended to `due`, which
/// holds `count`; empties it, its key sets kept for the next changes and reads (the spare sets); and starts
/// afresh (`start_afresh`). Returns how many readers `due` holds now.
int reads_takechanges(lua_State *L) {
    Barrier *b = barrier(L);
    for (int i = 1; i <= 5; i++) {
        if (i != 3) luaL_checktype(L, i, LUA_TTABLE);
    }
    lua_Integer count = luaL_checkinteger(L, 6);
    lua_settop(L, 5);
    luaL_checkstack(L, 12, NULL);
    lua_getiuservalue(L, UPVALUE(CONTROL), SPARE_SETS); /* 6 */
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) { /* 7: real, 8: its changed keys */
        if (lua_type(L, 8) == LUA_TTABLE) {
            lua_pushvalue(L, 7);
            if (lua_rawget(L, 2) == LUA_TTABLE) { /* 9: byKey */
                lua_pushvalue(L, 3);
                lua_rawget(L, 9); /* 10: the readers of all of it */
                mark_ids(L, 10, 4, 5, &count);
                lua_pop(L, 1);
                lua_pushnil(L);
                while (lua_next(L, 8) != 0) { /* 10: key, 11: true */
                    lua_pop(L, 1);
                    lua_pushvalue(L, 10);
                    lua_rawget(L, 9); /* 11: its readers */
                    mark_ids(L, 11, 4, 5, &count);
                    lua_pop(L, 1);
                }
            }
            lua_settop(L, 8);
            empty_table(L, 8);
            if (b->spareSets < SPARE_SETS_MAX) lua_rawseti(L, 6, ++b->spareSets);
        }
        lua_settop(L, 7);
        lua_pushvalue(L, 7);
        lua_pushnil(L);
        lua_rawset(L, 1); /* changes[real] = nil: allowed while traversing */
    }
    start_afresh(L, b);
    lua_pushinteger(L, count);
    return 1;
}

/// `observed()` [-0, +0, -]: a write changed something a reader read (as `note_change` says): `run` with a flush
/// function calls it after the action that did; `flushed()` clears it.
int reads_observed(lua_State *L) {
    barrier(L)->observed = 1;
    return 0;
}

/// `flushed()` [-0, +0, -]: the change set was handed over and starts afresh; the journal keeps only what the
/// last transaction needs to be undone.
int reads_flushed(lua_State *L) {
    start_afresh(L, barrier(L));
    return 0;
}
