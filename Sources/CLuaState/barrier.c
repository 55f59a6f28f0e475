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
//    read marks due, there and then, the readers of what it changed (the index of readers, `dependents`: real
//    table -> key -> readers); a flush runs them again.
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
// ## The files
//
// The barrier is one object in five parts, each a file with its own prefix: `proxies.c` (proxies, their stamps,
// `__index`, where tables are), `journal.c` (transactions, `__newindex`), `reads.c` (readers' records, the change
// set), `changes.c` (what an action changed, as JSON), `runs.c` (the loop over a run). `barrier.h` holds what they
// share — the state, the upvalue layouts, small helpers — and this file the contract and `makebarrier`.
//
// ## Stack effects
//
// Every function here states its stack effect as Lua's manual does, `[-o, +p, x]`: it pops `o` values, pushes
// `p`, and `x` says whether it may raise: `-` never, `m` only a memory error, `e` any error (it calls Lua). The
// functions Lua calls (`lua_CFunction`s) are entered with their arguments and may raise (`e`): they run only
// inside a protected call the host made, never in a Swift frame.
#include "barrier.h"
#include "clua_state.h"

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
static const Upvalue flushUpvalues[] = { FLUSH_UPVALUES(UPVALUE_DESCRIPTION) };
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
/// `weakall`, `parents`, `parentkeys`, `due`, `isdue`), each function's own (the lists above), and optionally `control`, the barrier whose state a new
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
    Barrier *made = (Barrier *)lua_touserdata(L, control);
    made->pathGeneration++; /* new caches: records start afresh */
    made->readsGeneration++;
    lua_createtable(L, 0, 20); /* 3: the functions */
    lua_pushvalue(L, control);
    lua_setfield(L, 3, "control");
#define BARRIER_MODE_FIELD(name, number) \
    lua_pushinteger(L, MODE_##name);     \
    lua_setfield(L, 3, #name);
    BARRIER_MODES(BARRIER_MODE_FIELD)
#undef BARRIER_MODE_FIELD
#define READER_SLOT_FIELD(name, number)  \
    lua_pushinteger(L, READER_##name);   \
    lua_setfield(L, 3, "READER_" #name);
    READER_SLOTS(READER_SLOT_FIELD)
#undef READER_SLOT_FIELD

    static const struct {
        const char *name;
        lua_CFunction function;
        const Upvalue *upvalues;
        int count;
    } functions[] = {
        { "index", proxies_index, indexUpvalues, COUNT(indexUpvalues) },
        { "newindex", journal_newindex, writeUpvalues, COUNT(writeUpvalues) },
        { "run", runs_run, runUpvalues, COUNT(runUpvalues) },
        { "begin", journal_begin, NULL, 0 },
        { "record", journal_record, journalUpvalues, COUNT(journalUpvalues) },
        { "rollback", journal_rollback, journalUpvalues, COUNT(journalUpvalues) },
        { "mode", reads_mode, NULL, 0 },
        { "setmode", reads_setmode, NULL, 0 },
        { "dirty", runs_dirty, NULL, 0 },
        { "setdirty", runs_setdirty, NULL, 0 },
        { "observed", reads_observed, NULL, 0 },
        { "position", runs_position, NULL, 0 },
        { "refusal", runs_refusal, runUpvalues, COUNT(runUpvalues) },
        { "positionresults", runs_positionresults, runUpvalues, COUNT(runUpvalues) },
        { "flushresults", runs_flushresults, runUpvalues, COUNT(runUpvalues) },
        { "proxy", proxies_proxy, NULL, 0 },
        { "fresh", proxies_fresh, NULL, 0 },
        { "claim", proxies_claim, NULL, 0 },
        { "made", proxies_made, NULL, 0 },
        { "renew", proxies_renew, NULL, 0 },
        { "count", journal_count, NULL, 0 },
        { "setmoved", journal_setmoved, NULL, 0 },
        { "istext", journal_istext, NULL, 0 },
        { "setjournaling", changes_setjournaling, NULL, 0 },
        { "collectedcount", changes_collectedcount, NULL, 0 },
        { "records", changes_records, recordsUpvalues, COUNT(recordsUpvalues) },
        { "emptysets", reads_emptysets, NULL, 0 },
        { "markdue", reads_markdue, NULL, 0 },
        { "takedue", reads_takedue, journalUpvalues, COUNT(journalUpvalues) },
        { "duecount", reads_duecount, NULL, 0 },
        { "flushedcount", reads_flushedcount, NULL, 0 },
        { "notechange", journal_notechange, writeUpvalues, COUNT(writeUpvalues) },
        { "isflat", proxies_isflat, NULL, 0 },
        { "note", reads_note, NULL, 0 },
        { "recycle", reads_recycle, readerUpvalues, COUNT(readerUpvalues) },
        { "endread", reads_endread, readerUpvalues, COUNT(readerUpvalues) },
        { "flushdue", reads_flushdue, flushUpvalues, COUNT(flushUpvalues) },
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

