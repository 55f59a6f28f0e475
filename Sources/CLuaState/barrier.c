// A journaling write barrier over proxy tables, and the loop that reduces a run of actions through it, in C: this
// file makes the barrier (`makebarrier`); its parts are `proxies.c`, `journal.c`, `reads.c`, `changes.c` and
// `runs.c`, and `barrier.h` holds what they share. Why a barrier, who does what (C or the Lua half), the modes, the
// limits and the stack effects every function states: docs/design.md, "The write barrier".
#include "barrier.h"
#include "clua_state.h"

// MARK: Layouts

/// `barrierlayouts()` [-0, +18, -]: every position `clua_state_layouts.h` declares for the Lua side, in the order it
/// declares them — `CLUA_READER_SLOTS`, `CLUA_COLLECTED_ENTRY` and its length, `CLUA_JOURNAL_ENTRY` and its
/// length, `CLUA_MOVED_ENTRY` and its length, `CLUA_LEFT_ENTRY` and its length — which `state_runtime.lua` hands
/// to the parts that use them. (Values, not fields named
/// after them: a dozen more strings in every store's VM doubled its string table, 4 KiB a store.)
static int barrier_layouts(lua_State *L) {
    int count = 0;
    luaL_checkstack(L, 32, "barrierlayouts");
#define PUSH(name, value) (lua_pushinteger(L, value), count++);
#define READER_SLOT(name, number) PUSH(name, READER_##name)
#define COLLECTED(name, number) PUSH(name, CLUA_COLLECTED_##name)
#define JOURNAL(name, offset) PUSH(name, CLUA_JOURNAL_##name)
#define MOVED(name, offset) PUSH(name, CLUA_MOVED_##name)
#define LEFT(name, offset) PUSH(name, CLUA_LEFT_##name)
    READER_SLOTS(READER_SLOT)
    CLUA_COLLECTED_ENTRY(COLLECTED)
    PUSH(LENGTH, CLUA_COLLECTED_ENTRY_LENGTH)
    CLUA_JOURNAL_ENTRY(JOURNAL)
    PUSH(LENGTH, CLUA_JOURNAL_ENTRY_LENGTH)
    CLUA_MOVED_ENTRY(MOVED)
    PUSH(LENGTH, CLUA_MOVED_ENTRY_LENGTH)
    CLUA_LEFT_ENTRY(LEFT)
    PUSH(LENGTH, CLUA_LEFT_ENTRY_LENGTH)
#undef MOVED
#undef LEFT
#undef READER_SLOT
#undef COLLECTED
#undef JOURNAL
#undef PUSH
    return count;
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
    // (More than the LUA_MINSTACK slots a C function may use unasked: without room made first, the upvalues were
    // written past the stack's end.)
    luaL_checkstack(L, 1 + COUNT(sharedUpvalues) + count, "makebarrier");
    lua_pushvalue(L, control);
    push_upvalues(L, sharedUpvalues, COUNT(sharedUpvalues), 1);
    push_upvalues(L, own, count, 0);
    lua_pushcclosure(L, function, 1 + COUNT(sharedUpvalues) + count);
}

/// `makebarrier{…}` [-1, +1, e]. The table gives the shared fields (`targets`, `proxies`, `meta`, `weakkeys`,
/// `weakall`, `parents`, `parentkeys`, `due`, `isdue`, `moved`, `movedindex`, `left`, `leftseen`), each function's own (the lists above), and optionally `control`, the barrier whose state a new
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
        b->journalThread = lua_newthread(L);
        lua_setiuservalue(L, -2, JOURNAL_THREAD);
        set_mode(b, MODE_CLOSED);
        b->pathGeneration = 1;
        b->epoch = 1; /* (slots never used hold epoch 0) */
        for (int i = 0; i < NOTED_SLOTS; i++) b->noted[i].at = -1;
        for (int i = 0; i < DUE_PLACES; i++) b->duePlaces[i].count = -1;
        b->subscriptionsDirty = 1;
    }
    int control = 2;
    Barrier *made = (Barrier *)lua_touserdata(L, control);
    made->random = clua_guard(L)->random;
    made->pathGeneration++; /* new caches: records start afresh */
    made->readsGeneration++;
    lua_createtable(L, 0, 20); /* 3: the functions */
    lua_pushvalue(L, control);
    lua_setfield(L, 3, "control");
#define MODE_FIELD(name, number)   \
    lua_pushinteger(L, MODE_##name); \
    lua_setfield(L, 3, #name);
    BARRIER_MODES(MODE_FIELD)
#undef MODE_FIELD

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
        { "commit", journal_commit, NULL, 0 },
        { "mode", reads_mode, NULL, 0 },
        { "setmode", reads_setmode, NULL, 0 },
        { "dirty", runs_dirty, NULL, 0 },
        { "setdirty", runs_setdirty, NULL, 0 },
        { "observed", reads_observed, NULL, 0 },
        { "position", runs_position, NULL, 0 },
        { "scriptlevel", runs_scriptlevel, NULL, 0 },
        { "refusal", runs_refusal, runUpvalues, COUNT(runUpvalues) },
        { "positionresults", runs_positionresults, runUpvalues, COUNT(runUpvalues) },
        { "flushresults", runs_flushresults, runUpvalues, COUNT(runUpvalues) },
        { "proxy", proxies_proxy, NULL, 0 },
        { "fresh", proxies_fresh, NULL, 0 },
        { "claim", proxies_claim, NULL, 0 },
        { "placefresh", proxies_placefresh, NULL, 0 },
        { "made", proxies_made, NULL, 0 },
        { "renew", proxies_renew, NULL, 0 },
        { "count", journal_count, NULL, 0 },
        { "journalview", journal_view, journalUpvalues, COUNT(journalUpvalues) },
        { "setmoved", journal_setmoved, NULL, 0 },
        { "recordmove", moves_record, NULL, 0 },
        { "movecounts", moves_counts, NULL, 0 },
        { "clearmoves", moves_clear, NULL, 0 },
        { "istext", journal_istext, NULL, 0 },
        { "setjournaling", changes_setjournaling, NULL, 0 },
        { "collectedcount", changes_collectedcount, NULL, 0 },
        { "records", changes_records, recordsUpvalues, COUNT(recordsUpvalues) },
        { "emptysets", reads_emptysets, NULL, 0 },
        { "markdue", reads_markdue, NULL, 0 },
        { "takedue", reads_takedue, journalUpvalues, COUNT(journalUpvalues) },
        { "duecount", reads_duecount, NULL, 0 },
        { "flushedcount", reads_flushedcount, NULL, 0 },
        { "bykeys", reads_bykeys, NULL, 0 },
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
    { "barrierlayouts", barrier_layouts },
    { "matchesjson", clua_state_matches_json },
    { "decodejson", clua_state_decode_json },
    { "applyjson", clua_state_apply_json },
    { NULL, NULL },
};

const void *clua_state_library(void) { return state_library; }

