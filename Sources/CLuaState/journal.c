// The journal (`journal_`): each transaction's writes as (table, key, old value) triples, which a rollback undoes
// newest first; `__newindex`'s fast path (a key that stays, a value that is plain data), which journals the write,
// makes it, keeps it for `changes.c`, and marks due the readers that read what it changed. The
// barrier as a whole, and its contract: docs/design.md, "The write barrier".
#include "barrier.h"

// MARK: Each place once, in a long transaction

/// Writes a transaction journals before it journals each (table, key) once. Rolling back needs only the value a
/// place held before the transaction's first write to it (the undo runs newest first, so that one is restored
/// last), and what the action changed is read from each place's first write too: a later write to the same place
/// adds nothing but memory. A reducer that writes one field a million times, or drains a 2,000-item list with
/// `table.remove(list, 1)` (two million shifting writes), would otherwise journal every write and run out of
/// memory where Lua does not; past this many writes the journal keeps one entry per place, at the cost of a
/// lookup per write. (Short transactions, nearly all of them, never pay it.)
#define JOURNAL_ONCE_FROM 1024

/// Levels `level_of` climbs at most: deeper than any state converts (only a cycle in the records goes further),
/// as `MAX_DEPTH` in state_data.lua.
#define MAX_STATE_LEVELS 1000

/// [-0, +0, m] Adds (table at `t`, key at `k`) to the set at `set` (real table -> set of keys).
static void add_journaled(lua_State *L, int set, int t, int k) {
    luaL_checkstack(L, 4, NULL);
    lua_pushvalue(L, t);
    if (lua_rawget(L, set) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, t);
        lua_pushvalue(L, -2);
        lua_rawset(L, set);
    }
    lua_pushvalue(L, k);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

/// [-0, +0, m] Whether the open transaction journaled (table at `t`, key at `k`) already, once it is long
/// (`JOURNAL_ONCE_FROM`): then a write there is not journaled again. The transaction's journal (at `journal`) turns
/// long here: the places its entries name are gathered into a new set then (`JOURNALED`), which may raise
/// (memory) before anything is recorded. Indices are absolute.
static int journaled_already(lua_State *L, Barrier *b, int journal, int t, int k) {
    if (b->count < CLUA_JOURNAL_ENTRY_LENGTH * JOURNAL_ONCE_FROM) return 0;
    luaL_checkstack(L, 4, NULL);
    if (!b->journalOnce) {
        lua_newtable(L);
        int set = lua_gettop(L);
        for (lua_Integer i = 0; i < b->count; i += CLUA_JOURNAL_ENTRY_LENGTH) {
            journal_push(L, b, journal, i + CLUA_JOURNAL_TABLE);
            journal_push(L, b, journal, i + CLUA_JOURNAL_KEY);
            add_journaled(L, set, set + 1, set + 2);
            lua_settop(L, set);
        }
        lua_setiuservalue(L, UPVALUE(CONTROL), JOURNALED);
        b->journalOnce = 1;
    }
    lua_getiuservalue(L, UPVALUE(CONTROL), JOURNALED);
    lua_pushvalue(L, t);
    int found = 0;
    if (lua_rawget(L, -2) == LUA_TTABLE) {
        lua_pushvalue(L, k);
        found = lua_rawget(L, -2) != LUA_TNIL;
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return found;
}

/// [-0, +0, m] Adds (table at `t`, key at `k`), just journaled, to the places a long transaction journaled. Done
/// after the entry is made: should this raise (memory), the place is journaled twice, which is harmless.
static void note_journaled(lua_State *L, Barrier *b, int t, int k) {
    if (!b->journalOnce) return;
    lua_getiuservalue(L, UPVALUE(CONTROL), JOURNALED);
    add_journaled(L, lua_gettop(L), t, k);
    lua_pop(L, 1);
}

_Static_assert(CLUA_JOURNAL_TABLE == 1 && CLUA_JOURNAL_KEY == 2 && CLUA_JOURNAL_OLD == 3,
               "journal_put pushes an entry's slots in the order CLUA_JOURNAL_ENTRY lays them out");

/// Slots the journal's thread makes room for at a time (`reserve_journal_room`).
#define JOURNAL_ROOM_STEP 96

/// [-0, +0, -] Makes room on the journal's thread for the next entries (and the slot `journal_push` spares), and
/// returns whether it could. The room made stays (a thread's reserved slots are kept as its stack shrinks).
static int reserve_journal_room(Barrier *b) {
    if (!lua_checkstack(b->journalThread, CLUA_JOURNAL_ENTRY_LENGTH + 1 + JOURNAL_ROOM_STEP)) return 0;
    b->journalRoom = b->stacked + CLUA_JOURNAL_ENTRY_LENGTH + 1 + JOURNAL_ROOM_STEP;
    return 1;
}

/// [-0, +0, m] Appends (table, key, old value) at the given absolute stack indices to the journal (its table at
/// `journal`), as `CLUA_JOURNAL_ENTRY` lays an entry out: on the journal's thread while the transaction's slots
/// fit there (`JOURNAL_STACKED`), else in the table. May raise (memory) before anything is recorded. The thread
/// keeps a slot to spare beyond its entries, for `journal_push`. Uses three stack slots.
static void journal_put(lua_State *L, Barrier *b, int journal, int table, int key, int old) {
    lua_State *J = b->journalThread;
    if (b->stacked == b->count && b->count + CLUA_JOURNAL_ENTRY_LENGTH <= JOURNAL_STACKED
        && (b->stacked + CLUA_JOURNAL_ENTRY_LENGTH + 1 <= b->journalRoom || reserve_journal_room(b))) {
        lua_pushvalue(L, table);
        lua_pushvalue(L, key);
        lua_pushvalue(L, old);
        lua_xmove(L, J, CLUA_JOURNAL_ENTRY_LENGTH);
        b->stacked += CLUA_JOURNAL_ENTRY_LENGTH;
    } else {
        /* first: a slot filled before a raise is emptied too */
        if (b->count + CLUA_JOURNAL_ENTRY_LENGTH > b->filled) b->filled = b->count + CLUA_JOURNAL_ENTRY_LENGTH;
        if (b->filledFrom > b->count + 1) b->filledFrom = b->count + 1;
        lua_pushvalue(L, table);
        lua_rawseti(L, journal, b->count + CLUA_JOURNAL_TABLE);
        lua_pushvalue(L, key);
        lua_rawseti(L, journal, b->count + CLUA_JOURNAL_KEY);
        lua_pushvalue(L, old);
        lua_rawseti(L, journal, b->count + CLUA_JOURNAL_OLD);
    }
    b->count += CLUA_JOURNAL_ENTRY_LENGTH;
}

/// [-0, +0, m] Appends (table, key, old value) at the given stack indices to the journal (`journal_put`), unless a
/// long transaction journaled that place already. May raise (memory) before anything is recorded.
static void journal_append(lua_State *L, Barrier *b, int journal, int table, int key, int old) {
    table = lua_absindex(L, table);
    key = lua_absindex(L, key);
    old = lua_absindex(L, old);
    if (journaled_already(L, b, journal, table, key)) return;
    luaL_checkstack(L, CLUA_JOURNAL_ENTRY_LENGTH, NULL);
    journal_put(L, b, journal, table, key, old);
    note_journaled(L, b, table, key);
}

/// [-0, +0, -] Empties the slots of the journal's table that are not the open transaction's (those past the slots
/// on the journal's thread, up to `count`): what earlier transactions replaced, and the copies `journalview` made,
/// can then be collected. Drops the set of places a long transaction journaled once it is over. Not needed for
/// correctness (only the open transaction's slots are ever read), so it is done at flushes and rollbacks, not at
/// every transaction. (Assigning nil to an existing slot never allocates.)
void journal_clear_tail(lua_State *L, Barrier *b, int journal) {
    if (!b->journalOnce) {
        lua_pushnil(L);
        lua_setiuservalue(L, UPVALUE(CONTROL), JOURNALED);
    }
    for (lua_Integer i = b->filledFrom > 1 ? b->filledFrom : 1; i <= b->filled; i++) {
        if (i > b->stacked && i <= b->count) { /* (the open transaction's own) */
            i = b->count;
            continue;
        }
        lua_pushnil(L);
        lua_rawseti(L, journal, i);
    }
    // What stays is the open transaction's own (past the thread's): a transaction of thousands of writes is not
    // walked again at each flush until the next one begins.
    if (b->count > b->stacked) {
        b->filled = b->count;
        b->filledFrom = b->stacked + 1;
    } else {
        b->filled = 0;
        b->filledFrom = 1;
    }
}

// MARK: `__newindex`

/// [-0, +0, -] The key at 2 of the table at 4 (whose address is `table`) as `noted` remembers it (`*remembered`
/// 0 for a key it does not remember).
static NotedSlot noted_place(lua_State *L, Barrier *b, const void *table, int keyType, int *remembered) {
    NotedSlot slot = { table, NULL, 0, b->flushes, b->readsGeneration };
    *remembered = 1;
    if (keyType == LUA_TSTRING) slot.key = lua_topointer(L, 2);
    else if (keyType == LUA_TNUMBER && lua_isinteger(L, 2)) slot.integer = lua_tointeger(L, 2);
    else *remembered = 0;
    return slot;
}

/// [-0, +0, -] `noted_place` for the table at 4.
static NotedSlot noted_slot(lua_State *L, Barrier *b, int keyType, int *remembered) {
    return noted_place(L, b, lua_topointer(L, 4), keyType, remembered);
}

/// [-0, +0, -] Remembers that the change of the place `slot` names (a remembered one: see `noted_place`) was noted
/// since the last flush.
static void remember_noted(Barrier *b, const NotedSlot *slot) {
    b->noted[b->notedNext++ % NOTED_SLOTS] = *slot;
}

/// [-0, +0, -] Whether `noted` holds the place `wanted` names (a remembered one) for this flush.
static int seen_noted(const Barrier *b, const NotedSlot *wanted) {
    for (int i = 0; i < NOTED_SLOTS; i++) {
        const NotedSlot *slot = &b->noted[i];
        if (slot->at == wanted->at && slot->table == wanted->table && slot->key == wanted->key &&
            slot->integer == wanted->integer && slot->reads == wanted->reads) {
            return 1;
        }
    }
    return 0;
}

/// [-0, +0, m] Notes that the key at `key` of the table at `real` changed (`structural`: a key appeared or went
/// away), for the readers that depend on it (`dependents[real]`, at `byKey`): only tables some reader read get
/// here, so a write to a table nobody reads costs the journal alone. Marks due, once each, the readers of the
/// key, of all of the table and (structural) of its keys (`reads_mark_due`), and says whether one was
/// (`observed`: a run with a flush function calls it after this action) and whether the subscriptions must run
/// again. A write later rolled back may make a reader run once for nothing (its result compares equal and is not
/// delivered). Indices are absolute.
static void note_change(lua_State *L, Barrier *b, int byKey, int key, int structural) {
    luaL_checkstack(L, 2, NULL);
    int readers[3] = { key, UPVALUE(WRITE_ALL), UPVALUE(WRITE_STRUCTURE) };
    for (int i = 0; i < (structural ? 3 : 2); i++) {
        lua_pushvalue(L, readers[i]);
        if (lua_rawget(L, byKey) == LUA_TTABLE) {
            if (reads_mark_due(L, b, lua_gettop(L))) b->observed = 1;
            if (!b->subscriptionsDirty) {
                lua_pushvalue(L, UPVALUE(WRITE_SUBSCRIPTIONS));
                if (lua_rawget(L, -2) != LUA_TNIL) b->subscriptionsDirty = 1;
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    }
}


/// [-0, +0, -] The slot of `duePlaces` for the place `wanted` names.
static DuePlace *due_place(Barrier *b, const NotedSlot *wanted) {
    uintptr_t bits = ((uintptr_t)wanted->table >> 4) ^ ((uintptr_t)wanted->key >> 3) ^ (uintptr_t)wanted->integer;
    return &b->duePlaces[(bits ^ (bits >> 7)) & (DUE_PLACES - 1)];
}

/// [-0, +0, m] Keeps in `place` the readers of the key at `key` and of all of the table whose set of readers by
/// key is at `byKey` — when they are few and each an integer id other than the subscriptions reader's; otherwise
/// the place stays unknown. Indices are absolute.
static void keep_due_place(lua_State *L, DuePlace *place, const NotedSlot *wanted, int byKey, int key) {
    place->count = -1;
    int count = 0;
    int sets[2] = { key, UPVALUE(WRITE_ALL) };
    for (int s = 0; s < 2; s++) {
        lua_pushvalue(L, sets[s]);
        if (lua_rawget(L, byKey) == LUA_TTABLE) {
            lua_pushnil(L);
            while (lua_next(L, -2) != 0) { /* id, true */
                lua_pop(L, 1);
                if (!lua_isinteger(L, -1) || lua_rawequal(L, -1, UPVALUE(WRITE_SUBSCRIPTIONS))) {
                    lua_pop(L, 2);
                    return;
                }
                lua_Integer id = lua_tointeger(L, -1);
                int known = 0;
                for (int i = 0; i < count; i++) known |= place->ids[i] == id;
                if (!known) {
                    if (count == DUE_PLACE_IDS) {
                        lua_pop(L, 2);
                        return;
                    }
                    place->ids[count++] = id;
                }
            }
        }
        lua_pop(L, 1);
    }
    place->table = wanted->table;
    place->key = wanted->key;
    place->integer = wanted->integer;
    place->reads = wanted->reads;
    place->count = count;
}

/// [-0, +0, m] `note_change` for a write `__newindex` made itself to a key that stays (the stack holds proxy, key,
/// value and the real table): its readers are found in `duePlaces` when this place was written before and no
/// reader's record changed since; else nothing is to be added when the change is noted already (the same field
/// written since the last flush: `noted`); else they are found in the index of readers (and kept in `duePlaces`
/// for the next write). `table` is the address of the real table.
static void note_scalar_change(lua_State *L, Barrier *b, const void *table, int keyType) {
    int remembered;
    NotedSlot wanted = noted_place(L, b, table, keyType, &remembered);
    DuePlace *place = remembered ? due_place(b, &wanted) : NULL;
    if (place != NULL && place->count >= 0 && place->reads == wanted.reads && place->table == wanted.table &&
        place->key == wanted.key && place->integer == wanted.integer) {
        if (place->count == 0) return;
        for (int i = 0; i < place->count; i++) reads_mark_due_id(L, b, place->ids[i]);
        b->observed = 1;
        return;
    }
    if (remembered && seen_noted(b, &wanted)) return;
    lua_settop(L, 4);
    lua_pushvalue(L, 4);
    if (lua_rawget(L, UPVALUE(WRITE_DEPENDENTS)) == LUA_TNIL) { /* 5: who reads this table */
        if (place != NULL) {
            *place = (DuePlace){ .table = wanted.table, .key = wanted.key, .integer = wanted.integer, .reads = wanted.reads, .count = 0 };
        }
        return;
    }
    note_change(L, b, 5, 2, 0);
    if (remembered) remember_noted(b, &wanted);
    if (place != NULL) keep_due_place(L, place, &wanted, 5, 2);
}

/// [-0, +1, -] Pushes the real table of the proxy at 1 — one handed out in the running call — and returns 1;
/// returns 0 (pushing nothing) for anything else.
static int push_written_real(lua_State *L, Barrier *b) {
    const void *proxy = lua_topointer(L, 1);
    if (push_last_real(L, b, proxy)) return 1;
    lua_pushvalue(L, 1);
    if (lua_rawget(L, UPVALUE(TARGETS)) != LUA_TTABLE || !stamped(b, proxy)) {
        lua_pop(L, 1);
        return 0;
    }
    keep_last_real(L, b, proxy, lua_gettop(L));
    return 1;
}

/// `__newindex` for a move (`proxy[key] = other`, `other` a proxy of a table of the state handed out in the running
/// call, `key` one the table holds): what `table.remove`, `table.insert` at a position, `table.sort` and swaps do
/// on a list of tables, one write per entry shifted. Journaled, noted as a move (`moves_note`: checked at commit),
/// the table's records pointed at its new place, written, recorded for the readers. Everything else (a new key, a
/// root, a proxy of another call) goes to the Lua `__newindex`. Everything that may raise (memory) comes before
/// the write. The stack holds proxy, key, value.
static int journal_move(lua_State *L, Barrier *b, int keyType) {
    luaL_checkstack(L, 8, NULL);
    if (!push_written_real(L, b)) return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0); /* 4: real */
    lua_pushvalue(L, 3);
    if (lua_rawget(L, UPVALUE(TARGETS)) != LUA_TTABLE || !stamped(b, lua_topointer(L, 3))) { /* 5: the moved table */
        return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
    }
    lua_pushvalue(L, 5);
    int recorded = lua_rawget(L, UPVALUE(PARENTS)) == LUA_TTABLE; /* 6: its parent (a root has none) */
    lua_pushvalue(L, 5);
    lua_rawget(L, UPVALUE(PARENT_KEYS)); /* 7: its key */
    lua_pushvalue(L, 2);
    int oldType = lua_rawget(L, 4); /* 8: the old value */
    if (!recorded || oldType == LUA_TNIL) return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
    if (lua_rawequal(L, 8, 5)) return 0;
    journal_append(L, b, UPVALUE(WRITE_JOURNAL), 4, 2, 8);
    moves_note(L, b, 5, 6, 7);
    if (oldType == LUA_TTABLE && !b->tablesLeftNoted) {
        lua_pushboolean(L, 1);
        lua_setfield(L, UPVALUE(WRITE_SHARED), "tablesLeft");
        b->tablesLeftNoted = 1;
    }
    // The records and the write (no allocation, no error).
    moves_point(L, b, 5, 4, 2);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 5);
    lua_rawset(L, 4);
    int remembered;
    NotedSlot wanted = noted_slot(L, b, keyType, &remembered);
    if (remembered && seen_noted(b, &wanted)) return 0;
    lua_settop(L, 4);
    lua_pushvalue(L, 4);
    if (lua_rawget(L, UPVALUE(WRITE_DEPENDENTS)) == LUA_TNIL) return 0; /* 5: who reads this table */
    note_change(L, b, 5, 2, 0);
    if (remembered) remember_noted(b, &wanted);
    return 0;
}

/// [-0, +0, -] The level of the real table at `t` in its state, from the records, as `levelOf` counts it
/// (state_data.lua): a root is 1; a table without a record ends the count.
static int level_of(lua_State *L, int t) {
    const void *holder = lua_topointer(L, UPVALUE(WRITE_HOLDER));
    const void *children = lua_topointer(L, UPVALUE(WRITE_CHILDREN));
    lua_getfield(L, UPVALUE(WRITE_HOLDER), "state");
    const void *root = lua_topointer(L, -1);
    lua_pop(L, 1);
    int level = 0;
    lua_pushvalue(L, t);
    while (!lua_isnil(L, -1) && lua_topointer(L, -1) != holder && lua_topointer(L, -1) != children && level <= MAX_STATE_LEVELS) {
        level++;
        if (lua_topointer(L, -1) == root) break; /* (its record may be a place it is stored in for a moment: `s.me = s`) */
        lua_rawget(L, UPVALUE(PARENTS)); /* the table above it */
    }
    lua_pop(L, 1);
    return level;
}

/// `__newindex` for a write that changes the shape of the state: a key that appears or goes away, a table that
/// leaves, or a table the running call made, stored (`proxies_place_new` makes it the state's, all new data, in
/// one pass). Journaled, written, recorded for the readers of that table, as the Lua `__newindex` does; anything
/// else — a key or a value that is not data, a value that holds tables of the state or is not all new, nesting
/// past the state's depth — goes to it, which places it or names what is wrong. The stack holds proxy, key,
/// value, the real table and the old value (whose types are given).
static int journal_reshape(lua_State *L, Barrier *b, int valueType, int oldType) {
    // (A key that holds a value was accepted as data when it appeared; a new one is checked here: a NaN key,
    // which no table holds, is refused by the Lua side as Lua refuses it.)
    if (oldType == LUA_TNIL && !is_plain_data(L, 2)) return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
    if (oldType == LUA_TNIL && valueType == LUA_TNIL) return 0;
    if (valueType == LUA_TTABLE) {
        int depth = (int)lua_tointeger(L, UPVALUE(WRITE_DEPTH));
        int level = level_of(L, 4) + 1;
        if (level > depth || !proxies_place_new(L, b, 3, 4, 2, depth - level)) {
            return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
        }
        lua_replace(L, 3); /* the value's real table */
    }
    journal_append(L, b, UPVALUE(WRITE_JOURNAL), 4, 2, 5);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_rawset(L, 4); /* (a new key may allocate: a memory error then leaves the write journaled, to be undone) */
    if (oldType == LUA_TTABLE && !b->tablesLeftNoted) {
        lua_pushboolean(L, 1);
        lua_setfield(L, UPVALUE(WRITE_SHARED), "tablesLeft");
        b->tablesLeftNoted = 1;
    }
    lua_settop(L, 4);
    lua_pushvalue(L, 4);
    if (lua_rawget(L, UPVALUE(WRITE_DEPENDENTS)) == LUA_TNIL) return 0; /* 5: who reads this table */
    note_change(L, b, 5, 2, oldType == LUA_TNIL || valueType == LUA_TNIL);
    return 0;
}

/// `__newindex(proxy, key, value)` [-3, +0, e] while writing: for a key that stays (neither the old nor the new
/// value is nil) and values that are plain data (UTF-8 strings, booleans, finite numbers), journaled, written,
/// recorded for the readers of that table. (A key that stays was accepted as data when it appeared.) And moves
/// (`journal_move`), and the writes that change the state's shape (`journal_reshape`).
int journal_newindex(lua_State *L) {
    Barrier *b = barrier(L);
    int keyType = lua_type(L, 2);
    if (keyType == LUA_TNUMBER) integral_key(L);
    if (b->mode != MODE_WRITE || lua_gettop(L) != 3 || keyType == LUA_TTABLE || keyType == LUA_TNIL) {
        return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
    }
    int valueType = lua_type(L, 3);
    if (valueType == LUA_TTABLE && lua_getmetatable(L, 3)) {
        lua_pop(L, 1);
        return journal_move(L, b, keyType); /* (a proxy, or a table that cannot be data) */
    }
    if (valueType != LUA_TTABLE && valueType != LUA_TNIL && !is_plain_value(L, 3, valueType)) {
        return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
    }
    if (!push_written_real(L, b)) return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0); /* 4: real */
    lua_pushvalue(L, 2);
    int oldType = lua_rawget(L, 4); /* 5: the old value */
    if (oldType == LUA_TNIL || oldType == LUA_TTABLE || valueType == LUA_TNIL || valueType == LUA_TTABLE) {
        return journal_reshape(L, b, valueType, oldType);
    }
    if (oldType == valueType && is_same(L, 5, 3)) return 0;
    const void *real = lua_topointer(L, 4);
    // While journaling, the write is kept as it is on the stack too, when every write of the transaction so far
    // was (`ScalarWrite`).
    ScalarWrite write;
    int keep = b->journaling && b->scalarWrites < SCALAR_WRITES && CLUA_JOURNAL_ENTRY_LENGTH * b->scalarWrites == b->count;
    if (keep) {
        write.table = real;
        clua_scalar_read(L, 2, 1, &write.key);
        clua_scalar_read(L, 5, 0, &write.before);
        clua_scalar_read(L, 3, 0, &write.after);
    }
    // Journaled first: growing the journal may raise, and then nothing has changed yet. A long transaction
    // journals each place once (`journaled_already`).
    if (!journaled_already(L, b, UPVALUE(WRITE_JOURNAL), 4, 2)) {
        journal_put(L, b, UPVALUE(WRITE_JOURNAL), 4, 2, 5);
        note_journaled(L, b, 4, 2);
    }
    lua_settop(L, 4);
    if (keep) b->writes[b->scalarWrites++] = write;
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_rawset(L, 4); /* the key exists: no allocation, no error */
    note_scalar_change(L, b, real, keyType);
    return 0;
}

/// `notechange(byKey, key, structural)` [-3, +0, m]: `note_change`, for the writes the Lua side makes (`byKey`:
/// the changed table's entry in the index of readers).
int journal_notechange(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 3);
    note_change(L, barrier(L), 1, 2, lua_toboolean(L, 3));
    return 0;
}

// MARK: The functions

/// `count()` [-0, +1, -]: journal slots the open (or last) transaction filled: its writes are the triples at
/// 1..count (the Lua side reads them to tell what the transaction changed).
int journal_count(lua_State *L) {
    lua_pushinteger(L, barrier(L)->count);
    return 1;
}

/// `journalview()` [-0, +1, m]: `count()`, once the journal's table holds every slot of the open (or last)
/// transaction — those on the journal's thread copied into it — for the Lua side to read (`state_journal.lua`);
/// the copies go at the next flush or rollback (`journal_clear_tail`).
int journal_view(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checkstack(L, 1, NULL);
    if (b->stacked > b->filled) b->filled = b->stacked; /* first: a slot filled before a raise is emptied too */
    b->filledFrom = 1;
    for (lua_Integer i = 1; i <= b->stacked; i++) {
        journal_push(L, b, UPVALUE(JOURNAL), i);
        lua_rawseti(L, UPVALUE(JOURNAL), i);
    }
    lua_pushinteger(L, b->count);
    return 1;
}

/// `begin()` [-0, +0, -]: drops the last transaction's journal and opens one (writing).
int journal_begin(lua_State *L) {
    begin_transaction(barrier(L));
    barrier(L)->pathGeneration++; /* the Lua side's transactions may move tables */
    return 0;
}

/// `record(table, key, old)` [-3, +0, m]: journals a write the Lua side makes itself.
int journal_record(lua_State *L) {
    lua_settop(L, 3);
    journal_append(L, barrier(L), UPVALUE(JOURNAL), 1, 2, 3);
    return 0;
}

/// `rollback([committed])` [-(0|1), +0, -]: undoes the transaction a failure left open, newest write first, and
/// closes it; with `committed`, the last transaction even though it committed (the host found what it returned
/// invalid). A failure before any transaction began — an action that could not be converted, memory out as a run
/// began — undoes nothing: the journal then holds the last committed action's writes, which stay. (Each write
/// restores a key that existed when it was journaled: no allocation.)
int journal_rollback(lua_State *L) {
    Barrier *b = barrier(L);
    if (b->committed && !lua_toboolean(L, 1)) return 0;
    b->committed = 0;
    lua_settop(L, 0);
    for (lua_Integer i = b->count - CLUA_JOURNAL_ENTRY_LENGTH; i >= 0; i -= CLUA_JOURNAL_ENTRY_LENGTH) {
        journal_push(L, b, UPVALUE(JOURNAL), i + CLUA_JOURNAL_TABLE);
        journal_push(L, b, UPVALUE(JOURNAL), i + CLUA_JOURNAL_KEY);
        journal_push(L, b, UPVALUE(JOURNAL), i + CLUA_JOURNAL_OLD);
        if (lua_type(L, -3) == LUA_TTABLE && !lua_isnil(L, -2)) lua_rawset(L, -3);
        lua_settop(L, 0);
    }
    b->count = 0;
    b->stacked = 0;
    lua_settop(b->journalThread, 0);
    b->scalarWrites = 0;
    b->journalOnce = 0;
    journal_clear_tail(L, b, UPVALUE(JOURNAL));
    set_mode(b, MODE_CLOSED);
    b->pathGeneration++;
    return 0;
}

/// `commit()` [-0, +0, -]: the Lua side's transaction (init's state, a migration, a child's action) committed: the
/// barrier closes, and `rollback` undoes it only when asked to.
int journal_commit(lua_State *L) {
    Barrier *b = barrier(L);
    set_mode(b, MODE_CLOSED);
    b->committed = 1;
    return 0;
}

/// `setmoved()` [-0, +0, -]: the open transaction moved a table; `run` calls `settle` before it commits.
int journal_setmoved(lua_State *L) {
    barrier(L)->moved = 1;
    return 0;
}

/// `istext(string)` [-1, +1, -]: whether the string is UTF-8 text, as every string of the state must be
/// (`is_plain_data`; the Lua half's rules, `state_data.lua`, ask here).
int journal_istext(lua_State *L) {
    size_t count;
    const char *bytes = luaL_checklstring(L, 1, &count);
    lua_pushboolean(L, clua_json_is_utf8((const unsigned char *)bytes, count));
    return 1;
}
