// What an action changed (`changes_`): after each committed action of a run, while journaling, each (table, key) its
// journal wrote whose value now differs, named by its path from the root, written as a recording's `changes`
// array (`json.c`) into the run's buffer of records — from the writes `__newindex` kept when it made them all, with
// cached paths when nothing moved, by reading the journal back otherwise; long journals are read by the Lua
// `collect` and written out here. The barrier as a whole, and its contract: docs/design.md, "The write barrier".
#include "barrier.h"

// MARK: Reading what an action changed

/// Journals longer than this many writes are read by the Lua `collect` (hash tables); shorter ones here, by
/// scanning (no allocation).
#define COLLECT_IN_C_WRITES 16

/// [-0, +0, -] Where the first write to (table at `t`, key at `k`) among the first `count` slots is (the slot
/// before its entry: 0, 3, 6, …), or -1. Uses one stack slot.
static lua_Integer first_write(lua_State *L, Barrier *b, lua_Integer count, int t, int k) {
    for (lua_Integer j = 0; j < count; j += CLUA_JOURNAL_ENTRY_LENGTH) {
        int same = 0;
        if (journal_push(L, b, UPVALUE(RUN_JOURNAL), j + CLUA_JOURNAL_TABLE) == LUA_TTABLE && lua_rawequal(L, -1, t)) {
            lua_pop(L, 1);
            journal_push(L, b, UPVALUE(RUN_JOURNAL), j + CLUA_JOURNAL_KEY);
            same = lua_rawequal(L, -1, k);
        }
        lua_pop(L, 1);
        if (same) return j;
    }
    return -1;
}

/// [-0, +0, -] Whether the journaled write whose entry follows slot `position` stored something else than what it
/// found: its table holds the value at `now`.
static int changed_at(lua_State *L, Barrier *b, lua_Integer position, int now) {
    journal_push(L, b, UPVALUE(RUN_JOURNAL), position + CLUA_JOURNAL_OLD);
    int changed = !is_same(L, -1, now);
    lua_pop(L, 1);
    return changed;
}

/// [-0, +(2|0), -] Pushes where the table at `t` is — its parent and its key, from the records `proxies_push`
/// keeps — when the parent holds it there and is a table of the app's state (not the holder of the root, nor a
/// child store's); pushes nothing and returns 0 otherwise. Uses three stack slots.
static int push_place(lua_State *L, int t) {
    lua_pushvalue(L, t);
    int parentType = lua_rawget(L, UPVALUE(PARENTS)); /* parent */
    if (parentType != LUA_TTABLE || lua_rawequal(L, -1, UPVALUE(RUN_HOLDER)) || lua_rawequal(L, -1, UPVALUE(RUN_CHILDREN))) {
        lua_pop(L, 1);
        return 0;
    }
    lua_pushvalue(L, t);
    lua_rawget(L, UPVALUE(PARENT_KEYS)); /* parent, key */
    lua_pushvalue(L, -1);
    lua_rawget(L, -3); /* parent, key, parent[key] */
    int holds = lua_rawequal(L, -1, t);
    lua_pop(L, holds ? 1 : 3);
    return holds;
}

/// [-0, +0, m] Writes what the action just committed changed as a recording's `changes` array (`json.c`): each
/// (table, key) its journal wrote whose value now differs from the one before, named by its path from the root,
/// unless the table is no longer in the state (removed since, or a child store's) or a change further up
/// carries it (a table stored whole) — the Lua `collect`'s rules (`state_journal.lua`, "The journal, read"),
/// done here for short journals. Returns the number of changes, or -1 (what it wrote is to be dropped) when a
/// key or value cannot be written as JSON exactly.
static lua_Integer write_changes(lua_State *L, Barrier *b, CLuaJSON *o) {
    lua_Integer count = b->count;
    int base = lua_gettop(L);
    lua_Integer changes = 0;
    clua_json_byte(o, '[');
    for (lua_Integer i = 0; i < count; i += CLUA_JOURNAL_ENTRY_LENGTH) {
        lua_settop(L, base);
        journal_push(L, b, UPVALUE(RUN_JOURNAL), i + CLUA_JOURNAL_TABLE); /* base+1: the table */
        journal_push(L, b, UPVALUE(RUN_JOURNAL), i + CLUA_JOURNAL_KEY);   /* base+2: the key */
        if (first_write(L, b, i, base + 1, base + 2) >= 0) continue;
        lua_pushvalue(L, base + 2);
        lua_rawget(L, base + 1);                                      /* base+3: the value now */
        journal_push(L, b, UPVALUE(RUN_JOURNAL), i + CLUA_JOURNAL_OLD);   /* base+4: the value before */
        if (is_same(L, base + 3, base + 4)) continue;
        // The path, leaf first: the key, then each parent's key up to the root (base+5 on: the keys).
        lua_pushvalue(L, base + 2);
        int depth = 0, reportable = 1;
        lua_pushvalue(L, UPVALUE(RUN_STATE));
        lua_rawget(L, UPVALUE(RUN_HOLDER)); /* the root */
        int root = lua_gettop(L);
        lua_pushvalue(L, base + 1); /* the table walked up */
        int current = lua_gettop(L);
        if (lua_rawequal(L, base + 1, UPVALUE(RUN_HOLDER))) {
            lua_pushvalue(L, UPVALUE(RUN_STATE));
            reportable = lua_rawequal(L, -1, base + 2); /* the whole state replaced */
            lua_pop(L, 1);
        } else {
            depth = 1;
            while (!lua_rawequal(L, current, root)) {
                if (depth > 1000) { reportable = 0; break; } /* only a cycle in the records goes this deep */
                luaL_checkstack(L, 8, "a state this deep");
                if (!push_place(L, current)) { reportable = 0; break; } /* parent, key */
                lua_Integer written = first_write(L, b, count, lua_gettop(L) - 1, lua_gettop(L));
                if (written >= 0 && changed_at(L, b, written, current)) { reportable = 0; break; } /* a change further up carries it */
                // Keep the key among the path's keys (before `root`), and walk on from the parent.
                lua_insert(L, root);   /* parent, key -> key before root */
                root++;
                current++;
                lua_replace(L, current); /* the parent becomes the table walked up */
                depth++;
            }
            if (reportable) {
                lua_pushvalue(L, UPVALUE(RUN_STATE));
                lua_pushvalue(L, UPVALUE(RUN_HOLDER));
                lua_Integer written = first_write(L, b, count, lua_gettop(L), lua_gettop(L) - 1);
                lua_pop(L, 2);
                if (written >= 0 && changed_at(L, b, written, current)) reportable = 0;
            }
        }
        if (!reportable) continue;
        if (changes > 0) clua_json_byte(o, ',');
        clua_json_put(o, "[[", 2);
        for (int k = depth; k >= 1; k--) { /* root-most first */
            if (k < depth) clua_json_byte(o, ',');
            if (!clua_json_value(o, base + 4 + k, 0)) return lua_settop(L, base), -1;
        }
        if (!clua_json_end_change(o, base + 3)) return lua_settop(L, base), -1;
        changes++;
    }
    lua_settop(L, base);
    clua_json_byte(o, ']');
    return changes;
}

/// [-0, +0, m] The JSON of the path of the table at `t` (in the state whose root is at `root`) into `prefix`
/// (at most `PATH_BYTES` bytes; `*length` set), from the cache or by walking up the records `proxies_push` keeps
/// until a table whose path is cached (or the root), caching what it passes. Returns 1; 0 when the table is not
/// in the state (the records say otherwise, or it is a child store's); -1 when a key cannot be written as JSON
/// or the path is longer than `PATH_BYTES`. Only for transactions that stored and removed no table: nothing
/// moved, so a parent holds its child where the records say and no change further up carries this one.
#define PATH_BYTES 1024
static int path_prefix(lua_State *L, Barrier *b, CLuaJSON *o, int t, int root, unsigned char *prefix, size_t *length) {
    if (lua_rawequal(L, t, root)) {
        *length = 0;
        return 1;
    }
    const PathSlot *slot = cached_path(b, lua_topointer(L, t));
    if (slot != NULL) {
        memcpy(prefix, slot->prefix, slot->length);
        *length = slot->length;
        return 1;
    }
    // Up: t, key, parent, key, parent, … to a table whose path is known (the root, or cached).
    int top = lua_gettop(L);
    lua_pushvalue(L, t);
    size_t known = 0;
    int levels = 0;
    for (;;) {
        int current = lua_gettop(L);
        if (lua_rawequal(L, current, root)) break;
        if (levels > 0) {
            const PathSlot *cached = cached_path(b, lua_topointer(L, current));
            if (cached != NULL) {
                memcpy(prefix, cached->prefix, cached->length);
                known = cached->length;
                break;
            }
        }
        if (levels >= 1000) return lua_settop(L, top), 0; /* only a cycle in the records goes this deep */
        luaL_checkstack(L, 6, "a state this deep");
        if (!push_place(L, current)) return lua_settop(L, top), 0; /* parent, key */
        lua_insert(L, -2); /* key, parent: the parent on top, walked up next */
        levels++;
    }
    // Down: each table's path is its parent's and its key; cached on the way.
    size_t prefixLength = known;
    for (int level = levels; level >= 1; level--) {
        int key = top + 2 * level;   /* the key of the table just below it */
        int child = key - 1;
        size_t mark = o->length;
        if (!clua_json_value(o, key, 0)) return o->length = mark, lua_settop(L, top), -1;
        size_t keyLength = o->length - mark;
        if (prefixLength + 1 + keyLength > PATH_BYTES) return o->length = mark, lua_settop(L, top), -1;
        if (prefixLength > 0) prefix[prefixLength++] = ',';
        memcpy(prefix + prefixLength, o->bytes + mark, keyLength);
        prefixLength += keyLength;
        o->length = mark;
        keep_path(b, lua_topointer(L, child), prefix, prefixLength);
    }
    lua_settop(L, top);
    *length = prefixLength;
    return 1;
}

/// [-0, +0, m] `write_changes` for a transaction that stored and removed no table (the common case: nothing
/// moved), with paths from the cache (`path_prefix`). Returns the number of changes; -1 when a key or value
/// cannot be written as JSON; -2 (nothing written to keep) when the transaction stored or removed a table.
static lua_Integer write_changes_unmoved(lua_State *L, Barrier *b, CLuaJSON *o) {
    lua_Integer count = b->count;
    int base = lua_gettop(L);
    lua_pushvalue(L, UPVALUE(RUN_STATE));
    lua_rawget(L, UPVALUE(RUN_HOLDER)); /* base+1: the root */
    int root = base + 1;
    lua_Integer changes = 0;
    unsigned char prefix[PATH_BYTES];
    clua_json_byte(o, '[');
    for (lua_Integer i = 0; i < count; i += CLUA_JOURNAL_ENTRY_LENGTH) {
        lua_settop(L, root);
        journal_push(L, b, UPVALUE(RUN_JOURNAL), i + CLUA_JOURNAL_TABLE); /* root+1: the table */
        if (lua_rawequal(L, root + 1, UPVALUE(RUN_HOLDER))) return lua_settop(L, base), -2; /* the state replaced */
        journal_push(L, b, UPVALUE(RUN_JOURNAL), i + CLUA_JOURNAL_KEY);   /* root+2: the key */
        lua_pushvalue(L, root + 2);
        lua_rawget(L, root + 1);                                      /* root+3: the value now */
        journal_push(L, b, UPVALUE(RUN_JOURNAL), i + CLUA_JOURNAL_OLD);   /* root+4: the value before */
        if (lua_type(L, root + 3) == LUA_TTABLE || lua_type(L, root + 4) == LUA_TTABLE) return lua_settop(L, base), -2;
        if (first_write(L, b, i, root + 1, root + 2) >= 0 || is_same(L, root + 3, root + 4)) continue;
        size_t length = 0;
        int found = path_prefix(L, b, o, root + 1, root, prefix, &length);
        if (found < 0) return lua_settop(L, base), -1;
        if (found == 0) continue;
        if (changes > 0) clua_json_byte(o, ',');
        clua_json_put(o, "[[", 2);
        clua_json_put(o, prefix, length);
        if (length > 0) clua_json_byte(o, ',');
        if (!clua_json_value(o, root + 2, 0) || !clua_json_end_change(o, root + 3)) return lua_settop(L, base), -1;
        changes++;
    }
    lua_settop(L, base);
    clua_json_byte(o, ']');
    return changes;
}

/// Whether two kept writes are to the same key of the same table.
static int same_place(const ScalarWrite *a, const ScalarWrite *b) {
    return a->table == b->table && clua_scalar_same(&a->key, &b->key, 1);
}

/// [-0, +0, m] `write_changes` for a transaction whose every write `__newindex` kept (`ScalarWrite`): nothing
/// moved, and each write's key and values are at hand, so the journal is not read back; paths come from the
/// cache (`learn_path` fills it as the reducer reads its way down), else from the records (`path_prefix`).
/// Returns the number of changes, or -1 when a key or value cannot be written as JSON exactly.
static lua_Integer write_scalar_changes(lua_State *L, Barrier *b, CLuaJSON *o) {
    int base = lua_gettop(L), root = 0;
    lua_Integer changes = 0;
    unsigned char walked[PATH_BYTES];
    clua_json_byte(o, '[');
    for (int i = 0; i < b->scalarWrites; i++) {
        const ScalarWrite *w = &b->writes[i];
        int first = 1;
        for (int j = 0; j < i && first; j++) first = !same_place(&b->writes[j], w);
        if (!first) continue; /* (its first write stands for it) */
        const CLuaScalar *after = &w->after;
        for (int j = i + 1; j < b->scalarWrites; j++) {
            if (same_place(&b->writes[j], w)) after = &b->writes[j].after;
        }
        if (clua_scalar_same(&w->before, after, 0)) continue;
        const unsigned char *prefix = walked;
        size_t length = 0;
        if (!known_path(b, w->table, &prefix, &length)) {
            if (root == 0) {
                lua_pushvalue(L, UPVALUE(RUN_STATE));
                lua_rawget(L, UPVALUE(RUN_HOLDER));
                root = lua_gettop(L);
            }
            journal_push(L, b, UPVALUE(RUN_JOURNAL), CLUA_JOURNAL_ENTRY_LENGTH * i + CLUA_JOURNAL_TABLE); /* the table */
            int found = path_prefix(L, b, o, lua_gettop(L), root, walked, &length);
            lua_pop(L, 1);
            if (found < 0) return lua_settop(L, base), -1;
            if (found == 0) continue; /* not in the state (a child store's) */
        }
        if (changes > 0) clua_json_byte(o, ',');
        clua_json_put(o, "[[", 2);
        clua_json_put(o, prefix, length);
        if (length > 0) clua_json_byte(o, ',');
        if (!clua_json_scalar(o, &w->key)) return lua_settop(L, base), -1;
        clua_json_put(o, "],", 2);
        if (!clua_json_scalar(o, after)) return lua_settop(L, base), -1;
        clua_json_byte(o, ']');
        changes++;
    }
    lua_settop(L, base);
    clua_json_byte(o, ']');
    return changes;
}

/// A record's length when its changes were left to Swift (in the list of changes read).
#define NOT_WRITTEN UINT32_MAX

/// [-0, +0, e] Keeps the history entry of the action at `position`, whose changes were read here: the Lua
/// `collect` told to keep only that (`state_journal.lua`, "History").
static void keep_history(lua_State *L, lua_Integer position) {
    lua_pushvalue(L, UPVALUE(RUN_COLLECT));
    lua_pushinteger(L, position);
    lua_pushboolean(L, 1);
    lua_call(L, 2, 0);
}

/// [-0, +0, e] Records what the action at `position` (just committed) changed, for the journal: a record in the
/// run's buffer — three `uint32_t`s (the position, the number of changes, the length of the JSON or
/// `NOT_WRITTEN`) and the JSON — when it changed anything. Short journals are read here (while history is kept,
/// the Lua `collect` then keeps only the history entry); others by the Lua `collect`, whose list is then written
/// out here too and emptied. Returns 1; 0 when what it changed holds something a recording cannot hold exactly
/// (the state's rules refuse all of that at the write, so this is a last line): then nothing is recorded for it,
/// its history entry goes, and the run fails the action (`runs_run`), whose transaction is still at hand.
int changes_record(lua_State *L, Barrier *b, lua_Integer position) {
    if (b->count == 0 && !b->history) return 1;
    CLuaJSON o;
    if (b->count <= CLUA_JOURNAL_ENTRY_LENGTH * COLLECT_IN_C_WRITES) {
        clua_json_open(L, &o, UPVALUE(RUN_ENCODED), (size_t)b->encoded);
        size_t header = o.length;
        clua_json_reserve(&o, 3 * sizeof(uint32_t));
        o.length += 3 * sizeof(uint32_t);
        size_t body = o.length;
        lua_Integer changes = CLUA_JOURNAL_ENTRY_LENGTH * b->scalarWrites == b->count ? write_scalar_changes(L, b, &o)
                                                               : write_changes_unmoved(L, b, &o);
        if (changes == -2) { /* something moved: the full rules, and no cached path is to be trusted */
            b->pathGeneration++;
            o.length = body;
            changes = write_changes(L, b, &o);
        }
        if (changes == 0) { /* b->encoded stays: no record */
            if (b->history) keep_history(L, position);
            return 1;
        }
        if (changes > 0 && o.length - header - 3 * sizeof(uint32_t) < NOT_WRITTEN) {
            uint32_t fields[3] = { (uint32_t)position, (uint32_t)changes, (uint32_t)(o.length - header - 3 * sizeof(uint32_t)) };
            memcpy(o.bytes + header, fields, sizeof fields);
            b->encoded = (lua_Integer)o.length;
            if (b->history) keep_history(L, position);
            return 1;
        }
    }
    b->pathGeneration++; /* (the Lua `collect` does not tell what moved) */
    lua_Integer start = b->collected;
    lua_pushvalue(L, UPVALUE(RUN_COLLECT));
    lua_pushinteger(L, position);
    lua_call(L, 1, 0);
    if (b->collected <= start) return 1; /* nothing changed */
    clua_json_open(L, &o, UPVALUE(RUN_ENCODED), (size_t)b->encoded);
    size_t header = o.length;
    clua_json_reserve(&o, 3 * sizeof(uint32_t));
    o.length += 3 * sizeof(uint32_t);
    lua_rawgeti(L, UPVALUE(RUN_COLLECTED), start + CLUA_COLLECTED_COUNT);
    lua_Integer changes = lua_tointeger(L, -1), cursor = start + CLUA_COLLECTED_ENTRY_LENGTH + 1;
    lua_pop(L, 1);
    int written = clua_json_changes(&o, UPVALUE(RUN_COLLECTED), &cursor, changes)
        && o.length - header - 3 * sizeof(uint32_t) < NOT_WRITTEN;
    for (lua_Integer j = start + 1; j <= b->collected; j++) { /* written out (or dropped): the list need not keep it */
        lua_pushnil(L);
        lua_rawseti(L, UPVALUE(RUN_COLLECTED), j);
    }
    b->collected = start;
    if (!written) { /* b->encoded stays: no record */
        if (b->history) {
            lua_pushvalue(L, UPVALUE(RUN_COLLECT));
            lua_pushinteger(L, position);
            lua_pushboolean(L, 0);
            lua_pushboolean(L, 1);
            lua_call(L, 3, 0);
        }
        return 0;
    }
    uint32_t fields[3] = { (uint32_t)position, (uint32_t)changes, (uint32_t)(o.length - header - 3 * sizeof(uint32_t)) };
    memcpy(o.bytes + header, fields, sizeof fields);
    b->encoded = (lua_Integer)o.length;
    return 1;
}

// MARK: The functions

/// `setjournaling(flag, history)` [-2, +0, -]: whether `run` reads each action's changes, and whether the
/// Lua `collect` must do it (it also keeps history entries).
int changes_setjournaling(lua_State *L) {
    barrier(L)->journaling = lua_toboolean(L, 1);
    barrier(L)->pathGeneration++; /* runs did not keep the cached paths up to date while it was off */
    barrier(L)->history = lua_toboolean(L, 2);
    return 0;
}

/// `collectedcount([n])` [-(0|1), +1, e]: the length of the list of changes read (set with `n`).
int changes_collectedcount(lua_State *L) {
    Barrier *b = barrier(L);
    if (lua_gettop(L) >= 1) b->collected = luaL_checkinteger(L, 1);
    lua_pushinteger(L, b->collected);
    return 1;
}

/// [-0, +0, m] After the action at run `position` committed (while journaling): when it moved `math.random`'s
/// generator from where the run's records last told it, a record of its own telling where — position, the count
/// `UINT32_MAX` (no changes: a generator's state), length 32, then the four words — after the action's changes.
/// (The host gives each entry its state from it: `EncodedJournal.random(at:)`.)
void changes_record_random(lua_State *L, Barrier *b, lua_Integer position) {
    if (b->random == NULL || memcmp(b->random, b->recordedRandom, sizeof b->recordedRandom) == 0) return;
    CLuaJSON o;
    clua_json_open(L, &o, UPVALUE(RUN_ENCODED), (size_t)b->encoded);
    unsigned char *at = clua_json_reserve(&o, 3 * sizeof(uint32_t) + sizeof b->recordedRandom);
    uint32_t fields[3] = { (uint32_t)position, UINT32_MAX, (uint32_t)sizeof b->recordedRandom };
    memcpy(at, fields, sizeof fields);
    memcpy(at + sizeof fields, b->random, sizeof b->recordedRandom);
    o.length += sizeof fields + sizeof b->recordedRandom;
    b->encoded = (lua_Integer)o.length;
    memcpy(b->recordedRandom, b->random, sizeof b->recordedRandom);
}

/// `records()` [-0, +2, -]: the journal records of the last run (`changes_record`): the buffer (a userdata, or
/// nil) and the length of what it holds; empties them. (Read in place by the host: no string is made.)
int changes_records(lua_State *L) {
    Barrier *b = barrier(L);
    lua_Integer length = b->encoded;
    if (lua_rawgeti(L, UPVALUE(RECORDS), 1) != LUA_TUSERDATA || (size_t)length > lua_rawlen(L, -1)) length = 0;
    lua_pushinteger(L, length);
    b->encoded = 0;
    return 2;
}
