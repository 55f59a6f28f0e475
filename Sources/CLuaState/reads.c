// Readers (`reads_`): while props, a selector or `subscriptions` runs (READ mode), what it reads, marked in the
// record of what it read last time (a reader that reads what it read before allocates nothing) or noted as fresh;
// the readers a write marked due (once each), handed over at a flush; the emptied key sets kept for the next
// records. The barrier as a whole, and its contract: docs/design.md, "The write barrier".
#include "barrier.h"

/// [-0, +1, m] The set of keys of the table at `real` in the record of reads at `record`,
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

/// [-0, +0, -] The read of (the table at `table`, the key at `key` or `integer`) was noted in the running reader's
/// records (`lastReadTable`).
static void remember_read(Barrier *b, const void *table, const void *key, lua_Integer integer) {
    b->lastReadTable = table;
    b->lastReadKey = key;
    b->lastReadInteger = integer;
    b->lastReadStamp = b->readStamp;
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
    // The read just noted, read again (a string or integer key), has nothing to add.
    const void *table = lua_topointer(L, real), *keyAddress = NULL;
    lua_Integer integer = 0;
    int remembered = 1;
    if (keyType == LUA_TSTRING) keyAddress = lua_topointer(L, key);
    else if (keyType == LUA_TNUMBER && lua_isinteger(L, key)) integer = lua_tointeger(L, key);
    else remembered = 0;
    if (remembered && b->lastReadStamp == b->readStamp && b->lastReadTable == table && b->lastReadKey == keyAddress &&
        b->lastReadInteger == integer) {
        return;
    }
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
                if (remembered) remember_read(b, table, keyAddress, integer);
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
    if (remembered) remember_read(b, table, keyAddress, integer);
}

// MARK: The functions

/// `mode()` [-0, +1, -]: `B.CLOSED`, `B.WRITE` or `B.READ`.
int reads_mode(lua_State *L) {
    lua_pushinteger(L, barrier(L)->mode);
    return 1;
}

/// [-1, +0, -] A reader starts (`reading`), the record of what it read last time on top (nil for its first run),
/// or one that failed ends (nil on top): what was noted is dropped, and the marks start afresh.
static void start_reads(lua_State *L, Barrier *b, int reading) {
    if (reading) next_call(b);
    lua_setiuservalue(L, UPVALUE(CONTROL), LAST_READS);
    lua_pushnil(L);
    lua_setiuservalue(L, UPVALUE(CONTROL), FRESH_READS);
    b->readStamp++;
    b->matchedReads = 0;
    b->freshReads = 0;
    if (reading) set_mode(b, MODE_READ);
}

/// `setmode(mode [, last])` [-(1|2), +0, e]: with `B.READ`, a reader starts, `last` the record of what it read
/// last time (real table -> set of keys; none for its first run): its reads are noted (`reads_note_read`) until
/// `endread`. Leaving READ mode otherwise (a reader that failed) drops what was noted.
int reads_setmode(lua_State *L) {
    Barrier *b = barrier(L);
    lua_Integer mode = luaL_checkinteger(L, 1);
    luaL_argcheck(L, mode == MODE_CLOSED || mode == MODE_WRITE || mode == MODE_READ, 1, "not a mode of the barrier");
    if (mode == MODE_READ || b->mode == MODE_READ) { /* a reader starts, or one that failed ends */
        lua_settop(L, 2);
        if (mode != MODE_READ || lua_type(L, 2) != LUA_TTABLE) {
            lua_pushnil(L);
            lua_replace(L, 2);
        }
        start_reads(L, b, mode == MODE_READ);
    }
    set_mode(b, mode);
    return 0;
}

/// [-0, +(0|2), m] `endread`'s work, for a reader that made `count` reads last time (-1: none known), the shared
/// set of what every reader reads of `holder` at `holderState`. Pushes the new record and its count, or nothing.
static int end_read(lua_State *L, Barrier *b, lua_Integer count, int holderState) {
    luaL_checkstack(L, 8, NULL);
    int base = lua_gettop(L); /* the record at base + 1, the fresh reads at base + 2, then what walks them */
    lua_getiuservalue(L, UPVALUE(CONTROL), LAST_READS);
    lua_getiuservalue(L, UPVALUE(CONTROL), FRESH_READS);
    lua_pushnil(L);
    lua_setiuservalue(L, UPVALUE(CONTROL), LAST_READS);
    lua_pushnil(L);
    lua_setiuservalue(L, UPVALUE(CONTROL), FRESH_READS);
    set_mode(b, MODE_CLOSED);
    if (b->freshReads == 0 && b->matchedReads == count) {
        lua_settop(L, base);
        return 0;
    }
    b->readsGeneration++; /* the reader's record changes (the writes `noted` remembers may concern it now) */
    int last = base + 1, record = base + 2, real = base + 3, keys = base + 4, set = base + 5, key = base + 6;
    if (lua_type(L, record) != LUA_TTABLE) {
        lua_createtable(L, 0, 2);
        lua_replace(L, record);
    }
    if (lua_type(L, last) == LUA_TTABLE && b->matchedReads > 0) {
        lua_pushnil(L);
        while (lua_next(L, last) != 0) { /* real, keys */
            if (lua_type(L, keys) == LUA_TTABLE && !lua_rawequal(L, keys, holderState)) {
                lua_pushnil(L); /* set: the new record's set for real, once there is a key for it */
                lua_pushnil(L);
                while (lua_next(L, keys) != 0) { /* key, its mark */
                    if (lua_type(L, key + 1) == LUA_TNUMBER && lua_tointeger(L, key + 1) == b->readStamp) {
                        if (lua_isnil(L, set)) {
                            reads_key_set(L, b, record, real);
                            lua_replace(L, set);
                        }
                        lua_pushvalue(L, key);
                        lua_pushboolean(L, 1);
                        lua_rawset(L, set);
                    }
                    lua_pop(L, 1);
                }
            }
            lua_settop(L, real);
        }
    }
    lua_pushinteger(L, b->matchedReads + b->freshReads);
    lua_replace(L, last);
    lua_rotate(L, last, 1); /* the record, then its count */
    lua_settop(L, base + 2);
    return 2;
}

/// `endread(count)` [-1, +(0|2), m]: ends a reader's run (the barrier closes). When it read exactly what its
/// last record holds (`count` reads, the shared set of what it read of `holder` aside), returns nothing: the
/// record stands, and so do its entries in the index of readers. Otherwise returns a new record of what it read
/// (without the shared set, which the Lua side adds) and how many reads it holds.
int reads_endread(lua_State *L) {
    lua_Integer count = luaL_optinteger(L, 1, -1);
    lua_settop(L, 0);
    return end_read(L, barrier(L), count, UPVALUE(READER_HOLDER_STATE));
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

/// `emptysets(map, spares, count, limit)` [-4, +1, m]: empties `map` (anything -> a set of keys) and keeps up to
/// `limit` of its emptied sets in `spares`, which holds `count`; returns how many it holds now. (Reused sets
/// spare the collector a table per use.)
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

// MARK: The readers due

/// [-0, +0, m] Moves the readers due into the set `IS_DUE` (from `dueIDs`): one more is due, or one whose id is not
/// an integer.
static void due_into_set(lua_State *L, Barrier *b) {
    if (b->dueInSet) return;
    b->dueInSet = 1; /* (first: should a store below raise, the flush still clears what is in the set) */
    for (lua_Integer i = 0; i < b->due; i++) {
        lua_pushinteger(L, b->dueIDs[i]);
        lua_pushboolean(L, 1);
        lua_rawset(L, UPVALUE(IS_DUE));
    }
}

/// [-0, +0, m] Marks the reader id on top due (popping it) unless it is already: appended to the list of readers
/// due (`DUE`), told apart from those due by a scan of `dueIDs` while they fit, by the set `IS_DUE` after.
static void mark_due(lua_State *L, Barrier *b) {
    if (!b->dueInSet) {
        int isInteger = lua_isinteger(L, -1);
        lua_Integer id = isInteger ? lua_tointeger(L, -1) : 0;
        if (isInteger) {
            for (lua_Integer i = 0; i < b->due; i++) {
                if (b->dueIDs[i] == id) {
                    lua_pop(L, 1);
                    return;
                }
            }
        }
        if (isInteger && b->due < DUE_SCANNED) {
            b->dueIDs[b->due] = id;
            lua_rawseti(L, UPVALUE(DUE), b->due + 1); /* (counted once stored: storing may raise) */
            b->due++;
            return;
        }
        due_into_set(L, b);
    }
    lua_pushvalue(L, -1);
    if (lua_rawget(L, UPVALUE(IS_DUE)) != LUA_TNIL) {
        lua_pop(L, 2);
        return;
    }
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, UPVALUE(DUE), b->due + 1); /* (listed first: the flush clears the set of what the list holds) */
    b->due++;
    lua_pushboolean(L, 1);
    lua_rawset(L, UPVALUE(IS_DUE));
}

/// [-0, +0, m] Marks reader `id` due unless it is already (`mark_due`).
void reads_mark_due_id(lua_State *L, Barrier *b, lua_Integer id) {
    lua_pushinteger(L, id);
    mark_due(L, b);
}

/// [-0, +0, m] Marks due each reader id of the set at `ids` (an absolute index) not marked yet (`mark_due`).
/// Returns whether the set names any reader.
int reads_mark_due(lua_State *L, Barrier *b, int ids) {
    luaL_checkstack(L, 5, NULL);
    int any = 0;
    lua_pushnil(L);
    while (lua_next(L, ids) != 0) { /* id, true */
        any = 1;
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        mark_due(L, b);
    }
    return any;
}

/// [-0, +0, m] Hands the readers due over, for a flush to run: returns how many the list (`DUE`) holds, from 1
/// (kept there until the next write marks a reader). None is due any more, nothing is noted or observed since,
/// and the journal (at `journal`) keeps only what the last transaction needs to be undone.
static lua_Integer hand_over(lua_State *L, Barrier *b, int journal) {
    lua_Integer count = b->due;
    if (b->dueInSet) {
        for (lua_Integer i = 1; i <= count; i++) {
            lua_rawgeti(L, UPVALUE(DUE), i);
            lua_pushnil(L);
            lua_rawset(L, UPVALUE(IS_DUE)); /* (removing a key allocates nothing) */
        }
        b->dueInSet = 0;
    }
    b->due = 0;
    b->flushes += 1;
    b->observed = 0;
    journal_clear_tail(L, b, journal);
    return count;
}

/// `markdue(set)` [-1, +0, m]: marks due every reader the set names (its keys: `readers`, for a flush of all).
int reads_markdue(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    reads_mark_due(L, barrier(L), 1);
    return 0;
}

/// `takedue()` [-0, +2, m]: hands the readers due over (`hand_over`): returns their list and how many it holds.
int reads_takedue(lua_State *L) {
    lua_Integer count = hand_over(L, barrier(L), UPVALUE(JOURNAL));
    lua_pushvalue(L, UPVALUE(DUE));
    lua_pushinteger(L, count);
    return 2;
}

/// `flushedcount([n])` [-(0|1), +1, -]: how many outcomes `flushed`'s lists hold (what the readers gave, in order);
/// with `n`, that they hold `n` now (the Lua side appends and empties them too).
int reads_flushedcount(lua_State *L) {
    Barrier *b = barrier(L);
    if (lua_gettop(L) >= 1) {
        b->flushed = luaL_checkinteger(L, 1);
        b->flushedUniform = 0; /* (what the Lua side appended is not told apart) */
    }
    lua_pushinteger(L, b->flushed);
    return 1;
}

/// `bykeys()` [-0, +1, -]: how many readers flushes ran by the keys they read (`run_by_keys`), handed the state's
/// root itself — for tests, which tell that path from the proxy's by it.
int reads_bykeys(lua_State *L) {
    lua_pushinteger(L, barrier(L)->byKeys);
    return 1;
}

/// `duecount()` [-0, +1, -]: how many readers are due (a write marked them since the last flush).
int reads_duecount(lua_State *L) {
    lua_pushinteger(L, barrier(L)->due);
    return 1;
}

/// `observed()` [-0, +0, -]: a write changed something a reader read (as `note_change` says): `run` with a flush
/// function calls it after the action that did; `takedue()` clears it.
int reads_observed(lua_State *L) {
    barrier(L)->observed = 1;
    return 0;
}

// MARK: A flush within a run

/// [-0, +0, e] Appends reader `id`'s outcome, the value on top (popped), to what the readers gave (`flushed`,
/// its lists at `ids`, `values`, `failed`, which hold `b->flushed` outcomes).
static void append_flushed(lua_State *L, Barrier *b, int ids, int values, int failed, int id, int didFail) {
    lua_Integer count = ++b->flushed;
    int one = !didFail && lua_isinteger(L, id);
    lua_Integer reader = one ? lua_tointeger(L, id) : 0;
    if (count == 1) {
        b->flushedUniform = one;
        b->flushedReader = reader;
    } else if (!one || reader != b->flushedReader) {
        b->flushedUniform = 0;
    }
    lua_rawseti(L, values, count);
    lua_pushvalue(L, id);
    lua_rawseti(L, ids, count);
    lua_pushboolean(L, didFail);
    lua_rawseti(L, failed, count);
}

/// [-0, +0, e] The raise of a reader whose time budget ran out goes on, as the sandbox's `pcall` lets it: the
/// run's flush fails, with the script's place (`runs_run` words it).
static void reraise_spent_budget(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    if (g->timedOut) clua_raise_budget_exceeded(L, g);
}

/// [-0, +(0|1), -] Ends the read of the reader at `reader` (its id at `id`) within a flush (`end_read`): a new record
/// is indexed by the Lua side. Returns 1 with the error on top when that raised (memory), else 0.
static int end_flushed_read(lua_State *L, Barrier *b, int reader, int id) {
    lua_rawgeti(L, reader, READER_COUNT);
    lua_Integer last = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
    lua_pop(L, 1);
    if (end_read(L, b, last, UPVALUE(FLUSH_HOLDER_STATE)) == 0) return 0;
    lua_pushvalue(L, UPVALUE(FLUSH_INDEX_READS));
    lua_insert(L, -3);
    lua_pushvalue(L, id);
    lua_insert(L, -3);
    return lua_pcall(L, 3, 0, 0) != LUA_OK;
}

/// [-0, +(0|1), e] Runs the reader at `reader` (its id at `id`) by the keys its function reads, when its bytecode
/// shows that it only reads named fields of the state's root (`clua_reads_only_fields`, asked once per reader) and
/// none of those fields holds a table now: the function is handed the root itself, not its proxy — it can read
/// nothing but those fields, all plain data — and its record of reads is every one of those keys, made once for
/// this root and kept while it stays (the reader's `KEYS_ROOT`; any other record the Lua side makes clears it).
/// Nothing is noted while it runs. Returns 1 with what it gave on top (or its error: `*failed`), or 0 (nothing
/// pushed, nothing changed) for a reader that must run through the proxy.
static int run_by_keys(lua_State *L, Barrier *b, int reader, int id, int *failed) {
    int base = lua_gettop(L);
    luaL_checkstack(L, 8, NULL);
    int fn = base + 1, root = base + 2, keys = base + 3;
    lua_rawgeti(L, reader, READER_FN);
    if (lua_rawgeti(L, reader, READER_KEYS) == LUA_TBOOLEAN && lua_toboolean(L, -1)) { /* not looked at yet */
        lua_pop(L, 1);
        if (!clua_reads_only_fields(L, fn, 1)) lua_pushboolean(L, 0);
        lua_pushvalue(L, -1);
        lua_rawseti(L, reader, READER_KEYS);
    }
    if (lua_type(L, -1) != LUA_TTABLE) {
        lua_settop(L, base);
        return 0;
    }
    lua_pushvalue(L, UPVALUE(FLUSH_STATE));
    if (lua_rawget(L, UPVALUE(FLUSH_HOLDER)) != LUA_TTABLE) { /* (a table of the state has no metatable) */
        lua_settop(L, base);
        return 0;
    }
    lua_insert(L, root); /* fn, root, keys */
    lua_Integer count = (lua_Integer)lua_rawlen(L, keys);
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, keys, i);
        int type = lua_rawget(L, root);
        lua_pop(L, 1);
        if (type == LUA_TTABLE) { /* (a table of the state would be handed out without its proxy) */
            lua_settop(L, base);
            return 0;
        }
    }
    if (lua_rawgeti(L, reader, READER_KEYS_ROOT) != LUA_TTABLE || !lua_rawequal(L, -1, root)) {
        lua_pop(L, 1);
        lua_rawgeti(L, reader, READER_READS);
        start_reads(L, b, 1);
        for (lua_Integer i = 1; i <= count; i++) {
            lua_rawgeti(L, keys, i);
            reads_note_read(L, b, root, lua_gettop(L));
            lua_pop(L, 1);
        }
        if (end_flushed_read(L, b, reader, id)) { /* its error on top */
            lua_replace(L, fn);
            lua_settop(L, fn);
            *failed = 1;
            return 1;
        }
        lua_pushvalue(L, root);
        lua_rawseti(L, reader, READER_KEYS_ROOT);
    } else {
        next_call(b); /* (a call of its own: a proxy kept from another call is stale here, as it is through the proxy) */
    }
    lua_settop(L, root);
    b->byKeys++;
    set_mode(b, MODE_READ);
    *failed = lua_pcall(L, 1, 1, 0) != LUA_OK;
    set_mode(b, MODE_CLOSED);
    return 1;
}

/// `flushdue()` [-0, +1, e]: a flush within a run (`run`'s flush function, for a store whose observers hear of
/// every action): hands the readers due over (`takedue`) and runs each of them (`subscriptions`
/// excepted: the store runs it), each protected, appending what each gave to `flushed` — its id, and its value,
/// or its error's message (`failed`). Returns whether a value holds a state table (the host must convert it
/// before the next action changes it). What the state runtime's Lua did in three functions and a protected
/// call per reader, done here: a reader that reads what it read last time and returns a flat value (props, a
/// selector of a number) never leaves C but to run its own function. The rest is the Lua side's
/// (`FLUSH_UPVALUES`): a child's reader, a value holding tables, a new record of reads, a reader that raised.
int reads_flushdue(lua_State *L) {
    Barrier *b = barrier(L);
    lua_settop(L, 0);
    luaL_checkstack(L, 16, NULL);
    enum { IDS = 1, VALUES, FAILED, ID, READER, VALUE };
    lua_pushvalue(L, UPVALUE(FLUSH_IDS));
    lua_pushvalue(L, UPVALUE(FLUSH_VALUES));
    lua_pushvalue(L, UPVALUE(FLUSH_FAILED));
    lua_Integer due = hand_over(L, b, UPVALUE(FLUSH_JOURNAL));
    int holdsState = 0;
    for (lua_Integer i = 1; i <= due; i++) {
        lua_settop(L, FAILED);
        lua_rawgeti(L, UPVALUE(DUE), i); /* ID */
        if (lua_rawequal(L, ID, UPVALUE(FLUSH_SUBSCRIPTIONS))) continue;
        lua_pushvalue(L, ID);
        if (lua_rawget(L, UPVALUE(FLUSH_READERS)) != LUA_TTABLE) continue; /* READER (gone since a write marked it) */
        int simple = lua_rawgeti(L, READER, READER_CHILD) == LUA_TNIL;
        lua_pop(L, 1);
        if (!simple) { /* the Lua side runs it and appends what it gave */
            lua_pushvalue(L, UPVALUE(FLUSH_RUN_READER));
            lua_pushvalue(L, ID);
            lua_call(L, 1, 1);
            if (lua_toboolean(L, -1)) holdsState = 1;
            continue;
        }
        int failed = 0;
        if (!run_by_keys(L, b, READER, ID, &failed)) { /* through the proxy */
            lua_rawgeti(L, READER, READER_READS);
            start_reads(L, b, 1);
            lua_rawgeti(L, READER, READER_FN);
            lua_pushvalue(L, UPVALUE(FLUSH_STATE));
            lua_rawget(L, UPVALUE(FLUSH_HOLDER));
            proxies_push(L, b, 0, 0);
            failed = lua_pcall(L, 1, 1, 0) != LUA_OK; /* VALUE: what it gave, or its error */
            if (!failed && !proxies_flat(L, VALUE)) { /* the Lua side ends the read: the value may hold state tables */
                lua_pushvalue(L, UPVALUE(FLUSH_FINISH_READ));
                lua_pushvalue(L, ID);
                lua_pushvalue(L, VALUE);
                if (lua_pcall(L, 2, 2, 0) == LUA_OK) {
                    if (lua_toboolean(L, -1)) holdsState = 1;
                    lua_pop(L, 1);
                    lua_replace(L, VALUE);
                } else {
                    failed = 1;
                }
            } else if (!failed) {
                failed = end_flushed_read(L, b, READER, ID);
            }
        }
        if (failed) { /* its error on top */
            reraise_spent_budget(L);
            if (lua_gettop(L) > VALUE) lua_replace(L, VALUE);
            lua_pushvalue(L, UPVALUE(FLUSH_FAILED_READ));
            lua_pushvalue(L, ID);
            lua_call(L, 1, 0);
            luaL_tolstring(L, VALUE, NULL);
        } else {
            lua_settop(L, VALUE);
        }
        append_flushed(L, b, IDS, VALUES, FAILED, ID, failed);
    }
    lua_settop(L, FAILED);
    lua_pushboolean(L, holdsState);
    return 1;
}
