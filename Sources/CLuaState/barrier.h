// The barrier's shared parts, for the files that make it up (`barrier.c` makes it, `makebarrier` and the
// library; its contract is docs/design.md, "The write barrier"): its state (`Barrier`), the upvalue layouts of its functions, the helpers every part uses, and each
// part's functions. Internal to CLuaState (not in `include/`). The parts, each with its own prefix:
//
//   proxies.c   `proxies_`  the proxies scripts receive: made and cached, stamped with the call they were handed
//                           out in, `__index` through them, and where each table of the state is
//   journal.c   `journal_`  transactions: the undo journal, `__newindex`, rollback, the readers a change makes due
//   reads.c     `reads_`    readers: what each read, the readers due handed over at a flush, the spare key sets
//   changes.c   `changes_`  what a committed action changed, written as a recording's JSON (`json.c`)
//   moves.c     `moves_`    the tables a transaction moved, and the places they left, for the check at commit
//   runs.c      `runs_`     the loop over a run of actions
#ifndef CLUA_BARRIER_H
#define CLUA_BARRIER_H

#include "clua_state_layouts.h"
#include "json.h"

#include <math.h>

/// A function one part defines and another calls: not exported from the library.
#define BARRIER_INTERNAL __attribute__((visibility("hidden")))

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

/// A reader's record: its positions are declared once, as `CLUA_READER_SLOTS` (clua_state_layouts.h).
#define READER_SLOTS(X) CLUA_READER_SLOTS(X)

enum {
#define READER_SLOT_ENUM(name, number) READER_##name = number,
    READER_SLOTS(READER_SLOT_ENUM)
#undef READER_SLOT_ENUM
};

/// Paths, cached (for the journal's records): where a table of the state is, as the JSON of its path's keys
/// (`"items",7`), for the tables changes were last written in. A slot is good while `generation` is the
/// barrier's: it moves on whenever a table may have moved — a transaction that stored or removed a table, one
/// the Lua side runs (`begin`), a rollback, the caches renewed (`renew`: also after time travel) — so a stale
/// path is never used; and a table is only freed after it left the state, which moves it on too.
#define PATH_SLOTS 256
#define PATH_PREFIX_MAX 52
typedef struct PathSlot {
    const void *table;
    uint32_t generation;
    uint32_t length;
    unsigned char prefix[PATH_PREFIX_MAX];
} PathSlot;

/// Changes `__newindex` noted since the last flush (their readers marked due), by the identity of the table and
/// of the key — a string's address, or an integer's value (other keys are not remembered): a write to one of them
/// has nothing to add (its readers are due, `observed` and `subscriptionsDirty` were set as it says), as long as
/// no reader changed what it depends on and `subscriptionsDirty` was not cleared (`reads` is the barrier's
/// `readsGeneration`); a flush makes every slot stale (`at` is the barrier's `flushes`). Safe as addresses: a
/// table or a key string freed since, whose address a new one took, is one no reader has read since the slot
/// was written — a reader that reads anything new moves `readsGeneration` on — so a write to the newcomer
/// has no reader to mark (a key string stays alive while a reader's record holds it; a new key is noted by the
/// Lua side as it appears).
#define NOTED_SLOTS 8
typedef struct NotedSlot {
    const void *table;
    const void *key;     /* a string key; NULL for an integer key */
    lua_Integer integer; /* an integer key */
    lua_Integer at;
    uint32_t reads;
} NotedSlot;

/// The readers a scalar write marks due (`note_scalar_change`), by the place written — the identity of the table
/// and of the key, as `NotedSlot` has them — while no reader's record changed (`reads` is the barrier's
/// `readsGeneration`): those of the key and those of all of the table, at most `DUE_PLACE_IDS`, each an integer
/// id (the subscriptions reader, or any other id, leaves the place out). Unlike `noted` it outlives flushes: a
/// store whose every action is observed writes the same fields between two flushes, and finds their readers here
/// rather than in the index of readers. Safe as addresses, as `noted` is; and a reader marked for nothing runs once
/// and gives what it gave (its result compares equal and is not delivered).
#define DUE_PLACES 16
#define DUE_PLACE_IDS 4
typedef struct DuePlace {
    const void *table;
    const void *key;
    lua_Integer integer;
    uint32_t reads;
    int count;           /* -1: nothing known */
    lua_Integer ids[DUE_PLACE_IDS];
} DuePlace;

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

/// How many readers due are told apart by scanning their ids (`dueIDs`) before the set `IS_DUE` takes over.
#define DUE_SCANNED 8

typedef struct Barrier {
    lua_Integer mode;           /* MODE_CLOSED; MODE_WRITE (reduce, migrate); MODE_READ (props, selectors) */
    lua_Integer count;          /* journal slots the open (or last) transaction filled */
    lua_Integer stacked;        /* of those, the first ones, on `journalThread`'s stack (see `journal_push`) */
    lua_Integer filled;         /* slots of the journal's table that may hold something (from earlier
                                   transactions, or a copy `journalview` made) ... */
    lua_Integer filledFrom;     /* ... from this one on (the slots before it are empty; 0 reads as 1) */
    lua_State *journalThread;   /* the thread whose stack holds a transaction's first `JOURNAL_STACKED` slots
                                   (the control's `JOURNAL_THREAD`, which keeps it) */
    lua_Integer journalRoom;    /* the height up to which that thread's stack has room (`reserve_journal_room`) */
    lua_Integer position;       /* the action of a run being reduced */
    lua_Integer flushes;        /* how many times the readers due were handed over to a flush */
    lua_Integer due;            /* readers in the list of readers due (`DUE`) */
    int dueInSet;               /* the readers due are in the set `IS_DUE` too; otherwise (few, with integer ids,
                                   the common case) their ids are `dueIDs[0..<due]`, told apart by a scan */
    lua_Integer dueIDs[DUE_SCANNED];
    lua_Integer made;           /* proxies made since the caches were last renewed */
    lua_Integer flushed;        /* the outcomes in `flushed`'s lists (what the readers gave, in order) */
    lua_Integer flushedReader;  /* the reader each of them is from, when `flushedUniform` */
    int flushedUniform;         /* all of them are from one reader (an integer id), none failed, and the C appended
                                   each (`append_flushed`) */
    lua_Integer byKeys;         /* readers a flush ran by the keys they read (`run_by_keys`), ever */
    int subscriptionsDirty;     /* `subscriptions` must run again before its result is used */
    int observed;               /* since the last flush, a write changed something a reader read */
    int moved;                  /* the open transaction stored a table that was in the state already */
    int committed;              /* the journal holds a transaction that committed (the last action a run or a
                                   Lua-side transaction ended with), not one a failure left open: `rollback`
                                   undoes it only when asked to (`rollback(true)`) */
    lua_Integer movedCount;     /* the tables it moved, each once (`MOVED`: see moves.c) */
    lua_Integer leftCount;      /* the places they left, each once (`LEFT`) */
    int tablesLeftNoted;        /* `__newindex` told the Lua side (`shared.tablesLeft`) that the open transaction
                                   replaced a table */
    int journaling;             /* `run` reads each action's changes after it commits */
    int history;                /* ... and the Lua `collect` keeps history entries: it does the reading */
    lua_Integer collected;      /* the length of the list of changes read since it was last emptied */
    lua_Integer encoded;        /* the bytes of journal records written in the buffer since the last run began */
    uint32_t pathGeneration;    /* the paths cached under another generation are stale (see "Paths, cached") */
    uint32_t readsGeneration;   /* moves on when a reader's record changes or `subscriptionsDirty` is cleared */
    const void *root;           /* the state's root table, while `rootGeneration` is `pathGeneration` */
    uint32_t rootGeneration;
    int scalarWrites;           /* the open transaction's first writes kept in `writes`: all of them when
                                   3 * scalarWrites == count (none came from the Lua side) */
    int journalOnce;            /* the open transaction journals each (table, key) once: the set of those it
                                   journaled is the control's `JOURNALED` (see `journaled_already`) */
    lua_Integer spareSets;      /* emptied key sets kept for the next read records (`SPARE_SETS`) */
    lua_Integer readStamp;      /* the running reader's mark in its last record, for the reads it repeats */
    lua_Integer matchedReads;   /* reads of the running reader its last record holds (each counted once) */
    lua_Integer freshReads;     /* reads it does not (in `FRESH_READS`) */
    const void *lastReadTable;  /* the running reader's last noted read — the table, and a string key's address or */
    const void *lastReadKey;    /* an integer key — while `lastReadStamp` is `readStamp`: reading it again at once */
    lua_Integer lastReadInteger; /* (`state.count` twice in props) has nothing to add. Safe as addresses: the     */
    lua_Integer lastReadStamp;  /* reader's records hold both table and key until it ends. */
    uint64_t epoch;             /* the call running now (every transaction and every reader is a call of its own) */
    StampSlot *stamps;          /* the proxies handed out in this call, by address (open addressing; the memory
                                   is the control's `STAMPS` user value); NULL before the first */
    size_t stampMask;           /* the slots of `stamps`, less one (a power of two) */
    size_t stampLive;           /* slots holding a proxy of this call */
    size_t stampLast;           /* ... of the call before (for giving back the slots of a large one) */
    const void *lastProxy;      /* the proxy whose real table `__newindex` found last, in the call `lastEpoch`; */
    uint64_t lastEpoch;         /* the control's LAST_REAL holds that table (see `push_last_real`) */
    unsigned notedNext;         /* the slot of `noted` written next */
    NotedSlot noted[NOTED_SLOTS];
    DuePlace duePlaces[DUE_PLACES];
    ScalarWrite writes[SCALAR_WRITES];
    PathSlot paths[PATH_SLOTS];
    uint64_t *random;           /* `math.random`'s generator (the guard's `random`; NULL: not found) */
    uint64_t readerRandom[4];   /* its state as a reader began (`set_mode`): put back as the reader ends */
    uint64_t recordedRandom[4]; /* its state the run's records last told (`changes_record_random`) */
} Barrier;


/// The cache slot of the table at `address`.
static inline PathSlot *path_slot(Barrier *b, const void *address) {
    uintptr_t bits = (uintptr_t)address;
    return &b->paths[((bits >> 4) ^ (bits >> 12)) & (PATH_SLOTS - 1)];
}

/// The cached path of the table at `address`, or NULL when this generation has none.
static inline const PathSlot *cached_path(Barrier *b, const void *address) {
    const PathSlot *slot = path_slot(b, address);
    return slot->table == address && slot->generation == b->pathGeneration ? slot : NULL;
}

/// Whether the path of the table at `address` is known without walking up the records: the root's (empty),
/// while this generation knows the root, or a cached one. Sets `*prefix` and `*length`.
static inline int known_path(Barrier *b, const void *address, const unsigned char **prefix, size_t *length) {
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
static inline void keep_path(Barrier *b, const void *address, const unsigned char *prefix, size_t length) {
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
    X(PARENT_KEYS, FIELD, "parentkeys") /* real table -> the key it is held under */                  \
    X(DUE, FIELD, "due")            /* the readers due, in order (`b->due` of them): what a write marked */ \
    X(IS_DUE, FIELD, "isdue")       /* ... and the set of them, once `dueIDs` does not hold them */       \
    X(MOVED, FIELD, "moved")        /* the tables the open transaction moved: (table, old parent, old key) triples */ \
    X(MOVED_INDEX, FIELD, "movedindex") /* ... table -> its triple's number */                            \
    X(LEFT, FIELD, "left")          /* the places they left: (parent, key) pairs */                       \
    X(LEFT_SEEN, FIELD, "leftseen") /* ... parent -> set of keys */

/// `__index`'s own upvalues.
#define INDEX_UPVALUES(X) X(INDEX_FALLBACK, FIELD, "index") /* the Lua __index, for everything else */

/// `__newindex`'s own upvalues.
#define WRITE_UPVALUES(X)                                                                                  \
    X(WRITE_JOURNAL, FIELD, "journal")       /* (table, key, old value) triples */                        \
    X(WRITE_DEPENDENTS, FIELD, "dependents") /* real table -> key -> readers */                            \
    X(WRITE_FALLBACK, FIELD, "newindex")     /* the Lua __newindex, for everything else */                \
    X(WRITE_ALL, FIELD, "all")               /* the key of a table's readers of all of it */              \
    X(WRITE_STRUCTURE, FIELD, "structure")   /* the key of its readers of its length and set of keys */   \
    X(WRITE_SUBSCRIPTIONS, LITERAL, "subscriptions") /* the id of the subscriptions reader */            \
    X(WRITE_SHARED, FIELD, "shared")         /* the Lua side's shared table (`tablesLeft`) */            \
    X(WRITE_HOLDER, FIELD, "holder")         /* holder.state is the app's state table */                  \
    X(WRITE_CHILDREN, FIELD, "children")     /* child store id -> its local state */                      \
    X(WRITE_DEPTH, FIELD, "statedepth")      /* the levels tables of the state nest at most */

/// `run`'s own upvalues.
#define RUN_UPVALUES(X)                                                                                    \
    X(RUN_HOLDER, FIELD, "holder")  /* holder.state is the app's state table */                          \
    X(RUN_ADOPT, FIELD, "adopt")    /* adopt(result): installs a state the reducer returned, or says why not */ \
    X(RUN_SETTLE, FIELD, "settle")  /* settle(): what is wrong with the tables the action moved, or nil */ \
    X(RUN_COLLECT, FIELD, "collect") /* collect(position): reads a committed action's changes (journaling) */ \
    X(RUN_JOURNAL, FIELD, "journal")     /* (table, key, old value) triples */                            \
    X(RUN_COLLECTED, FIELD, "collected") /* the list of changes read (layout: state_journal.lua) */       \
    X(RUN_CHILDREN, FIELD, "children")   /* child store id -> its local state */                          \
    X(RUN_ENCODED, FIELD, "encoded")     /* [1]: the buffer of journal records (json.h) */                 \
    X(RUN_UNWRAP, FIELD, "unwrap")       /* unwrap(value, what): strips proxies from commands */            \
    X(RUN_FLUSHED, FIELD, "flushed")     /* what the readers gave within a run: {ids, values, failed} (`b->flushed` of them) */ \
    X(RUN_SETTLED, FIELD, "settled")     /* settled(): whether nothing is left for a flush */               \
    X(RUN_TYPE, LITERAL, "type")    /* the key of an action's type */                                     \
    X(RUN_STATE, LITERAL, "state")  /* the key of the state in `holder` */

/// `flushdue`'s own upvalues.
#define FLUSH_UPVALUES(X)                                                                                   \
    X(FLUSH_JOURNAL, FIELD, "journal")           /* (table, key, old value) triples */                      \
    X(FLUSH_HOLDER_STATE, FIELD, "holderstate")  /* the shared set of what every reader reads of holder */   \
    X(FLUSH_READERS, FIELD, "readers")           /* id -> its record (`READER_SLOTS`) */                      \
    X(FLUSH_HOLDER, FIELD, "holder")             /* holder.state is the app's state table */                \
    X(FLUSH_RUN_READER, FIELD, "runreader")      /* runreader(id): runs a reader the Lua way, appends, says    \
                                                    whether its value holds a state table */                 \
    X(FLUSH_FINISH_READ, FIELD, "finishread")    /* finishread(id, value): ends a read whose value holds      \
                                                    tables; gives the value stripped and whether it holds state */ \
    X(FLUSH_INDEX_READS, FIELD, "indexreads")    /* indexreads(id, record, count): a reader's new record */  \
    X(FLUSH_FAILED_READ, FIELD, "failedread")    /* failedread(id): ends the read of a reader that raised */ \
    X(FLUSH_SUBSCRIPTIONS, LITERAL, "subscriptions") /* the id of the subscriptions reader */               \
    X(FLUSH_STATE, LITERAL, "state")             /* the key of the state in `holder` */                      \
    X(FLUSH_IDS, FIELD, "flushedids")            /* `flushed.ids`, `.values`, `.failed` (lists kept for good) */ \
    X(FLUSH_VALUES, FIELD, "flushedvalues")                                                                  \
    X(FLUSH_FAILED, FIELD, "flushedfailed")

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
enum { FLUSH_BEFORE_FIRST = FIRST_OWN_UPVALUE - 1, FLUSH_UPVALUES(UPVALUE_ENUM) };
#undef UPVALUE_ENUM

/// The pseudo-index of the current function's upvalue `name`.
#define UPVALUE(name) lua_upvalueindex(UPVALUE_##name)

/// How many proxies may be made before the caches turn weak (so proxies no one holds any more can be
/// collected: props walking a large list, say); the Lua side renews them between calls (`renew`).
#define PROXIES_BEFORE_WEAK 4096

/// The most entries `renew` makes room for in each cache.
#define PROXIES_RENEW_MAX (1 << 20)

/// [-0, +0, -] The barrier of the running function.
static inline Barrier *barrier(lua_State *L) { return (Barrier *)lua_touserdata(L, UPVALUE(CONTROL)); }

/// Slots of a transaction's journal kept on the stack of a thread of the barrier's own (`journalThread`), before
/// the rest go to the journal's table: an entry is moved there (`lua_xmove`) instead of stored in a table, which
/// costs three table writes and, the journal being old to a generational collector, makes it traverse that table
/// again at each minor collection; and beginning a transaction lets the last one's entries go at once. (A stack
/// holds far fewer slots than a table can: a long transaction goes on in the table.)
#define JOURNAL_STACKED (CLUA_JOURNAL_ENTRY_LENGTH * 1024)

/// [-0, +1, -] Pushes the journal's slot `slot` (from 1: `CLUA_JOURNAL_ENTRY`'s offsets from the slot before an
/// entry) — from the journal's thread, or the table at `journal` (an absolute index or an upvalue) past what the
/// thread holds — and returns its type. The thread has a slot to spare at all times (see `journal_put`).
static inline int journal_push(lua_State *L, Barrier *b, int journal, lua_Integer slot) {
    if (slot > b->stacked) return lua_rawgeti(L, journal, slot);
    lua_pushvalue(b->journalThread, (int)slot);
    lua_xmove(b->journalThread, L, 1);
    return lua_type(L, -1);
}

/// The barrier's user values, while a reader runs (READ mode): the record of what it read last time (real table
/// -> set of keys read; given to `setmode`, nil for a first run), in which the reads it repeats are marked
/// (`readStamp`), and the record of the reads that record does not hold (made at the first). And always the key
/// sets emptied by `recycle`, for the next records (a stack of `spareSets`, at most `SPARE_SETS_MAX`: a record's
/// sets are reused rather than left to the collector).
/// And the slots of `stamps` (`STAMPS`); the real table `__newindex` found last (`LAST_REAL`: see
/// `push_last_real`); and, while a long transaction journals each place once, the places it journaled
/// (`JOURNALED`: real table -> set of keys; see `journaled_already`). And the thread the journal's first slots are
/// kept on (`JOURNAL_THREAD`: see `journal_push`).
enum { LAST_READS = 1, FRESH_READS, SPARE_SETS, STAMPS, LAST_REAL, JOURNALED, JOURNAL_THREAD, USER_VALUES = JOURNAL_THREAD };
#define SPARE_SETS_MAX 256

// MARK: Helpers every part uses

/// The first slot for the proxy at `proxy` (Fibonacci hashing of its address).
static inline size_t stamp_slot(const void *proxy, size_t mask) {
    return (size_t)(((uint64_t)(uintptr_t)proxy * UINT64_C(0x9E3779B97F4A7C15)) >> 29) & mask;
}

/// [-0, +0, -] Whether the proxy at `proxy` was handed out in the running call. (A slot of another epoch ends
/// the probe: slots of this epoch are never more than half the set.)
static inline int stamped(const Barrier *b, const void *proxy) {
    if (b->stamps == NULL) return 0;
    for (size_t i = stamp_slot(proxy, b->stampMask);; i = (i + 1) & b->stampMask) {
        const StampSlot *slot = &b->stamps[i];
        if (slot->epoch != b->epoch) return 0;
        if (slot->proxy == proxy) return 1;
    }
}

/// [-0, +(0|1), -] Pushes the real table of the proxy at `proxy` (the metamethod's first argument) when it is the
/// one `__newindex` found last in the running call, and returns 1; otherwise returns 0 and pushes nothing. A
/// reducer writes several fields of one table, and reads them, in a row: each such lookup is then a read of the
/// control's `LAST_REAL`, not a search of `targets` and of the stamps. Sound as an address: a proxy maps to one
/// real table for as long as `targets` holds it (`renew`, which replaces `targets`, forgets it), and a table
/// that takes a collected proxy's address becomes a proxy only where proxies are made (`proxies_push`, `claim`),
/// which forget it too.
static inline int push_last_real(lua_State *L, const Barrier *b, const void *proxy) {
    if (proxy != b->lastProxy || b->lastEpoch != b->epoch) return 0;
    lua_getiuservalue(L, UPVALUE(CONTROL), LAST_REAL);
    return 1;
}

/// [-0, +0, -] Remembers the proxy at `proxy` (stamped in the running call) and its real table, at `real`, for
/// `push_last_real`.
static inline void keep_last_real(lua_State *L, Barrier *b, const void *proxy, int real) {
    lua_pushvalue(L, real);
    lua_setiuservalue(L, UPVALUE(CONTROL), LAST_REAL);
    b->lastProxy = proxy;
    b->lastEpoch = b->epoch;
}

/// [-0, +0, -] Forgets the proxy at `proxy` if `push_last_real` remembers it (a table made a proxy now).
static inline void forget_last_proxy(Barrier *b, const void *proxy) {
    if (proxy == b->lastProxy) b->lastEpoch = 0; /* (no call has epoch 0) */
}

/// [-0, +0, -] A call starts: no proxy handed out before is good in it.
static inline void next_call(Barrier *b) {
    b->stampLast = b->stampLive;
    b->stampLive = 0;
    b->epoch++;
}

/// [-(top), +results, e] Calls the Lua fallback with the metamethod's `arguments` (the stack is cut to them
/// first) and leaves what it returns.
static inline int fall_back(lua_State *L, int fallback, int arguments, int results) {
    lua_settop(L, arguments);
    lua_pushvalue(L, fallback);
    lua_insert(L, 1);
    lua_call(L, arguments, results);
    return results;
}

/// [-0, +0, -] Empties the table at `t`, keeping its slots (the readers' key sets, kept for their next records:
/// one table fewer for the collector per record).
static inline void empty_table(lua_State *L, int t) {
    lua_pushnil(L);
    while (lua_next(L, t) != 0) { /* clearing the current key is allowed while traversing */
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_pushnil(L);
        lua_rawset(L, t);
    }
}

/// [-0, +0, -] Enters `mode`. A reader (props, a selector, the subscriptions) draws from `math.random` as any code
/// does, but what it draws is not taken from the reducers: the generator's state as it began is put back as it
/// ends, so reducers draw the same numbers whether or not, and however often, readers ran between them — a replay
/// or a resume gives them what they drew (their generator's state is recorded with the journal).
static inline void set_mode(Barrier *b, lua_Integer mode) {
    if (b->random != NULL && (b->mode == MODE_READ) != (mode == MODE_READ)) {
        if (mode == MODE_READ) memcpy(b->readerRandom, b->random, sizeof b->readerRandom);
        else memcpy(b->random, b->readerRandom, sizeof b->readerRandom);
    }
    b->mode = mode;
}

/// [-0, +0, -] Drops the last transaction's journal (the slots on the journal's thread are let go; those of its
/// table are overwritten, not emptied) and opens a new one.
static inline void begin_transaction(Barrier *b) {
    next_call(b);
    b->committed = 0;
    b->count = 0;
    b->stacked = 0;
    lua_settop(b->journalThread, 0);
    b->scalarWrites = 0;
    b->journalOnce = 0;
    b->tablesLeftNoted = 0;
    b->moved = 0;
    set_mode(b, MODE_WRITE);
}

/// [-0, +0, -] Replaces a float key at 2 that has an integer's value with that integer, as a table keeps it
/// (`t[1.0]` is `t[1]`), so that the journal, the records of where tables are and the paths of changes name
/// the key as the state holds it.
static inline void integral_key(lua_State *L) {
    if (lua_isinteger(L, 2)) return;
    int exact = 0;
    lua_Integer integer = lua_tointegerx(L, 2, &exact);
    if (!exact) return;
    lua_pushinteger(L, integer);
    lua_replace(L, 2);
}

/// [-0, +0, -] Whether the value at `index`, of `type`, is a UTF-8 string, a boolean or a finite number: data the fast path
/// may store. (Everything else — a table, nil, a function, NaN, bytes that are not UTF-8 text — is the Lua half's
/// to store or refuse.)
static inline int is_plain_value(lua_State *L, int index, int type) {
    switch (type) {
    case LUA_TSTRING: {
        size_t count;
        const char *bytes = lua_tolstring(L, index, &count);
        return clua_json_is_utf8((const unsigned char *)bytes, count);
    }
    case LUA_TBOOLEAN:
        return 1;
    case LUA_TNUMBER:
        return lua_isinteger(L, index) || isfinite(lua_tonumber(L, index));
    default:
        return 0;
    }
}

/// [-0, +0, -] `is_plain_value` for the value at `index`, whatever its type.
static inline int is_plain_data(lua_State *L, int index) {
    return is_plain_value(L, index, lua_type(L, index));
}

/// [-0, +0, -] Whether storing the value at `b` where `a` is changes nothing: raw equality, and for numbers the
/// same subtype and, for a zero, the same sign (Lua stores `1.0` over `1`, and `-0.0` over `0.0`).
static inline int is_same(lua_State *L, int a, int b) {
    if (!lua_rawequal(L, a, b)) return 0;
    if (lua_type(L, a) != LUA_TNUMBER) return 1;
    if (lua_isinteger(L, a) != lua_isinteger(L, b)) return 0;
    if (lua_isinteger(L, a)) return 1;
    lua_Number x = lua_tonumber(L, a), y = lua_tonumber(L, b);
    return x != 0 || signbit(x) == signbit(y);
}

// MARK: The parts' functions
//
// Each is described where it is defined. The `lua_CFunction`s are the functions `makebarrier` returns (`barrier.c`
// lists them by their Lua names).

// proxies.c
BARRIER_INTERNAL void proxies_stamp(lua_State *L, Barrier *b, const void *proxy);
BARRIER_INTERNAL void proxies_push(lua_State *L, Barrier *b, int parent, int key);
BARRIER_INTERNAL int proxies_index(lua_State *L);
BARRIER_INTERNAL int proxies_proxy(lua_State *L);
BARRIER_INTERNAL int proxies_fresh(lua_State *L);
BARRIER_INTERNAL int proxies_claim(lua_State *L);
BARRIER_INTERNAL int proxies_placefresh(lua_State *L);
BARRIER_INTERNAL int proxies_place_new(lua_State *L, Barrier *b, int value, int parent, int key, int levels);
BARRIER_INTERNAL int clua_state_matches_json(lua_State *L);
BARRIER_INTERNAL int clua_state_decode_json(lua_State *L);
BARRIER_INTERNAL int clua_state_apply_json(lua_State *L);
BARRIER_INTERNAL int proxies_made(lua_State *L);
BARRIER_INTERNAL int proxies_renew(lua_State *L);
BARRIER_INTERNAL int proxies_flat(lua_State *L, int index);
BARRIER_INTERNAL int proxies_isflat(lua_State *L);

// journal.c
BARRIER_INTERNAL void journal_clear_tail(lua_State *L, Barrier *b, int journal);
BARRIER_INTERNAL int journal_newindex(lua_State *L);
BARRIER_INTERNAL int journal_notechange(lua_State *L);
BARRIER_INTERNAL int journal_count(lua_State *L);
BARRIER_INTERNAL int journal_view(lua_State *L);
BARRIER_INTERNAL int journal_begin(lua_State *L);
BARRIER_INTERNAL int journal_record(lua_State *L);
BARRIER_INTERNAL int journal_rollback(lua_State *L);
BARRIER_INTERNAL int journal_commit(lua_State *L);
BARRIER_INTERNAL int journal_setmoved(lua_State *L);
BARRIER_INTERNAL int journal_istext(lua_State *L);

// reads.c
BARRIER_INTERNAL void reads_key_set(lua_State *L, Barrier *b, int record, int real);
BARRIER_INTERNAL void reads_note_read(lua_State *L, Barrier *b, int real, int key);
BARRIER_INTERNAL int reads_mode(lua_State *L);
BARRIER_INTERNAL int reads_setmode(lua_State *L);
BARRIER_INTERNAL int reads_endread(lua_State *L);
BARRIER_INTERNAL int reads_note(lua_State *L);
BARRIER_INTERNAL int reads_recycle(lua_State *L);
BARRIER_INTERNAL int reads_flushedcount(lua_State *L);
BARRIER_INTERNAL int reads_bykeys(lua_State *L);
BARRIER_INTERNAL int reads_emptysets(lua_State *L);
BARRIER_INTERNAL int reads_mark_due(lua_State *L, Barrier *b, int ids);
BARRIER_INTERNAL void reads_mark_due_id(lua_State *L, Barrier *b, lua_Integer id);
BARRIER_INTERNAL int reads_markdue(lua_State *L);
BARRIER_INTERNAL int reads_takedue(lua_State *L);
BARRIER_INTERNAL int reads_duecount(lua_State *L);
BARRIER_INTERNAL int reads_observed(lua_State *L);
BARRIER_INTERNAL int reads_flushdue(lua_State *L);

// moves.c
BARRIER_INTERNAL void moves_note(lua_State *L, Barrier *b, int t, int oldParent, int oldKey);
BARRIER_INTERNAL void moves_point(lua_State *L, Barrier *b, int t, int parent, int key);
BARRIER_INTERNAL int moves_record(lua_State *L);
BARRIER_INTERNAL int moves_counts(lua_State *L);
BARRIER_INTERNAL int moves_clear(lua_State *L);

// changes.c
BARRIER_INTERNAL int changes_record(lua_State *L, Barrier *b, lua_Integer position);
BARRIER_INTERNAL void changes_record_random(lua_State *L, Barrier *b, lua_Integer position);
BARRIER_INTERNAL int changes_setjournaling(lua_State *L);
BARRIER_INTERNAL int changes_collectedcount(lua_State *L);
BARRIER_INTERNAL int changes_records(lua_State *L);

// runs.c
BARRIER_INTERNAL int runs_run(lua_State *L);
BARRIER_INTERNAL int runs_dirty(lua_State *L);
BARRIER_INTERNAL int runs_setdirty(lua_State *L);
BARRIER_INTERNAL int runs_position(lua_State *L);
BARRIER_INTERNAL int runs_scriptlevel(lua_State *L);
BARRIER_INTERNAL int runs_refusal(lua_State *L);
BARRIER_INTERNAL int runs_positionresults(lua_State *L);
BARRIER_INTERNAL int runs_flushresults(lua_State *L);

#endif
