// Proxies (`proxies_`): the empty tables scripts receive in place of the state's tables, made when a script first
// reaches a table and cached (one proxy per table while anyone holds it); each stamped with the call it was handed
// out in, and good only in that call; `__index` through them; and where each table of the state is, recorded as
// its proxy is made (the paths of changes are read from those records, and cached as the reducer reads its way
// down). The barrier as a whole, and its contract: docs/design.md, "The write barrier".
#include "barrier.h"
#include "clua_guard.h"

// MARK: Proxies live for one call
//
// A proxy is the same table every time its real table is reached (the caches keep it), so a script could keep
// one past the call that received it — in an upvalue, say — and read or write the state with it later: outside
// read tracking, and with an outcome that would depend on when the caches were last renewed (a proxy whose
// entry went is refused, one whose entry stayed is not), which differs between a live session and its replay.
// So every call (a transaction — an action, init's result, a migration — or a reader's run) has an `epoch`,
// each proxy is stamped with the epoch whenever it is handed out (`proxies_push`, `claim`), and the metamethods
// use only a proxy stamped in the running call: any other is refused, always, naming the script's line.

#define STAMPS_MIN 64         /* slots of the first set */
#define STAMPS_SHRINK 65536   /* a set at least this large is given back after a call that used an eighth of it */

/// [-0, +0, -] Puts `proxy` in the set (which has room).
static void stamp_into(Barrier *b, const void *proxy) {
    size_t i = stamp_slot(proxy, b->stampMask);
    while (b->stamps[i].epoch == b->epoch) {
        if (b->stamps[i].proxy == proxy) return;
        i = (i + 1) & b->stampMask;
    }
    b->stamps[i].proxy = proxy;
    b->stamps[i].epoch = b->epoch;
    b->stampLive++;
}

/// [-0, +0, m] Replaces the set by one of `capacity` slots holding this call's proxies. The old set's memory
/// (a userdata) stays referenced until the new one replaces it.
static void resize_stamps(lua_State *L, Barrier *b, int control, size_t capacity) {
    StampSlot *old = b->stamps;
    size_t oldCapacity = old == NULL ? 0 : b->stampMask + 1;
    StampSlot *fresh = (StampSlot *)lua_newuserdatauv(L, capacity * sizeof(StampSlot), 0);
    memset(fresh, 0, capacity * sizeof(StampSlot));
    b->stamps = fresh;
    b->stampMask = capacity - 1;
    b->stampLive = 0;
    for (size_t i = 0; i < oldCapacity; i++) {
        if (old[i].epoch == b->epoch) stamp_into(b, old[i].proxy);
    }
    lua_setiuservalue(L, control, STAMPS);
}

/// [-0, +0, m] Stamps the proxy at `proxy` with the running call.
void proxies_stamp(lua_State *L, Barrier *b, const void *proxy) {
    size_t capacity = b->stamps == NULL ? 0 : b->stampMask + 1;
    if (2 * (b->stampLive + 1) > capacity) {
        resize_stamps(L, b, UPVALUE(CONTROL), capacity == 0 ? STAMPS_MIN : 2 * capacity);
    } else if (b->stampLive == 0 && capacity >= STAMPS_SHRINK && 8 * b->stampLast < capacity) {
        resize_stamps(L, b, UPVALUE(CONTROL), capacity / 4);
    }
    stamp_into(b, proxy);
}

/// [-0, +0, -] Counts a proxy made; past `PROXIES_BEFORE_WEAK`, the caches turn weak.
static void count_made(lua_State *L, Barrier *b) {
    if (++b->made == PROXIES_BEFORE_WEAK) {
        lua_pushvalue(L, UPVALUE(WEAK_KEYS));
        lua_setmetatable(L, UPVALUE(TARGETS));
        lua_pushvalue(L, UPVALUE(WEAK_ALL));
        lua_setmetatable(L, UPVALUE(PROXIES));
    }
}

/// [-1, +1, m] Replaces the real table on top with its proxy, made now if it has none. A proxy made now
/// records where the table is — the real table at stack index `parent` holds it under the key at `key` —
/// unless `parent` is 0 (the root, or a table whose place the Lua side records itself). Paths of changes and
/// the one-place rule (`state_data.lua`, "State is data") read those records.
void proxies_push(lua_State *L, Barrier *b, int parent, int key) {
    lua_pushvalue(L, -1);
    if (lua_rawget(L, UPVALUE(PROXIES)) != LUA_TNIL) { /* made before */
        lua_remove(L, -2);
        proxies_stamp(L, b, lua_topointer(L, -1));
        return;
    }
    lua_pop(L, 1);
    lua_createtable(L, 0, 0); /* real, proxy */
    lua_pushvalue(L, UPVALUE(META));
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_pushvalue(L, -3);
    lua_rawset(L, UPVALUE(TARGETS)); /* targets[proxy] = real */
    lua_pushvalue(L, -2);
    lua_pushvalue(L, -2);
    lua_rawset(L, UPVALUE(PROXIES)); /* proxies[real] = proxy */
    if (parent != 0) {
        lua_pushvalue(L, -2);
        lua_pushvalue(L, parent);
        lua_rawset(L, UPVALUE(PARENTS)); /* parents[real] = parent */
        lua_pushvalue(L, -2);
        lua_pushvalue(L, key);
        lua_rawset(L, UPVALUE(PARENT_KEYS)); /* parentkeys[real] = key */
    }
    lua_remove(L, -2);
    count_made(L, b);
    forget_last_proxy(b, lua_topointer(L, -1));
    proxies_stamp(L, b, lua_topointer(L, -1));
}

// MARK: `__index`

/// [-0, +0, -] While journaling: caches the path of the table at `child` (its address), just read as
/// `parent[key]` (stack indices), when its parent's path is known — the root's, or cached — so that the
/// changes written to it are recorded without walking up the records of where tables are (`path_prefix`).
/// Integer keys and plain ASCII string keys only (others are left to the walk).
static void learn_path(lua_State *L, Barrier *b, int parent, int key, const void *child) {
    if (cached_path(b, child) != NULL) return;
    const unsigned char *above = NULL;
    size_t length = 0;
    if (!known_path(b, lua_topointer(L, parent), &above, &length) || length >= PATH_PREFIX_MAX) return;
    unsigned char path[PATH_PREFIX_MAX + 24];
    if (length > 0) {
        memcpy(path, above, length);
        path[length++] = ',';
    }
    if (lua_isinteger(L, key)) {
        length += clua_json_integer_text((char *)path + length, lua_tointeger(L, key));
    } else if (lua_type(L, key) == LUA_TSTRING) {
        size_t count;
        const unsigned char *text = (const unsigned char *)lua_tolstring(L, key, &count);
        if (length + count + 2 > PATH_PREFIX_MAX || !clua_json_is_plain(text, count)) return;
        path[length++] = '"';
        memcpy(path + length, text, count);
        length += count;
        path[length++] = '"';
    } else {
        return;
    }
    keep_path(b, child, path, length);
}

/// `__index(proxy, key)` [-2, +1, e] while writing, or while a reader runs (the read is noted): the real
/// table's value, a table as its proxy.
int proxies_index(lua_State *L) {
    Barrier *b = barrier(L);
    int keyType = lua_type(L, 2);
    if (keyType == LUA_TNUMBER) integral_key(L);
    // (Lua calls a metamethod with exactly its arguments; anything else is handed over.)
    if (b->mode == MODE_CLOSED || lua_gettop(L) != 2 || keyType == LUA_TTABLE) {
        return fall_back(L, UPVALUE(INDEX_FALLBACK), 2, 1);
    }
    const void *proxy = lua_topointer(L, 1);
    if (!push_last_real(L, b, proxy)) { /* 3: real */
        lua_pushvalue(L, 1);
        if (lua_rawget(L, UPVALUE(TARGETS)) != LUA_TTABLE || !stamped(b, proxy)) {
            return fall_back(L, UPVALUE(INDEX_FALLBACK), 2, 1);
        }
    }
    if (b->mode == MODE_READ) {
        reads_note_read(L, b, 3, 2);
        lua_pushvalue(L, 2);
        if (lua_rawget(L, 3) == LUA_TTABLE) proxies_push(L, b, 3, 2); /* 4: the value */
        return 1;
    }
    lua_pushvalue(L, 2);
    if (lua_rawget(L, 3) == LUA_TTABLE) { /* 4: the value */
        // The script is about to use this table (it asked for it): start fetching it, and what usually lies
        // right after it (its slots, allocated next when it was made), while its proxy is found or made. In a
        // large state the table is rarely in cache, and each miss is a trip to main memory.
        const char *table = (const char *)lua_topointer(L, 4);
        __builtin_prefetch(table);
        __builtin_prefetch(table + 64);
        __builtin_prefetch(table + 128);
        proxies_push(L, b, 3, 2);
        if (b->journaling) learn_path(L, b, 3, 2, table);
    }
    return 1;
}

// MARK: The functions

/// `proxy(real)` [-1, +1, e]: the proxy of a real table, made now if it has none (the Lua side records where
/// the table is).
int proxies_proxy(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    proxies_push(L, barrier(L), 0, 0);
    return 1;
}

/// `fresh(proxy)` [-1, +1, -]: whether the proxy was handed out in the running call (the Lua halves of the
/// metamethods refuse any other).
int proxies_fresh(lua_State *L) {
    lua_pushboolean(L, stamped(barrier(L), lua_topointer(L, 1)));
    return 1;
}

/// [-0, +0, -] Whether the key at `key` is an integer from 1 to `border`: one a table's sequence part holds.
static int in_sequence(lua_State *L, int key, lua_Unsigned border) {
    if (!lua_isinteger(L, key)) return 0;
    lua_Integer k = lua_tointeger(L, key);
    return k >= 1 && (lua_Unsigned)k <= border;
}

/// A border this short keeps its sequence part in a copy whatever the part holds: Lua keeps a constructor's part as
/// long as it was written (`{1, nil, nil, nil, 5}`: border 5), and a short one costs little.
#define SHORT_BORDER 64

/// The length of a table's array part, as Lua sized it (`ltable.c`; not in Lua's public API: linked from the static
/// library, `Sources/CLua/module.modulemap`).
unsigned int luaH_realasize(const void *table);

/// [-0, +1, m] Pushes a new table with room for what the table at `t` holds — `entries`, of which `outside` are not
/// under an integer key from 1 to its border — so that filling it never rehashes: its array part as long as the
/// table's, so that `#` answers as the table's would, now and after the script appends to it (`{1, nil, 3}` and
/// `table.pack(1, nil, 3)`: 3, as Lua leaves them; a list of six with its first three taken out, then appended to:
/// 7, where a part only as long as the border, 6, had the append rehash, which counts the keys again — 0), and its
/// hash part for the rest — unless that part is long and far past what the table holds (a sparse table), where a
/// copy would take a part of that length for a handful of keys.
static void push_sized_like(lua_State *L, int t, size_t entries, size_t outside) {
    size_t length = luaH_realasize(lua_topointer(L, t));
    if (length > SHORT_BORDER && length > 2 * entries) {
        length = entries;
        outside = entries;
    }
    lua_createtable(L, (int)length, (int)outside);
}

/// `claim(t [, returned])` [-(1|2), +1, m]: makes a table a script is storing in the state the state's own. What
/// `t` holds moves to a new table, which is returned (the real table, which the state will hold), and `t`, now
/// empty, becomes its proxy: the script's `t` and what it reads from the state stay the same table, its later
/// writes to it are journaled, and after the call it is refused like any proxy kept too long — no script ever
/// holds a table of the state itself. With `returned` (the function that made `t` has returned: a state it gave
/// back), `t` is not stamped with the running call: nothing in it can use `t` any more, and a large state's
/// tables would fill the set of stamps for nothing. (The Lua side checked that `t` is data; a table inside it
/// is claimed by its own call.)
int proxies_claim(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    int returned = lua_toboolean(L, 2);
    lua_settop(L, 1);
    lua_Unsigned border = lua_rawlen(L, 1);
    size_t entries = 0, outside = 0;
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
        entries++;
        if (!in_sequence(L, -2, border)) outside++;
        lua_pop(L, 1);
    }
    push_sized_like(L, 1, entries, outside); /* 2: the real table */
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) { /* key, value */
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, 2);
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, 1); /* clearing the current key is allowed while traversing */
    }
    lua_pushvalue(L, UPVALUE(META));
    lua_setmetatable(L, 1);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_rawset(L, UPVALUE(TARGETS)); /* targets[t] = real */
    forget_last_proxy(b, lua_topointer(L, 1));
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 1);
    lua_rawset(L, UPVALUE(PROXIES)); /* proxies[real] = t */
    count_made(L, b);
    if (!returned) proxies_stamp(L, b, lua_topointer(L, 1));
    return 1;
}

// MARK: A whole new state, placed at once
//
// A state a function returned — `init`'s, a reducer's new state, a child's — is placed when its maker has
// returned: nothing of that call can use a proxy any more. `claim` would place it table by table, recording where
// each one is and caching each proxy, and the Lua walk before it keeps its own sets: for a state of 100,000 items,
// most of the start. `placefresh` does the same work in one C pass when the value is all new — plain data,
// a tree, no table of the state inside it, no table deeper than allowed — and nothing else: no records (a table's
// place is recorded when a script reaches it, as for any table the caches forgot), no proxies cached (each
// claimed table is a proxy no call was handed, refused wherever it is used, as a kept proxy is once the caches
// are renewed). Anything else is left to the Lua walk, which names what is wrong; nothing is changed before the
// whole value was checked.

/// The tables of a value met so far, by address, each with how many entries it holds (open addressing, at most
/// half full; the memory is a userdata at a fixed stack index, replaced as the set grows).
typedef struct FreshSlot {
    const void *table;
    size_t entries;
    size_t outside; /* entries whose key is not an integer from 1 to the table's border */
} FreshSlot;

typedef struct FreshSet {
    FreshSlot *slots;
    size_t mask, live;
    size_t visited; /* entries checked, for the time budget (`FRESH_DEADLINE_EVERY`) */
    int index; /* the stack index of the userdata holding `slots` */
} FreshSet;

#define FRESH_MIN 16
#define FRESH_MAX_NESTING 256 /* deeper values go the Lua way (the C stack is not spent on them) */
#define FRESH_DEADLINE_EVERY 4096 /* entries checked between two looks at the time budget (no hook fires in C) */

static size_t fresh_slot(const FreshSet *set, const void *table) {
    size_t i = stamp_slot(table, set->mask);
    while (set->slots[i].table != NULL && set->slots[i].table != table) i = (i + 1) & set->mask;
    return i;
}

/// [-0, +0, m] Adds the table at `table` with its `entries`; 0 when it is in the set already (a value that is not
/// a tree).
static int fresh_add(lua_State *L, FreshSet *set, const void *table, size_t entries, size_t outside) {
    if (2 * (set->live + 1) > set->mask + 1) {
        size_t capacity = 2 * (set->mask + 1);
        FreshSlot *old = set->slots;
        size_t oldCapacity = set->mask + 1;
        set->slots = (FreshSlot *)lua_newuserdatauv(L, capacity * sizeof(FreshSlot), 0);
        memset(set->slots, 0, capacity * sizeof(FreshSlot));
        set->mask = capacity - 1;
        for (size_t i = 0; i < oldCapacity; i++) {
            if (old[i].table != NULL) set->slots[fresh_slot(set, old[i].table)] = old[i];
        }
        lua_replace(L, set->index); /* (the old slots are garbage from here: nothing reads them again) */
    }
    size_t i = fresh_slot(set, table);
    if (set->slots[i].table != NULL) return 0;
    set->slots[i].table = table;
    set->slots[i].entries = entries;
    set->slots[i].outside = outside;
    set->live++;
    return 1;
}

/// [-0, +0, m] Whether the table at `t`, and every table in it, is new data that may be placed `levels` more
/// levels deep: 0 at the first thing that is not (the Lua walk says what). `root` is the state's root table;
/// `parents` says whether the records of where tables are hold any.
static int fresh_check(lua_State *L, Barrier *b, FreshSet *set, int t, int levels, const void *root, int parents) {
    (void)b;
    if (lua_getmetatable(L, t)) {
        lua_pop(L, 1);
        return 0; /* (a proxy, a table of the state, or a table that cannot be data) */
    }
    const void *table = lua_topointer(L, t);
    if (table == root) return 0;
    if (parents) {
        lua_pushvalue(L, t);
        int recorded = lua_rawget(L, UPVALUE(PARENTS)) != LUA_TNIL;
        lua_pop(L, 1);
        if (recorded) return 0;
    }
    if (!lua_checkstack(L, 4)) return 0;
    size_t entries = 0;
    lua_Unsigned border = lua_rawlen(L, t);
    size_t outside = 0;
    lua_pushnil(L);
    while (lua_next(L, t) != 0) { /* key, value */
        entries++;
        if (++set->visited % FRESH_DEADLINE_EVERY == 0) clua_check_deadline(L); /* (nothing is changed yet) */
        if (!in_sequence(L, -2, border)) outside++;
        switch (lua_type(L, -2)) {
        case LUA_TSTRING:
        case LUA_TBOOLEAN:
            if (!is_plain_data(L, -2)) return 0;
            break;
        case LUA_TNUMBER:
            if (!lua_isinteger(L, -2) && isinf(lua_tonumber(L, -2))) return 0;
            break;
        default:
            return 0;
        }
        if (lua_type(L, -1) == LUA_TTABLE) {
            if (levels == 0 || !fresh_check(L, b, set, lua_gettop(L), levels - 1, root, parents)) return 0;
        } else if (!is_plain_data(L, -1)) {
            return 0;
        }
        lua_pop(L, 1);
    }
    return fresh_add(L, set, table, entries, outside);
}

/// [-0, +0, m] `table[key] = value`, raw (stack indices; `table` may be an upvalue's).
static inline void set_raw(lua_State *L, int table, int key, int value) {
    lua_pushvalue(L, key);
    lua_pushvalue(L, value);
    lua_rawset(L, table);
}

/// [-0, +1, m] Pushes the real table of the new table at `t` (checked by `fresh_check`): its entries, the tables
/// among them placed the same way, move to a table made with room for them, and `t`, emptied, becomes a proxy.
/// `parent` (a stack index, 0 for none) is where the value goes, under the key at `key`: the running call still
/// holds the value (a reducer stored a table it made), so each table becomes a proxy good in this call, cached,
/// with the record of where its real table is — as `claim` makes them, one by one.
static void fresh_place(lua_State *L, Barrier *b, FreshSet *set, int t, int parent, int key) {
    luaL_checkstack(L, 6, "the state placed");
    const void *table = lua_topointer(L, t);
    const FreshSlot *slot = &set->slots[fresh_slot(set, table)];
    push_sized_like(L, t, slot->entries, slot->outside);
    int real = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t) != 0) { /* key, value */
        if (lua_type(L, -1) == LUA_TTABLE) {
            fresh_place(L, b, set, lua_gettop(L), parent != 0 ? real : 0, lua_gettop(L) - 1);
            lua_replace(L, -2);
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, real); /* key */
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, t); /* (clearing the current key is allowed while traversing) */
    }
    lua_pushvalue(L, UPVALUE(META));
    lua_setmetatable(L, t);
    forget_last_proxy(b, table);
    if (parent == 0) return;
    set_raw(L, UPVALUE(TARGETS), t, real);
    set_raw(L, UPVALUE(PROXIES), real, t);
    set_raw(L, UPVALUE(PARENTS), real, parent);
    set_raw(L, UPVALUE(PARENT_KEYS), real, key);
    count_made(L, b); /* the proxy, */
    count_made(L, b); /* and the record (the Lua side counts those it makes in `S.placed`) */
    proxies_stamp(L, b, table);
}

/// [-0, +(0|1), m] Places the value at `value` — a table the running call made, about to be stored in the real
/// table at `parent` under the key at `key` — when it is all new data (`fresh_check`) that may nest `levels` more
/// levels below it: pushes its real table (its tables are the call's proxies now, as `claim` makes them) and
/// returns 1. Otherwise changes nothing, pushes nothing and returns 0: the Lua walk places it (tables of the
/// state moved into it) or names what is wrong. A reducer storing a thousand new items makes each in one pass of
/// C, not a walk, a claim and records in Lua each.
int proxies_place_new(lua_State *L, Barrier *b, int value, int parent, int key, int levels) {
    if (levels < 0 || levels > FRESH_MAX_NESTING) return 0;
    luaL_checkstack(L, 8, "the state placed");
    int top = lua_gettop(L);
    // (The first slots are on the C stack: most values are an item or two. A larger set moves to a userdata at
    // `index`, which holds nil until then.)
    FreshSlot first[FRESH_MIN];
    memset(first, 0, sizeof first);
    lua_pushnil(L);
    FreshSet set = { .slots = first, .mask = FRESH_MIN - 1, .live = 0, .index = top + 1 };
    // (Each table is looked up in the records: in a reducer they are seldom empty, and one found is not new.)
    if (!fresh_check(L, b, &set, value, levels, NULL, 1)) {
        lua_settop(L, top);
        return 0;
    }
    lua_settop(L, top + 1);
    fresh_place(L, b, &set, value, parent, key);
    lua_remove(L, top + 1);
    return 1;
}

/// `placefresh(value, levels, owned, root)` [-4, +1, m]: the real table of a whole new state about to be placed
/// (see "A whole new state, placed at once"): `value` itself when `owned` (the host made it: nothing to claim),
/// or its claimed copy; nil when it is not all new data, `levels` more levels deep at most below it (then
/// nothing was changed). `root`: the state's root table.
int proxies_placefresh(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer levels = luaL_checkinteger(L, 2);
    int owned = lua_toboolean(L, 3);
    const void *root = lua_type(L, 4) == LUA_TTABLE ? lua_topointer(L, 4) : NULL;
    lua_settop(L, 1);
    if (levels < 0 || levels > FRESH_MAX_NESTING) {
        lua_pushnil(L);
        return 1;
    }
    lua_pushnil(L);
    int parents = lua_next(L, UPVALUE(PARENTS)) != 0;
    lua_settop(L, 1);
    FreshSet set = { .slots = (FreshSlot *)lua_newuserdatauv(L, FRESH_MIN * sizeof(FreshSlot), 0), .mask = FRESH_MIN - 1, .live = 0, .index = 2 };
    memset(set.slots, 0, FRESH_MIN * sizeof(FreshSlot));
    if (!fresh_check(L, b, &set, 1, (int)levels, root, parents)) {
        lua_pushnil(L);
        return 1;
    }
    lua_settop(L, 2);
    if (owned) {
        lua_pushvalue(L, 1);
        return 1;
    }
    fresh_place(L, b, &set, 1, 0, 0);
    return 1;
}

/// `made()` [-0, +1, -]: proxies made since the caches were last renewed (`renew`).
int proxies_made(lua_State *L) {
    lua_pushinteger(L, barrier(L)->made);
    return 1;
}

/// `renew(functions, size)` [-2, +4, m]: the caches start afresh. Makes four tables, each with room for `size`
/// entries (`targets`, `proxies`, `parents`, `parentkeys`), puts them in place of the old ones in every
/// function of this barrier that the table `functions` holds (each C closure holds the caches as upvalues of its
/// own), and returns them for the Lua side. Tables made with room are filled without a rehash; a cache emptied
/// in place, or made empty, rehashes as it grows (`S.trimCaches` in state_runtime.lua says what that cost). The
/// new caches are strong (`count_made` turns them weak again), and the paths cached for the old ones are stale.
int proxies_renew(lua_State *L) {
    static const int caches[] = { UPVALUE_TARGETS, UPVALUE_PROXIES, UPVALUE_PARENTS, UPVALUE_PARENT_KEYS };
    enum { CACHE_COUNT = sizeof caches / sizeof caches[0], FIRST_CACHE = 2 };
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer size = luaL_checkinteger(L, 2);
    luaL_argcheck(L, size >= 0 && size <= PROXIES_RENEW_MAX, 2, "the caches' size is out of range");
    lua_settop(L, 1);
    luaL_checkstack(L, CACHE_COUNT + 4, "the caches");
    for (int i = 0; i < CACHE_COUNT; i++) lua_createtable(L, 0, (int)size); /* FIRST_CACHE… */
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) { /* key, value */
        if (lua_iscfunction(L, -1) && lua_getupvalue(L, -1, UPVALUE_CONTROL) != NULL) {
            int ours = lua_touserdata(L, -1) == (void *)b;
            lua_pop(L, 1);
            for (int i = 0; ours && i < CACHE_COUNT; i++) {
                lua_pushvalue(L, FIRST_CACHE + i);
                lua_setupvalue(L, -2, caches[i]);
            }
        }
        lua_pop(L, 1);
    }
    b->made = 0;
    b->pathGeneration++;
    b->lastEpoch = 0; /* (no call has epoch 0) */
    lua_pushnil(L);
    lua_setiuservalue(L, UPVALUE(CONTROL), LAST_REAL); /* (a table that left the state goes with the caches) */
    return CACHE_COUNT;
}

/// [-0, +0, -] Whether the value at `index` holds nothing that is state: not a table, or a table that is not a
/// proxy and holds no table, as a key or a value — a reader's result with no state inside to depend on and no
/// proxy to strip (most props).
int proxies_flat(lua_State *L, int index) {
    if (lua_type(L, index) != LUA_TTABLE) return 1;
    // A proxy is the table whose metatable is the proxies' (scripts can neither reach nor set that one): one
    // pointer compared, where looking the table up among the proxies hashes it.
    if (lua_getmetatable(L, index)) {
        int proxy = lua_rawequal(L, -1, UPVALUE(META));
        lua_pop(L, 1);
        if (proxy) return 0;
    }
    lua_pushnil(L);
    while (lua_next(L, index) != 0) {
        int table = lua_type(L, -1) == LUA_TTABLE || lua_type(L, -2) == LUA_TTABLE;
        lua_pop(L, table ? 2 : 1);
        if (table) return 0;
    }
    return 1;
}

/// `isflat(value)` [-1, +1, -]: `proxies_flat`.
int proxies_isflat(lua_State *L) {
    lua_settop(L, 1);
    lua_pushboolean(L, proxies_flat(L, 1));
    return 1;
}
