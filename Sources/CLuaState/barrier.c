// A journaling write barrier over proxy tables, and the loop that reduces a run of actions through it, in C.
//
// This comment is the barrier's contract; `state_runtime.lua` (the Lua half), `StateRuntime.swift`,
// `ScriptEngine+Runs.swift` and `LuaVM.loadTrusted` point here.
//
// ## Why a write barrier with an undo journal (and not persistent structures)
//
// An app's state is ordinary Lua tables, mutated in place. Scripts never touch those tables directly: `reduce`,
// `props` and selectors receive *proxies* — empty tables whose metamethods forward to the real table. That one
// indirection buys the three properties LuaStore is built on:
//
// 1. Cost per action does not grow with state size. A write costs a `rawset` plus three journal slots; nothing
//    is copied (a copy-on-write draft would shallow-copy a 100,000-entry array to change one entry). Proxies are
//    made lazily, only for the tables a function actually reaches, and cached.
// 2. Every dispatch is a transaction. Each write appends (table, key, old value) to the journal. If the reducer
//    raises, runs out of time or memory, the host calls `rollback`, which replays the journal backwards;
//    otherwise the next transaction drops it. Untouched tables keep their identity across dispatches.
// 3. Changes are known without comparing. Each write to a table some reader (props, a selector, subscriptions)
//    read is recorded in a change set (real table -> keys); the Lua half maps it to the readers to run again.
//
// Persistent structures (HAMTs) would give the same guarantees, but every read and write in a script would go
// through tree operations written in Lua, and tables would stop being tables.
//
// ## Who does what
//
// `makebarrier{…}` (trusted host code only) returns the barrier's functions (below, "The functions"). The
// common cases run here: `__index` while writing; `__newindex` while writing, for a key that stays and a value
// that is plain data; making proxies; the loop over a run of actions; writing what each committed action changed, as a recording's JSON,
// for the session journal (`record_changes`, with `json.c`; paths cached while nothing moves, learned as the
// reducer reads its way down, and the writes `__newindex` made itself kept as it made them, so that the usual
// action's changes are written without reading the journal back); the barrier's state. A float key with an
// integer's value is taken as that integer, as a table keeps it. Everything else —
// read tracking, a key or value that is a table, a key that appears or goes away, an error to raise — is handed,
// unchanged, to the Lua functions the barrier was made with (`index`, `newindex`, `note`, `adopt`), which are what
// the metamethods were before this file existed (docs/benchmarks.md has what that saved).
//
// The barrier's state (mode, journal length, whether the declared subscriptions are stale, the position in a
// run, proxies made) is a C struct every function of one barrier shares, so the hot paths read it for free; the
// Lua side reads and sets it through `mode`/`setmode`, `dirty`/`setdirty`, `position`, `made`.
//
// Modes (`B.CLOSED`, `B.WRITE`, `B.READ`, the only definition of their numbers): no function of the app runs;
// `reduce` or `migrate` runs (writes are journaled); `props`, a selector or `subscriptions` runs (writes are
// errors, reads are recorded by the Lua half).
//
// The state is data, a tree (docs/scripted-apps.md, "State is data"): the fast path stores only strings, booleans and finite
// numbers; the Lua half refuses anything else that is not data, a table placed in a second place or inside
// itself, and keys that are not data. That is what makes a change's path (where the changed table is, from the
// records `to_proxy` keeps) well defined, and every state convertible.
//
// Limits, by design: state tables are data (no metatables of their own); `next` and `rawget`/`rawset` do not
// see through proxies (`pairs`, indexing and `table.*` do; the sandbox's `rawset` refuses proxies); a proxy may
// not be kept after the function that received it returns.
//
// ## Stack effects
//
// Every function here states its stack effect as Lua's manual does, `[-o, +p, x]`: it pops `o` values, pushes
// `p`, and `x` says whether it may raise: `-` never, `m` only a memory error, `e` any error (it calls Lua). The
// functions Lua calls (`lua_CFunction`s) are entered with their arguments and may raise (`e`): they run only
// inside a protected call the host made, never in a Swift frame.
#include "json.h"
#include "clua_state.h"

#include <math.h>

// MARK: The barrier's state

/// The modes, by name and number; exported to the Lua half as `B.<name>`.
#define BARRIER_MODES(X) \
    X(CLOSED, 0)         \
    X(WRITE, 1)          \
    X(READ, 2)

enum {
#define BARRIER_MODE_ENUM(name, number) MODE_##name = number,
    BARRIER_MODES(BARRIER_MODE_ENUM)
#undef BARRIER_MODE_ENUM
};

/// Paths, cached (for the journal's records): where a table of the state is, as the JSON of its path's keys
/// (`"items",7`), for the tables changes were last written in. A slot is good while `generation` is the
/// barrier's: it moves on whenever a table may have moved — a transaction that stored or removed a table, one
/// the Lua side runs (`begin`), a rollback, the caches emptied (`made(0)`: also after time travel) — so a stale
/// path is never used; and a table is only freed after it left the state, which moves it on too.
#define PATH_SLOTS 256
#define PATH_PREFIX_MAX 52
typedef struct PathSlot {
    const void *table;
    uint32_t generation;
    uint32_t length;
    unsigned char prefix[PATH_PREFIX_MAX];
} PathSlot;

/// Changes `__newindex` saw recorded in the change set since the last flush, by the identity of the table and of
/// the key — a string's address, or an integer's value (other keys are not remembered): a write to one of them
/// has nothing to add. Safe as addresses: the change set holds both tables and keys until the flush, which makes
/// every slot stale (`at` is the barrier's `flushes`).
#define NOTED_SLOTS 8
typedef struct NotedSlot {
    const void *table;
    const void *key;     /* a string key; NULL for an integer key */
    lua_Integer integer; /* an integer key */
    lua_Integer at;
} NotedSlot;

/// A write `__newindex` made itself while journaling (a key that stays, a value that is plain data), kept so
/// that what the action changed can be written without reading the journal back (`write_scalar_changes`): the
/// real table's address, the key (a float with an integer's value as that integer, as the table keeps it), the
/// value before and after. Strings are kept by address: the journal holds every key and old value, and the
/// table or a later write's old value each new one, until the action's changes are written.
#define SCALAR_WRITES 16
typedef struct ScalarWrite {
    const void *table;
    CLuaScalar key, before, after;
} ScalarWrite;

/// A proxy handed to a script, and the call it was handed out in (`epoch`): a proxy is good only in the call
/// that received it (see "Proxies live for one call").
typedef struct StampSlot {
    const void *proxy;
    uint64_t epoch;
} StampSlot;

typedef struct Barrier {
    lua_Integer mode;           /* MODE_CLOSED; MODE_WRITE (reduce, migrate); MODE_READ (props, selectors) */
    lua_Integer count;          /* journal slots the open (or last) transaction filled */
    lua_Integer filled;         /* journal slots that may hold something (from earlier transactions) */
    lua_Integer position;       /* the action of a run being reduced */
    lua_Integer flushes;        /* how many times the change set was handed over and started afresh */
    lua_Integer made;           /* proxies made since the caches were last emptied */
    int subscriptionsDirty;     /* `subscriptions` must run again before its result is used */
    int observed;               /* since the last flush, a write changed something a reader read */
    int moved;                  /* the open transaction stored a table that was in the state already */
    int journaling;             /* `run` reads each action's changes after it commits */
    int history;                /* ... and the Lua `collect` keeps history entries: it does the reading */
    lua_Integer collected;      /* the length of the list of changes read since it was last emptied */
    lua_Integer encoded;        /* the bytes of journal records written in the buffer since the last run began */
    uint32_t pathGeneration;    /* the paths cached under another generation are stale (see "Paths, cached") */
    const void *root;           /* the state's root table, while `rootGeneration` is `pathGeneration` */
    uint32_t rootGeneration;
    int scalarWrites;           /* the open transaction's first writes kept in `writes`: all of them when
                                   3 * scalarWrites == count (none came from the Lua side) */
    lua_Integer spareSets;      /* emptied key sets kept for the next read records (`SPARE_SETS`) */
    lua_Integer readStamp;      /* the running reader's mark in its last record, for the reads it repeats */
    lua_Integer matchedReads;   /* reads of the running reader its last record holds (each counted once) */
    lua_Integer freshReads;     /* reads it does not (in `FRESH_READS`) */
    uint64_t epoch;             /* the call running now (every transaction and every reader is a call of its own) */
    StampSlot *stamps;          /* the proxies handed out in this call, by address (open addressing; the memory
                                   is the control's `STAMPS` user value); NULL before the first */
    size_t stampMask;           /* the slots of `stamps`, less one (a power of two) */
    size_t stampLive;           /* slots holding a proxy of this call */
    size_t stampLast;           /* ... of the call before (for giving back the slots of a large one) */
    unsigned notedNext;         /* the slot of `noted` written next */
    NotedSlot noted[NOTED_SLOTS];
    ScalarWrite writes[SCALAR_WRITES];
    PathSlot paths[PATH_SLOTS];
} Barrier;

/// The cache slot of the table at `address`.
static PathSlot *path_slot(Barrier *b, const void *address) {
    uintptr_t bits = (uintptr_t)address;
    return &b->paths[((bits >> 4) ^ (bits >> 12)) & (PATH_SLOTS - 1)];
}

/// The cached path of the table at `address`, or NULL when this generation has none.
static const PathSlot *cached_path(Barrier *b, const void *address) {
    const PathSlot *slot = path_slot(b, address);
    return slot->table == address && slot->generation == b->pathGeneration ? slot : NULL;
}

/// Whether the path of the table at `address` is known without walking up the records: the root's (empty),
/// while this generation knows the root, or a cached one. Sets `*prefix` and `*length`.
static int known_path(Barrier *b, const void *address, const unsigned char **prefix, size_t *length) {
    if (address == b->root && b->rootGeneration == b->pathGeneration) {
        *length = 0;
        return 1;
    }
    const PathSlot *slot = cached_path(b, address);
    if (slot == NULL) return 0;
    *prefix = slot->prefix;
    *length = slot->length;
    return 1;
}

/// Caches `length` bytes of `prefix` as the path of the table at `address`, in this generation (a path longer
/// than a slot holds is not cached).
static void keep_path(Barrier *b, const void *address, const unsigned char *prefix, size_t length) {
    if (length > PATH_PREFIX_MAX) return;
    PathSlot *slot = path_slot(b, address);
    slot->table = address;
    slot->generation = b->pathGeneration;
    slot->length = (uint32_t)length;
    memcpy(slot->prefix, prefix, length);
}

// MARK: Upvalues
//
// Every closure `makebarrier` makes holds the Barrier (upvalue 1), then the shared fields of the table it was
// given, then its own upvalues. Each list below is the one place its upvalues are named: the indices
// (`UPVALUE(name)`) and what `makebarrier` puts in each slot are both generated from it. An entry is
// `X(name, kind, text)`: `FIELD` the table's field `text`; `LITERAL` the string `text`; `SPARE` nil, a slot
// the function writes itself.

enum { FIELD, LITERAL, SPARE };

#define SHARED_UPVALUES(X)                                                                               \
    X(TARGETS, FIELD, "targets")    /* proxy -> real table */                                           \
    X(PROXIES, FIELD, "proxies")    /* real table -> proxy */                                           \
    X(META, FIELD, "meta")          /* the proxies' metatable */                                        \
    X(WEAK_KEYS, FIELD, "weakkeys") /* { __mode = "k" } */                                              \
    X(WEAK_ALL, FIELD, "weakall")   /* { __mode = "kv" } */                                             \
    X(PARENTS, FIELD, "parents")    /* real table -> the real table holding it (recorded with its proxy) */ \
    X(PARENT_KEYS, FIELD, "parentkeys") /* real table -> the key it is held under */

/// `__index`'s own upvalues.
#define INDEX_UPVALUES(X) X(INDEX_FALLBACK, FIELD, "index") /* the Lua __index, for everything else */

/// `__newindex`'s own upvalues.
#define WRITE_UPVALUES(X)                                                                                  \
    X(WRITE_JOURNAL, FIELD, "journal")       /* (table, key, old value) triples */                        \
    X(WRITE_DEPENDENTS, FIELD, "dependents") /* real table -> key -> readers */                            \
    X(WRITE_CHANGES, FIELD, "changes")       /* { [1] = real -> { key -> true } since the last flush } */  \
    X(WRITE_FALLBACK, FIELD, "newindex")     /* the Lua __newindex, for everything else */                \
    X(WRITE_ALL, FIELD, "all")               /* the key of a table's readers of all of it */              \
    X(WRITE_STRUCTURE, FIELD, "structure")   /* the key of its readers of its length and set of keys */   \
    X(WRITE_SUBSCRIPTIONS, LITERAL, "subscriptions") /* the id of the subscriptions reader */

/// `run`'s own upvalues.
#define RUN_UPVALUES(X)                                                                                    \
    X(RUN_HOLDER, FIELD, "holder")  /* holder.state is the app's state table */                          \
    X(RUN_ADOPT, FIELD, "adopt")    /* adopt(result): installs a state the reducer returned */           \
    X(RUN_SETTLE, FIELD, "settle")  /* settle(): checks the tables the action moved (one place each) */   \
    X(RUN_COLLECT, FIELD, "collect") /* collect(position): reads a committed action's changes (journaling) */ \
    X(RUN_JOURNAL, FIELD, "journal")     /* (table, key, old value) triples */                            \
    X(RUN_COLLECTED, FIELD, "collected") /* the list of changes read (layout: state_runtime.lua) */       \
    X(RUN_CHILDREN, FIELD, "children")   /* child store id -> its local state */                          \
    X(RUN_ENCODED, FIELD, "encoded")     /* [1]: the buffer of journal records (json.h) */                 \
    X(RUN_TYPE, LITERAL, "type")    /* the key of an action's type */                                     \
    X(RUN_STATE, LITERAL, "state")  /* the key of the state in `holder` */

/// The own upvalue of the functions that read or write the journal.
#define JOURNAL_UPVALUES(X) X(JOURNAL, FIELD, "journal")

/// The own upvalue of `records`.
#define RECORDS_UPVALUES(X) X(RECORDS, FIELD, "encoded")

/// The own upvalues of the functions that keep readers' records (`recycle`, `endread`).
#define READER_UPVALUES(X)                                                                               \
    X(READER_DEPENDENTS, FIELD, "dependents")    /* real table -> key -> readers */                      \
    X(READER_HOLDER_STATE, FIELD, "holderstate") /* the shared set of what every reader reads of holder */

#define UPVALUE_ENUM(name, kind, text) UPVALUE_##name,
enum { UPVALUE_CONTROL = 1, SHARED_UPVALUES(UPVALUE_ENUM) FIRST_OWN_UPVALUE };
enum { INDEX_BEFORE_FIRST = FIRST_OWN_UPVALUE - 1, INDEX_UPVALUES(UPVALUE_ENUM) };
enum { WRITE_BEFORE_FIRST = FIRST_OWN_UPVALUE - 1, WRITE_UPVALUES(UPVALUE_ENUM) };
enum { RUN_BEFORE_FIRST = FIRST_OWN_UPVALUE - 1, RUN_UPVALUES(UPVALUE_ENUM) };
enum { JOURNAL_BEFORE_FIRST = FIRST_OWN_UPVALUE - 1, JOURNAL_UPVALUES(UPVALUE_ENUM) };
enum { RECORDS_BEFORE_FIRST = FIRST_OWN_UPVALUE - 1, RECORDS_UPVALUES(UPVALUE_ENUM) };
enum { READER_BEFORE_FIRST = FIRST_OWN_UPVALUE - 1, READER_UPVALUES(UPVALUE_ENUM) };
#undef UPVALUE_ENUM

/// The pseudo-index of the current function's upvalue `name`.
#define UPVALUE(name) lua_upvalueindex(UPVALUE_##name)

/// How many proxies may be made before the caches turn weak (so proxies no one holds any more can be
/// collected: props walking a large list, say); the Lua side empties or replaces them between calls.
#define PROXIES_BEFORE_WEAK 4096

/// [-0, +0, -] The barrier of the running function.
static Barrier *barrier(lua_State *L) { return (Barrier *)lua_touserdata(L, UPVALUE(CONTROL)); }

/// The barrier's user values, while a reader runs (READ mode): the record of what it read last time (real table
/// -> set of keys read; given to `setmode`, nil for a first run), in which the reads it repeats are marked
/// (`readStamp`), and the record of the reads that record does not hold (made at the first). And always the key
/// sets emptied by `recycle`, for the next records (a stack of `spareSets`, at most `SPARE_SETS_MAX`: a record's
/// sets are reused rather than left to the collector).
/// And the slots of `stamps` (`STAMPS`).
enum { LAST_READS = 1, FRESH_READS, SPARE_SETS, STAMPS, USER_VALUES = STAMPS };
#define SPARE_SETS_MAX 256

// MARK: Proxies live for one call
//
// A proxy is the same table every time its real table is reached (the caches keep it), so a script could keep
// one past the call that received it — in an upvalue, say — and read or write the state with it later: outside
// read tracking, and with an outcome that would depend on when the caches were last emptied (a proxy whose
// entry went is refused, one whose entry stayed is not), which differs between a live session and its replay.
// So every call (a transaction — an action, init's result, a migration — or a reader's run) has an `epoch`,
// each proxy is stamped with the epoch whenever it is handed out (`to_proxy`, `claim`), and the metamethods
// use only a proxy stamped in the running call: any other is refused, always, naming the script's line.

#define STAMPS_MIN 64         /* slots of the first set */
#define STAMPS_SHRINK 65536   /* a set at least this large is given back after a call that used an eighth of it */

/// The first slot for the proxy at `proxy` (Fibonacci hashing of its address).
static size_t stamp_slot(const void *proxy, size_t mask) {
    return (size_t)(((uint64_t)(uintptr_t)proxy * UINT64_C(0x9E3779B97F4A7C15)) >> 29) & mask;
}

/// [-0, +0, -] Whether the proxy at `proxy` was handed out in the running call. (A slot of another epoch ends
/// the probe: slots of this epoch are never more than half the set.)
static int stamped(const Barrier *b, const void *proxy) {
    if (b->stamps == NULL) return 0;
    for (size_t i = stamp_slot(proxy, b->stampMask);; i = (i + 1) & b->stampMask) {
        const StampSlot *slot = &b->stamps[i];
        if (slot->epoch != b->epoch) return 0;
        if (slot->proxy == proxy) return 1;
    }
}

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
static void stamp(lua_State *L, Barrier *b, const void *proxy) {
    size_t capacity = b->stamps == NULL ? 0 : b->stampMask + 1;
    if (2 * (b->stampLive + 1) > capacity) {
        resize_stamps(L, b, UPVALUE(CONTROL), capacity == 0 ? STAMPS_MIN : 2 * capacity);
    } else if (b->stampLive == 0 && capacity >= STAMPS_SHRINK && 8 * b->stampLast < capacity) {
        resize_stamps(L, b, UPVALUE(CONTROL), capacity / 4);
    }
    stamp_into(b, proxy);
}

/// [-0, +0, -] A call starts: no proxy handed out before is good in it.
static void next_call(Barrier *b) {
    b->stampLast = b->stampLive;
    b->stampLive = 0;
    b->epoch++;
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
/// the one-place rule (`state_runtime.lua`, "State is data") read those records.
static void to_proxy(lua_State *L, Barrier *b, int parent, int key) {
    lua_pushvalue(L, -1);
    if (lua_rawget(L, UPVALUE(PROXIES)) != LUA_TNIL) { /* made before */
        lua_remove(L, -2);
        stamp(L, b, lua_topointer(L, -1));
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
    stamp(L, b, lua_topointer(L, -1));
}

/// [-(top), +results, e] Calls the Lua fallback with the metamethod's `arguments` (the stack is cut to them
/// first) and leaves what it returns.
static int fall_back(lua_State *L, int fallback, int arguments, int results) {
    lua_settop(L, arguments);
    lua_pushvalue(L, fallback);
    lua_insert(L, 1);
    lua_call(L, arguments, results);
    return results;
}

/// [-0, +0, m] Appends (table, key, old value) at the given stack indices to the journal. May raise (memory)
/// before anything is recorded.
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

/// [-0, +0, -] Empties the journal's slots past the open transaction's, so what earlier transactions replaced
/// can be collected. Not needed for correctness (only the first `count` slots are ever read), so it is done at
/// flushes and rollbacks, not at every transaction. (Assigning nil to an existing slot never allocates.)
static void clear_journal_tail(lua_State *L, Barrier *b, int journal) {
    for (lua_Integer i = b->count + 1; i <= b->filled; i++) {
        lua_pushnil(L);
        lua_rawseti(L, journal, i);
    }
    b->filled = b->count;
}

/// [-0, +0, -] Empties the table at `t` (its slots kept, for refilling without rehashing).
static void empty_table(lua_State *L, int t) {
    lua_pushnil(L);
    while (lua_next(L, t) != 0) { /* clearing the current key is allowed while traversing */
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, t);
    }
}

/// [-0, +0, -] Drops the last transaction's journal (its slots are overwritten, not emptied) and opens a new one.
static void begin_transaction(Barrier *b) {
    next_call(b);
    b->count = 0;
    b->scalarWrites = 0;
    b->moved = 0;
    b->mode = MODE_WRITE;
}

// MARK: The metamethods

/// [-0, +0, -] Replaces a float key at 2 that has an integer's value with that integer, as a table keeps it
/// (`t[1.0]` is `t[1]`), so that the journal, the records of where tables are and the paths of changes name
/// the key as the state holds it.
static void integral_key(lua_State *L) {
    if (lua_isinteger(L, 2)) return;
    int exact = 0;
    lua_Integer integer = lua_tointegerx(L, 2, &exact);
    if (!exact) return;
    lua_pushinteger(L, integer);
    lua_replace(L, 2);
}

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

/// [-0, +1, m] The set of keys of the table at `real` in the record at `record` (of reads, or the change set),
/// made (from the spare sets, or new) when the record has none.
static void push_key_set(lua_State *L, Barrier *b, int record, int real) {
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
static void note_read(lua_State *L, Barrier *b, int real, int key) {
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
    push_key_set(L, b, lua_gettop(L), real); /* fresh, keys */
    lua_pushvalue(L, key);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pushvalue(L, key);
        lua_pushboolean(L, 1);
        lua_rawset(L, -4);
        b->freshReads++;
    }
    lua_pop(L, 3);
}

/// `__index(proxy, key)` [-2, +1, e] while writing, or while a reader runs (the read is noted): the real
/// table's value, a table as its proxy.
static int barrier_index(lua_State *L) {
    Barrier *b = barrier(L);
    int keyType = lua_type(L, 2);
    if (keyType == LUA_TNUMBER) integral_key(L);
    // (Lua calls a metamethod with exactly its arguments; anything else is handed over.)
    if (b->mode == MODE_CLOSED || lua_gettop(L) != 2 || keyType == LUA_TTABLE) {
        return fall_back(L, UPVALUE(INDEX_FALLBACK), 2, 1);
    }
    lua_pushvalue(L, 1);
    if (lua_rawget(L, UPVALUE(TARGETS)) != LUA_TTABLE || !stamped(b, lua_topointer(L, 1))) { /* 3: real */
        return fall_back(L, UPVALUE(INDEX_FALLBACK), 2, 1);
    }
    if (b->mode == MODE_READ) {
        note_read(L, b, 3, 2);
        lua_pushvalue(L, 2);
        if (lua_rawget(L, 3) == LUA_TTABLE) to_proxy(L, b, 3, 2); /* 4: the value */
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
        to_proxy(L, b, 3, 2);
        if (b->journaling) learn_path(L, b, 3, 2, table);
    }
    return 1;
}

/// [-0, +0, -] The key at 2 as `noted` remembers it (`*remembered` 0 for a key it does not remember).
static NotedSlot noted_slot(lua_State *L, Barrier *b, int keyType, int *remembered) {
    NotedSlot slot = { lua_topointer(L, 4), NULL, 0, b->flushes };
    *remembered = 1;
    if (keyType == LUA_TSTRING) slot.key = lua_topointer(L, 2);
    else if (keyType == LUA_TNUMBER && lua_isinteger(L, 2)) slot.integer = lua_tointeger(L, 2);
    else *remembered = 0;
    return slot;
}

/// [-0, +0, -] Remembers that the change of `real[key]` (at 4 and 2) is recorded in the current change set.
static void remember_noted(lua_State *L, Barrier *b, int keyType) {
    int remembered;
    NotedSlot slot = noted_slot(L, b, keyType, &remembered);
    if (remembered) b->noted[b->notedNext++ % NOTED_SLOTS] = slot;
}

/// [-0, +0, -] Whether `noted` holds (the table at 4, the key at 2) for this flush.
static int seen_noted(lua_State *L, Barrier *b, int keyType) {
    int remembered;
    NotedSlot wanted = noted_slot(L, b, keyType, &remembered);
    if (!remembered) return 0;
    for (int i = 0; i < NOTED_SLOTS; i++) {
        const NotedSlot *slot = &b->noted[i];
        if (slot->at == wanted.at && slot->table == wanted.table && slot->key == wanted.key &&
            slot->integer == wanted.integer) {
            return 1;
        }
    }
    return 0;
}

/// [-0, +0, -] Whether the value at `index` is a string, a boolean or a finite number: data the fast path may
/// store. (Everything else — a table, nil, a function, NaN — is the Lua half's to store or refuse.)
static int is_plain_data(lua_State *L, int index) {
    switch (lua_type(L, index)) {
    case LUA_TSTRING:
    case LUA_TBOOLEAN:
        return 1;
    case LUA_TNUMBER:
        return lua_isinteger(L, index) || isfinite(lua_tonumber(L, index));
    default:
        return 0;
    }
}

/// [-0, +0, -] Whether storing the value at `b` where `a` is changes nothing: raw equality, and for numbers the
/// same subtype and, for a zero, the same sign (Lua stores `1.0` over `1`, and `-0.0` over `0.0`).
static int is_same(lua_State *L, int a, int b) {
    if (!lua_rawequal(L, a, b)) return 0;
    if (lua_type(L, a) != LUA_TNUMBER) return 1;
    if (lua_isinteger(L, a) != lua_isinteger(L, b)) return 0;
    if (lua_isinteger(L, a)) return 1;
    lua_Number x = lua_tonumber(L, a), y = lua_tonumber(L, b);
    return x != 0 || signbit(x) == signbit(y);
}

/// [-0, +0, m] Notes that the key at `key` of the table at `real` changed (`structural`: a key appeared or went
/// away), for the readers that depend on it (`dependents[real]`, at `byKey`): only tables some reader read get
/// here, so a write to a table nobody reads costs the journal alone. Adds it to the change set, and says whether
/// a reader read it (`observed`: a run with a flush function calls it after this action) and whether the
/// subscriptions must run again. A write later rolled back may make a reader run once for nothing (its result
/// compares equal and is not delivered). Indices are absolute; `WRITE_UPVALUES`.
static void note_change(lua_State *L, Barrier *b, int real, int byKey, int key, int structural) {
    int top = lua_gettop(L);
    luaL_checkstack(L, 6, NULL);
    lua_rawgeti(L, UPVALUE(WRITE_CHANGES), 1); /* the change set */
    push_key_set(L, b, top + 1, real);
    lua_pushvalue(L, key);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    if (structural) {
        lua_pushvalue(L, UPVALUE(WRITE_STRUCTURE));
        lua_pushboolean(L, 1);
        lua_rawset(L, -3);
    }
    lua_settop(L, top);
    // Its readers: of the key, of all of the table, and (structural) of its keys.
    int readers[3] = { key, UPVALUE(WRITE_ALL), UPVALUE(WRITE_STRUCTURE) };
    for (int i = 0; i < (structural ? 3 : 2); i++) {
        lua_pushvalue(L, readers[i]);
        if (lua_rawget(L, byKey) == LUA_TTABLE) {
            lua_pushnil(L);
            if (lua_next(L, -2) != 0) {
                b->observed = 1;
                lua_pop(L, 2);
            }
            if (!b->subscriptionsDirty) {
                lua_pushvalue(L, UPVALUE(WRITE_SUBSCRIPTIONS));
                if (lua_rawget(L, -2) != LUA_TNIL) b->subscriptionsDirty = 1;
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    }
}


/// `__newindex(proxy, key, value)` [-3, +0, e] while writing, for a key that stays (neither the old nor the new
/// value is nil) and values that are plain data (strings, booleans, finite numbers): journaled, written,
/// recorded for the readers of that table. (A key that stays was accepted as data when it appeared.)
static int barrier_newindex(lua_State *L) {
    Barrier *b = barrier(L);
    int keyType = lua_type(L, 2);
    if (keyType == LUA_TNUMBER) integral_key(L);
    if (b->mode != MODE_WRITE || lua_gettop(L) != 3 || keyType == LUA_TTABLE || keyType == LUA_TNIL || !is_plain_data(L, 3)) {
        return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
    }
    lua_pushvalue(L, 1);
    if (lua_rawget(L, UPVALUE(TARGETS)) != LUA_TTABLE || !stamped(b, lua_topointer(L, 1))) { /* 4: real */
        return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
    }
    lua_pushvalue(L, 2);
    int oldType = lua_rawget(L, 4); /* 5: the old value (taken by the journal below) */
    // (A NaN key never gets past this: no table holds a value under NaN, so its old value is nil.)
    if (oldType == LUA_TNIL || oldType == LUA_TTABLE) return fall_back(L, UPVALUE(WRITE_FALLBACK), 3, 0);
    if (is_same(L, 5, 3)) return 0;
    // While journaling, the write is kept as it is on the stack too, when every write of the transaction so far
    // was (`ScalarWrite`).
    ScalarWrite write;
    int keep = b->journaling && b->scalarWrites < SCALAR_WRITES && 3 * b->scalarWrites == b->count;
    if (keep) {
        write.table = lua_topointer(L, 4);
        clua_scalar_read(L, 2, 1, &write.key);
        clua_scalar_read(L, 5, 0, &write.before);
        clua_scalar_read(L, 3, 0, &write.after);
    }
    // Journaled first: growing the journal may raise, and then nothing has changed yet. (The old value is on
    // top, where the journal takes it from; its slots are filled last to first.)
    if (b->count + 3 > b->filled) b->filled = b->count + 3;
    lua_rawseti(L, UPVALUE(WRITE_JOURNAL), b->count + 3);
    lua_pushvalue(L, 2);
    lua_rawseti(L, UPVALUE(WRITE_JOURNAL), b->count + 2);
    lua_pushvalue(L, 4);
    lua_rawseti(L, UPVALUE(WRITE_JOURNAL), b->count + 1);
    b->count += 3;
    if (keep) b->writes[b->scalarWrites++] = write;
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_rawset(L, 4); /* the key exists: no allocation, no error */
    // Often the change is recorded already (the same field written since the last flush) and the
    // subscriptions are stale anyway: then there is nothing to add. The fields seen lately are known without a
    // lookup.
    if (b->subscriptionsDirty && seen_noted(L, b, keyType)) return 0;
    lua_pushvalue(L, 4);
    if (lua_rawget(L, UPVALUE(WRITE_DEPENDENTS)) == LUA_TNIL) return 0; /* 5: who reads this table */
    if (b->subscriptionsDirty && lua_rawgeti(L, UPVALUE(WRITE_CHANGES), 1) == LUA_TTABLE) {
        lua_pushvalue(L, 4);
        if (lua_rawget(L, -2) == LUA_TTABLE) {
            lua_pushvalue(L, 2);
            if (lua_rawget(L, -2) != LUA_TNIL) {
                remember_noted(L, b, keyType);
                return 0;
            }
        }
    }
    lua_settop(L, 5);
    note_change(L, b, 4, 5, 2, 0);
    remember_noted(L, b, keyType);
    return 0;
}

/// `notechange(real, byKey, key, structural)` [-4, +0, m]: `note_change`, for the writes the Lua side makes.
static int barrier_note_change(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 4);
    note_change(L, barrier(L), 1, 2, 3, lua_toboolean(L, 4));
    return 0;
}

// MARK: Reading what an action changed

/// Journals longer than this many writes are read by the Lua `collect` (hash tables); shorter ones here, by
/// scanning (no allocation).
#define COLLECT_IN_C_WRITES 16

/// [-0, +0, -] The journal position (1, 4, 7, …) of the first write to (table at `t`, key at `k`) among the
/// first `count` slots, or 0. Uses one stack slot.
static lua_Integer first_write(lua_State *L, lua_Integer count, int t, int k) {
    for (lua_Integer j = 1; j <= count; j += 3) {
        int same = 0;
        if (lua_rawgeti(L, UPVALUE(RUN_JOURNAL), j) == LUA_TTABLE && lua_rawequal(L, -1, t)) {
            lua_pop(L, 1);
            lua_rawgeti(L, UPVALUE(RUN_JOURNAL), j + 1);
            same = lua_rawequal(L, -1, k);
        }
        lua_pop(L, 1);
        if (same) return j;
    }
    return 0;
}

/// [-0, +0, -] Whether the journaled write at `position` stored something else than what it found: its table
/// holds the value at `now`.
static int changed_at(lua_State *L, lua_Integer position, int now) {
    lua_rawgeti(L, UPVALUE(RUN_JOURNAL), position + 2);
    int changed = !is_same(L, -1, now);
    lua_pop(L, 1);
    return changed;
}

/// [-0, +(2|0), -] Pushes where the table at `t` is — its parent and its key, from the records `to_proxy`
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
/// carries it (a table stored whole) — the Lua `collect`'s rules (`state_runtime.lua`, "The journal, read"),
/// done here for short journals. Returns the number of changes, or -1 (what it wrote is to be dropped) when a
/// key or value cannot be written as JSON exactly.
static lua_Integer write_changes(lua_State *L, Barrier *b, CLuaJSON *o) {
    lua_Integer count = b->count;
    int base = lua_gettop(L);
    lua_Integer changes = 0;
    clua_json_byte(o, '[');
    for (lua_Integer i = 1; i <= count; i += 3) {
        lua_settop(L, base);
        lua_rawgeti(L, UPVALUE(RUN_JOURNAL), i);     /* base+1: the table */
        lua_rawgeti(L, UPVALUE(RUN_JOURNAL), i + 1); /* base+2: the key */
        if (first_write(L, i - 1, base + 1, base + 2) != 0) continue;
        lua_pushvalue(L, base + 2);
        lua_rawget(L, base + 1);                     /* base+3: the value now */
        lua_rawgeti(L, UPVALUE(RUN_JOURNAL), i + 2); /* base+4: the value before */
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
                lua_Integer written = first_write(L, count, lua_gettop(L) - 1, lua_gettop(L));
                if (written != 0 && changed_at(L, written, current)) { reportable = 0; break; } /* a change further up carries it */
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
                lua_Integer written = first_write(L, count, lua_gettop(L), lua_gettop(L) - 1);
                lua_pop(L, 2);
                if (written != 0 && changed_at(L, written, current)) reportable = 0;
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
/// (at most `PATH_BYTES` bytes; `*length` set), from the cache or by walking up the records `to_proxy` keeps
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
    for (lua_Integer i = 1; i <= count; i += 3) {
        lua_settop(L, root);
        lua_rawgeti(L, UPVALUE(RUN_JOURNAL), i);     /* root+1: the table */
        if (lua_rawequal(L, root + 1, UPVALUE(RUN_HOLDER))) return lua_settop(L, base), -2; /* the state replaced */
        lua_rawgeti(L, UPVALUE(RUN_JOURNAL), i + 1); /* root+2: the key */
        lua_pushvalue(L, root + 2);
        lua_rawget(L, root + 1);                     /* root+3: the value now */
        lua_rawgeti(L, UPVALUE(RUN_JOURNAL), i + 2); /* root+4: the value before */
        if (lua_type(L, root + 3) == LUA_TTABLE || lua_type(L, root + 4) == LUA_TTABLE) return lua_settop(L, base), -2;
        if (first_write(L, i - 1, root + 1, root + 2) != 0 || is_same(L, root + 3, root + 4)) continue;
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
            lua_rawgeti(L, UPVALUE(RUN_JOURNAL), 3 * i + 1); /* the table */
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
/// `collect` told to keep only that (`state_runtime.lua`, "History").
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
/// out here too and emptied, unless it holds something JSON cannot (then the host reads that list:
/// `state_runtime.lua`, "The journal, read").
static void record_changes(lua_State *L, Barrier *b, lua_Integer position) {
    if (b->count == 0 && !b->history) return;
    CLuaJSON o;
    if (b->count <= 3 * COLLECT_IN_C_WRITES) {
        clua_json_open(L, &o, UPVALUE(RUN_ENCODED), (size_t)b->encoded);
        size_t header = o.length;
        clua_json_reserve(&o, 3 * sizeof(uint32_t));
        o.length += 3 * sizeof(uint32_t);
        size_t body = o.length;
        lua_Integer changes = 3 * b->scalarWrites == b->count ? write_scalar_changes(L, b, &o)
                                                               : write_changes_unmoved(L, b, &o);
        if (changes == -2) { /* something moved: the full rules, and no cached path is to be trusted */
            b->pathGeneration++;
            o.length = body;
            changes = write_changes(L, b, &o);
        }
        if (changes == 0) { /* b->encoded stays: no record */
            if (b->history) keep_history(L, position);
            return;
        }
        if (changes > 0 && o.length - header - 3 * sizeof(uint32_t) < NOT_WRITTEN) {
            uint32_t fields[3] = { (uint32_t)position, (uint32_t)changes, (uint32_t)(o.length - header - 3 * sizeof(uint32_t)) };
            memcpy(o.bytes + header, fields, sizeof fields);
            b->encoded = (lua_Integer)o.length;
            if (b->history) keep_history(L, position);
            return;
        }
    }
    b->pathGeneration++; /* (the Lua `collect` does not tell what moved) */
    lua_Integer start = b->collected;
    lua_pushvalue(L, UPVALUE(RUN_COLLECT));
    lua_pushinteger(L, position);
    lua_call(L, 1, 0);
    if (b->collected <= start) return; /* nothing changed */
    clua_json_open(L, &o, UPVALUE(RUN_ENCODED), (size_t)b->encoded);
    size_t header = o.length;
    clua_json_reserve(&o, 3 * sizeof(uint32_t));
    o.length += 3 * sizeof(uint32_t);
    lua_rawgeti(L, UPVALUE(RUN_COLLECTED), start + 2);
    lua_Integer changes = lua_tointeger(L, -1), cursor = start + 3;
    lua_pop(L, 1);
    uint32_t length = NOT_WRITTEN;
    if (clua_json_changes(&o, UPVALUE(RUN_COLLECTED), &cursor, changes) && o.length - header - 3 * sizeof(uint32_t) < NOT_WRITTEN) {
        length = (uint32_t)(o.length - header - 3 * sizeof(uint32_t));
        for (lua_Integer j = start + 1; j <= b->collected; j++) { /* written out: the list need not keep it */
            lua_pushnil(L);
            lua_rawseti(L, UPVALUE(RUN_COLLECTED), j);
        }
        b->collected = start;
    } else {
        o.length = header + 3 * sizeof(uint32_t);
    }
    uint32_t fields[3] = { (uint32_t)position, (uint32_t)changes, length };
    memcpy(o.bytes + header, fields, sizeof fields);
    b->encoded = (lua_Integer)o.length;
}

// MARK: Runs of actions

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
static int barrier_run(lua_State *L) {
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
    to_proxy(L, b, 0, 0);
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
        stamp(L, b, lua_topointer(L, 6)); /* the state's proxy, handed to this action's call */
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
            to_proxy(L, b, 0, 0);
            lua_replace(L, 6);
        }
        if (b->moved) {
            b->moved = 0;
            lua_pushvalue(L, UPVALUE(RUN_SETTLE));
            lua_call(L, 0, 0);
        }
        b->mode = MODE_CLOSED;
        if (b->journaling) record_changes(L, b, i);
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

// MARK: The functions: the Lua side's view of the barrier's state

/// `proxy(real)` [-1, +1, e]: the proxy of a real table, made now if it has none (the Lua side records where
/// the table is).
static int barrier_proxy(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    to_proxy(L, barrier(L), 0, 0);
    return 1;
}

/// `fresh(proxy)` [-1, +1, -]: whether the proxy was handed out in the running call (the Lua halves of the
/// metamethods refuse any other).
static int barrier_fresh(lua_State *L) {
    lua_pushboolean(L, stamped(barrier(L), lua_topointer(L, 1)));
    return 1;
}

/// `claim(t)` [-1, +1, m]: makes a table a script is storing in the state the state's own. What `t` holds moves
/// to a new table, which is returned (the real table, which the state will hold), and `t`, now empty, becomes
/// its proxy: the script's `t` and what it reads from the state stay the same table, its later writes to it are
/// journaled, and after the call it is refused like any proxy kept too long — no script ever holds a table of
/// the state itself. (The Lua side checked that `t` is data; a table inside it is claimed by its own call.)
static int barrier_claim(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_createtable(L, (int)lua_rawlen(L, 1), 0); /* 2: the real table */
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
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 1);
    lua_rawset(L, UPVALUE(PROXIES)); /* proxies[real] = t */
    count_made(L, b);
    stamp(L, b, lua_topointer(L, 1));
    return 1;
}

/// `count()` [-0, +1, -]: journal slots the open (or last) transaction filled: its writes are the triples at
/// 1..count (the Lua side reads them to tell what the transaction changed).
static int barrier_count(lua_State *L) {
    lua_pushinteger(L, barrier(L)->count);
    return 1;
}

/// `made([n])` [-(0|1), +1, e]: proxies made since `made(0)` (which the Lua side calls when it empties the caches).
static int barrier_made(lua_State *L) {
    Barrier *b = barrier(L);
    if (lua_gettop(L) >= 1) {
        b->made = luaL_checkinteger(L, 1);
        b->pathGeneration++;
    }
    lua_pushinteger(L, b->made);
    return 1;
}

/// `begin()` [-0, +0, -]: drops the last transaction's journal and opens one (writing).
static int barrier_begin(lua_State *L) {
    begin_transaction(barrier(L));
    barrier(L)->pathGeneration++; /* the Lua side's transactions may move tables */
    return 0;
}

/// `record(table, key, old)` [-3, +0, m]: journals a write the Lua side makes itself.
static int barrier_record(lua_State *L) {
    lua_settop(L, 3);
    journal_append(L, barrier(L), UPVALUE(JOURNAL), 1, 2, 3);
    return 0;
}

/// `rollback()` [-0, +0, -]: undoes the open or last transaction, newest write first, and closes it. (Each
/// write restores a key that existed when it was journaled: no allocation.)
static int barrier_rollback(lua_State *L) {
    Barrier *b = barrier(L);
    for (lua_Integer i = b->count - 2; i >= 1; i -= 3) {
        lua_rawgeti(L, UPVALUE(JOURNAL), i);
        lua_rawgeti(L, UPVALUE(JOURNAL), i + 1);
        lua_rawgeti(L, UPVALUE(JOURNAL), i + 2);
        if (lua_type(L, -3) == LUA_TTABLE && !lua_isnil(L, -2)) lua_rawset(L, -3);
        lua_settop(L, 0);
    }
    b->count = 0;
    b->scalarWrites = 0;
    clear_journal_tail(L, b, UPVALUE(JOURNAL));
    b->mode = MODE_CLOSED;
    b->pathGeneration++;
    return 0;
}

/// `mode()` [-0, +1, -]: `B.CLOSED`, `B.WRITE` or `B.READ`.
static int barrier_mode(lua_State *L) {
    lua_pushinteger(L, barrier(L)->mode);
    return 1;
}

/// `setmode(mode [, last])` [-(1|2), +0, e]: with `B.READ`, a reader starts, `last` the record of what it read
/// last time (real table -> set of keys; none for its first run): its reads are noted (`note_read`) until
/// `endread`. Leaving READ mode otherwise (a reader that failed) drops what was noted.
static int barrier_set_mode(lua_State *L) {
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
static int barrier_end_read(lua_State *L) {
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
                            push_key_set(L, b, 2, 3);
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
/// its structure, all of it; see `note_read`); nothing when no reader runs.
static int barrier_note(lua_State *L) {
    lua_settop(L, 2);
    note_read(L, barrier(L), 1, 2);
    return 0;
}

/// `recycle(record [, id])` [-(1|2), +0, -]: empties a read record that is not kept, its key sets kept for the
/// next records (the shared set of what every reader reads of `holder` excepted); with `id`, the reader whose
/// entries in the index of readers (`dependents`) the record's reads were: they are removed.
static int barrier_recycle(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 2);
    int withID = !lua_isnil(L, 2);
    luaL_checkstack(L, 8, NULL);
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

/// `setjournaling(flag, history)` [-2, +0, -]: whether `run` reads each action's changes, and whether the
/// Lua `collect` must do it (it also keeps history entries).
static int barrier_set_journaling(lua_State *L) {
    barrier(L)->journaling = lua_toboolean(L, 1);
    barrier(L)->pathGeneration++; /* runs did not keep the cached paths up to date while it was off */
    barrier(L)->history = lua_toboolean(L, 2);
    return 0;
}

/// `collectedcount([n])` [-(0|1), +1, e]: the length of the list of changes read (set with `n`).
static int barrier_collected_count(lua_State *L) {
    Barrier *b = barrier(L);
    if (lua_gettop(L) >= 1) b->collected = luaL_checkinteger(L, 1);
    lua_pushinteger(L, b->collected);
    return 1;
}

/// `records()` [-0, +2, -]: the journal records of the last run (`record_changes`): the buffer (a userdata, or
/// nil) and the length of what it holds; empties them. (Read in place by the host: no string is made.)
static int barrier_records(lua_State *L) {
    Barrier *b = barrier(L);
    lua_Integer length = b->encoded;
    if (lua_rawgeti(L, UPVALUE(RECORDS), 1) != LUA_TUSERDATA || (size_t)length > lua_rawlen(L, -1)) length = 0;
    lua_pushinteger(L, length);
    b->encoded = 0;
    return 2;
}

/// `setmoved()` [-0, +0, -]: the open transaction moved a table; `run` calls `settle` before it commits.
static int barrier_set_moved(lua_State *L) {
    barrier(L)->moved = 1;
    return 0;
}

/// `dirty()` [-0, +1, -]: whether the subscriptions are stale.
static int barrier_dirty(lua_State *L) {
    lua_pushboolean(L, barrier(L)->subscriptionsDirty);
    return 1;
}

/// `setdirty(flag)` [-1, +0, -].
static int barrier_set_dirty(lua_State *L) {
    barrier(L)->subscriptionsDirty = lua_toboolean(L, 1);
    return 0;
}

/// `clear(t, …)` [-n, +0, -]: empties the tables given (their slots kept, for refilling without rehashing), as a
/// loop of `t[k] = nil` over `next` would, without running the loop in Lua (the proxy caches are emptied every
/// few hundred proxies made).
static int barrier_clear(lua_State *L) {
    int count = lua_gettop(L);
    for (int t = 1; t <= count; t++) {
        if (lua_type(L, t) == LUA_TTABLE) empty_table(L, t);
    }
    return 0;
}

/// `emptysets(map, spares, count, limit)` [-4, +1, m]: empties `map` (anything -> a set of keys) and keeps up to
/// `limit` of its emptied sets in `spares`, which holds `count`; returns how many it holds now. (Reused sets
/// spare the collector a table per use; the change set is emptied after every flush.)
static int barrier_empty_sets(lua_State *L) {
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
    clear_journal_tail(L, b, UPVALUE(JOURNAL));
}

/// `takechanges(changes, dependents, all, isDue, due, count)` [-6, +1, m]: hands the change set over, in one
/// walk: marks due, once each, every reader of what it names — `dependents[real][key]` for each changed key of a
/// table, and `dependents[real][all]`, the readers of all of it — as `isDue[id] = true` appended to `due`, which
/// holds `count`; empties it, its key sets kept for the next changes and reads (the spare sets); and starts
/// afresh (`start_afresh`). Returns how many readers `due` holds now.
static int barrier_take_changes(lua_State *L) {
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
static int barrier_observed(lua_State *L) {
    barrier(L)->observed = 1;
    return 0;
}

/// `flushed()` [-0, +0, -]: the change set was handed over and starts afresh; the journal keeps only what the
/// last transaction needs to be undone.
static int barrier_flushed(lua_State *L) {
    start_afresh(L, barrier(L));
    return 0;
}

/// `isflat(value)` [-1, +1, -]: whether `value` is a table that is not a proxy and holds no table, as a key or
/// a value — a reader's result with no state inside to depend on and no proxy to strip (most props).
static int barrier_is_flat(lua_State *L) {
    lua_settop(L, 1);
    int flat = lua_type(L, 1) == LUA_TTABLE;
    if (flat) {
        lua_pushvalue(L, 1);
        flat = lua_rawget(L, UPVALUE(TARGETS)) == LUA_TNIL;
        lua_pop(L, 1);
    }
    if (flat) {
        lua_pushnil(L);
        while (lua_next(L, 1) != 0) {
            int table = lua_type(L, -1) == LUA_TTABLE || lua_type(L, -2) == LUA_TTABLE;
            lua_pop(L, table ? 2 : 1);
            if (table) {
                flat = 0;
                break;
            }
        }
    }
    lua_pushboolean(L, flat);
    return 1;
}

/// `position()` [-0, +1, -]: the action of the last run that was being reduced.
static int barrier_position(lua_State *L) {
    lua_pushinteger(L, barrier(L)->position);
    return 1;
}

// MARK: makebarrier

/// What `makebarrier` puts in one upvalue slot (an entry of the lists above).
typedef struct Upvalue {
    int kind;
    const char *text;
} Upvalue;

#define UPVALUE_DESCRIPTION(name, kind, text) { kind, text },
static const Upvalue sharedUpvalues[] = { SHARED_UPVALUES(UPVALUE_DESCRIPTION) };
static const Upvalue indexUpvalues[] = { INDEX_UPVALUES(UPVALUE_DESCRIPTION) };
static const Upvalue writeUpvalues[] = { WRITE_UPVALUES(UPVALUE_DESCRIPTION) };
static const Upvalue runUpvalues[] = { RUN_UPVALUES(UPVALUE_DESCRIPTION) };
static const Upvalue journalUpvalues[] = { JOURNAL_UPVALUES(UPVALUE_DESCRIPTION) };
static const Upvalue recordsUpvalues[] = { RECORDS_UPVALUES(UPVALUE_DESCRIPTION) };
static const Upvalue readerUpvalues[] = { READER_UPVALUES(UPVALUE_DESCRIPTION) };
#undef UPVALUE_DESCRIPTION

#define COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

/// [-0, +count, e] Pushes the upvalues `list` describes, from the fields of the table at 1 (which must be
/// tables when `tables`).
static void push_upvalues(lua_State *L, const Upvalue *list, int count, int tables) {
    for (int i = 0; i < count; i++) {
        switch (list[i].kind) {
        case FIELD: {
            int type = lua_getfield(L, 1, list[i].text);
            if (type == LUA_TNIL || (tables && type != LUA_TTABLE)) luaL_error(L, "makebarrier: %s is missing", list[i].text);
            break;
        }
        case LITERAL:
            lua_pushstring(L, list[i].text);
            break;
        default:
            lua_pushnil(L);
        }
    }
}

/// [-0, +1, e] Pushes a closure of `function` over the barrier (at `control`), the shared upvalues and its own.
static void push_closure(lua_State *L, int control, lua_CFunction function, const Upvalue *own, int count) {
    lua_pushvalue(L, control);
    push_upvalues(L, sharedUpvalues, COUNT(sharedUpvalues), 1);
    push_upvalues(L, own, count, 0);
    lua_pushcclosure(L, function, 1 + COUNT(sharedUpvalues) + count);
}

/// `makebarrier{…}` [-1, +1, e]. The table gives the shared fields (`targets`, `proxies`, `meta`, `weakkeys`,
/// `weakall`, `parents`, `parentkeys`), each function's own (the lists above), and optionally `control`, the barrier whose state a new
/// set of functions keeps (when the Lua side replaces its caches). Returns the functions (`index`, `newindex`,
/// `run`, and those of "The functions"), `control`, and the modes (`CLOSED`, `WRITE`, `READ`).
static int clua_make_barrier(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    if (lua_getfield(L, 1, "control") == LUA_TUSERDATA) {
        if (lua_rawlen(L, 2) != sizeof(Barrier)) return luaL_error(L, "makebarrier: control is not a barrier's");
    } else {
        lua_pop(L, 1);
        Barrier *b = (Barrier *)lua_newuserdatauv(L, sizeof(Barrier), USER_VALUES);
        memset(b, 0, sizeof *b);
        lua_newtable(L);
        lua_setiuservalue(L, -2, SPARE_SETS);
        b->mode = MODE_CLOSED;
        b->pathGeneration = 1;
        b->epoch = 1; /* (slots never used hold epoch 0) */
        for (int i = 0; i < NOTED_SLOTS; i++) b->noted[i].at = -1;
        b->subscriptionsDirty = 1;
    }
    int control = 2;
    ((Barrier *)lua_touserdata(L, control))->pathGeneration++; /* new caches: records start afresh */
    lua_createtable(L, 0, 20); /* 3: the functions */
    lua_pushvalue(L, control);
    lua_setfield(L, 3, "control");
#define BARRIER_MODE_FIELD(name, number) \
    lua_pushinteger(L, MODE_##name);     \
    lua_setfield(L, 3, #name);
    BARRIER_MODES(BARRIER_MODE_FIELD)
#undef BARRIER_MODE_FIELD

    static const struct {
        const char *name;
        lua_CFunction function;
        const Upvalue *upvalues;
        int count;
    } functions[] = {
        { "index", barrier_index, indexUpvalues, COUNT(indexUpvalues) },
        { "newindex", barrier_newindex, writeUpvalues, COUNT(writeUpvalues) },
        { "run", barrier_run, runUpvalues, COUNT(runUpvalues) },
        { "begin", barrier_begin, NULL, 0 },
        { "record", barrier_record, journalUpvalues, COUNT(journalUpvalues) },
        { "rollback", barrier_rollback, journalUpvalues, COUNT(journalUpvalues) },
        { "flushed", barrier_flushed, journalUpvalues, COUNT(journalUpvalues) },
        { "mode", barrier_mode, NULL, 0 },
        { "setmode", barrier_set_mode, NULL, 0 },
        { "dirty", barrier_dirty, NULL, 0 },
        { "setdirty", barrier_set_dirty, NULL, 0 },
        { "observed", barrier_observed, NULL, 0 },
        { "position", barrier_position, NULL, 0 },
        { "proxy", barrier_proxy, NULL, 0 },
        { "fresh", barrier_fresh, NULL, 0 },
        { "claim", barrier_claim, NULL, 0 },
        { "made", barrier_made, NULL, 0 },
        { "count", barrier_count, NULL, 0 },
        { "setmoved", barrier_set_moved, NULL, 0 },
        { "setjournaling", barrier_set_journaling, NULL, 0 },
        { "collectedcount", barrier_collected_count, NULL, 0 },
        { "records", barrier_records, recordsUpvalues, COUNT(recordsUpvalues) },
        { "clear", barrier_clear, NULL, 0 },
        { "emptysets", barrier_empty_sets, NULL, 0 },
        { "takechanges", barrier_take_changes, journalUpvalues, COUNT(journalUpvalues) },
        { "notechange", barrier_note_change, writeUpvalues, COUNT(writeUpvalues) },
        { "isflat", barrier_is_flat, NULL, 0 },
        { "note", barrier_note, NULL, 0 },
        { "recycle", barrier_recycle, readerUpvalues, COUNT(readerUpvalues) },
        { "endread", barrier_end_read, readerUpvalues, COUNT(readerUpvalues) },
    };
    for (int i = 0; i < COUNT(functions); i++) {
        push_closure(L, control, functions[i].function, functions[i].upvalues, functions[i].count);
        lua_setfield(L, 3, functions[i].name);
    }
    return 1;
}

// MARK: The library

static const luaL_Reg state_library[] = {
    { "makebarrier", clua_make_barrier },
    { NULL, NULL },
};

const void *clua_state_library(void) { return state_library; }
