// The few C functions that must run where Lua may raise an error, or in a signal handler.
//
// A Lua error is a longjmp. It must never cross a Swift frame, so everything that can raise on behalf of
// the host lives here, in C: the hook that enforces the time budget, the allocator that enforces the memory
// cap, the trampoline that turns a Swift function's error code into a Lua error, the message handler, and the
// sandbox's `pcall`/`xpcall`, which let nothing catch an exhausted time budget. `watchdog.c` adds the
// watchdog that interrupts a call past its deadline (it needs one copy of its state per process, so it is not
// inline), `budget.c` each call's budget, `protected.c` the sandbox's protected calls and coroutines;
// `allocator.c` the counting allocator and its free lists; `values.c` copying converted values in the VM;
// `patterns.c`, `strings.c` and `format.c` the sandbox's pattern functions, `format` and `tostring`. (The
// scripted store's state engine, which builds on the budget functions here, is a C target of its own: `CLuaState`.)
// LuaKit's `LuaVM` owns the `CLuaGuard` and is the only Swift user of this header.
#ifndef CLUA_GUARD_H
#define CLUA_GUARD_H

#include <lua5.4/lua.h>
#include <lua5.4/lauxlib.h>
#include <lua5.4/lualib.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/// How the time budget stops a script that overruns it.
typedef enum CLuaEnforcement {
    /// Lua's count hook checks the clock every `hookInterval` instructions. While any hook is set, Lua 5.4
    /// traps every instruction, so scripts run markedly slower.
    CLUA_ENFORCE_COUNT_HOOK = 0,
    /// The watchdog thread signals the VM's thread once a call's deadline passes, and the signal handler sets
    /// the hook then (`lua_sethook` is the one Lua function made to be called from a signal handler). No hook
    /// is set while scripts run within budget.
    CLUA_ENFORCE_WATCHDOG = 1,
} CLuaEnforcement;

/// The allocator's blocks of up to 128 bytes, in 8 classes of 16 (allocator.c): the slabs they are cut from (each
/// links to the next through its first word), the newest slab's part not cut yet, and each class's freed blocks
/// (each links to the next through its first word). All zero before the first block is made.
#define CLUA_SMALL_CLASSES 8
/// Slots of the cache of short strings the host pushed lately (`clua_push_short_string`): a power of two.
#define CLUA_SHORT_STRING_SLOTS 64
typedef struct CLuaSmallBlocks {
    void *free[CLUA_SMALL_CLASSES];
    char *uncut;
    char *uncutEnd;
    void *slabs;
} CLuaSmallBlocks;

/// Per-VM bookkeeping shared by the allocator, the hook and the trampoline. Reached through
/// `lua_getextraspace` (a pointer to it) and through the allocator's user data.
typedef struct CLuaGuard {
    lua_State *state;                 /* NULL until lua_newstate returns */
    lua_State *volatile running;      /* the coroutine the sandbox's `coroutine.resume` runs (NULL: the main
                                         thread): where the watchdog's signal handler arms the hook */
    int closeDepth;                   /* the sandbox's `coroutine.close` calls running, nested */
    lua_CFunction traceback;          /* Lua's `debug.traceback` (the sandbox's `xpcall` calls it unwrapped) */
    /* memory */
    size_t bytesInUse;
    size_t bytesLimit;
    size_t bytesPeak;
    int64_t allocationCount;          /* blocks allocated or grown, ever (a deterministic measure of work) */
    int hostAllocations;              /* > 0: the host is allocating (cap not enforced; real exhaustion aborts) */
    int memoryRefused;                /* the allocator refused a request during the current call */
    /* time */
    int64_t deadlineNanos;            /* CLOCK_MONOTONIC; 0 when no call is running. Written by the thread
                                         running the call only (atomically: its signal handler reads it) */
    int64_t budgetNanos;
    /* what of the budget is spent, counted in the thread's CPU time (`clua_budget_spent`): when it (re)started
       (monotonic), what was counted up to the last look, and the thread's CPU clock then (0: not read yet) */
    int64_t budgetStartNanos;
    int64_t budgetCountedNanos;
    int64_t budgetCPUMarkNanos;
    int hookInterval;                 /* count hook: instructions between two budget checks */
    int timedOut;                     /* the budget is spent: every hook from now on raises */
    CLuaEnforcement enforcement;
    int callDepth;                    /* nested top-level calls; the budget covers the outermost */
    int countingInstructions;         /* the hook runs after every instruction and counts it (diagnostics) */
    int64_t instructionCount;
    struct CLuaGuard *outerRunning;   /* the guard whose call was running on this thread before this one's */
    /* Swift functions exposed to Lua: returns the number of results, or -1 with the error value pushed */
    int (*callSwift)(lua_State *L, void *function);
    /* where the current call failed (first Lua frame), when known */
    int failureLine;
    char failureSource[LUA_IDSIZE];
    /* the slabs small blocks are cut from, and the freed ones (allocator.c) */
    CLuaSmallBlocks smallBlocks;
    /* the recorded clock a scripted store's `os` reads (clock.c), set by the host before each crossing */
    int64_t clockMillis;              /* now, in milliseconds since 1970-01-01 UTC */
    int64_t clockStartMillis;         /* when the store started: `os.clock()` counts from it */
    int32_t utcOffsetSeconds;         /* the time zone `os.date` and `os.time(t)` read local time in, east of UTC */
    /* the short strings the host pushed lately (`clua_push_short_string`): each slot's host form (0, 0: none
       yet) and where the registry keeps its string (0: no place yet) */
    uint64_t shortStringForms[CLUA_SHORT_STRING_SLOTS][2];
    int shortStringRefs[CLUA_SHORT_STRING_SLOTS];
    /* the state of `math.random`'s generator (Lua 5.4's xoshiro256**: four 64-bit words, the user data its
       functions share), found as the library opens; NULL where it is not that */
    uint64_t *random;
} CLuaGuard;

/// The guard of a VM, stored in the extra space of its main thread.
static inline CLuaGuard *clua_guard(lua_State *L) { return *(CLuaGuard **)lua_getextraspace(L); }

static inline int64_t clua_now_nanos(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/// Records the innermost script frame at or above `level` as the failure location, skipping trusted host
/// chunks (named `host:…`, such as LuaKit's prelude). Reads only; never allocates.
static inline void clua_note_location(lua_State *L, CLuaGuard *g, int level) {
    lua_Debug ar;
    for (; level < 64 && lua_getstack(L, level, &ar); level++) {
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0 && strncmp(ar.short_src, "host:", 5) != 0) {
            g->failureLine = ar.currentline;
            memcpy(g->failureSource, ar.short_src, LUA_IDSIZE);
            g->failureSource[LUA_IDSIZE - 1] = '\0';
            return;
        }
    }
}

/// The counting allocator (a `lua_Alloc`). Refuses growth beyond `bytesLimit` while a script runs; serves
/// small blocks from slabs of the VM's own, and keeps them for reuse once freed (`smallBlocks`). In allocator.c.
void *clua_allocate(void *ud, void *ptr, size_t osize, size_t nsize);

/// Frees the slabs the allocator cut small blocks from, after the VM is closed. In allocator.c.
void clua_free_slabs(CLuaGuard *g);

/// The registry field in which the message handler leaves the traceback. (A string, not the address of a
/// static: each Swift file that includes this header gets its own copy of a static inline function's statics.)
#define CLUA_TRACEBACK_FIELD "luakit.traceback"

/// The registry field holding the default namespace's `package.loaded` (its modules), where tracebacks and argument
/// errors name a module's functions as Lua's do (`mymod.f`): namespaces.lua sets it.
#define CLUA_MODULES_FIELD "luakit.modules"

/// [-0, +1, m] `luaL_traceback`, leaving out the prelude's own frames (its chunks' Lua and `clua_builtin_error`):
/// a builtin written in Lua shows as Lua's C builtins do, `[C]: in function 'name'`. In builtins.c.
void clua_traceback(lua_State *L, lua_State *L1, const char *message, int level);

static inline void clua_budget_hook(lua_State *L, lua_Debug *ar);

/// [-0, +1, e] Raises the `timeout` error of a spent budget: marks the budget spent and sets the hook to fire on
/// every instruction, so neither `pcall` nor a `__close` handler can keep the script alive. For C that runs
/// where no hook fires (the pattern matcher).
static inline int clua_raise_budget_exceeded(lua_State *L, CLuaGuard *g) {
    if (!g->timedOut) {
        g->timedOut = 1;
        lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, 1);
        clua_note_location(L, g, 0);
        /* The traceback where the script was stopped (the message handler keeps it: by the time the error reaches
           it, a `pcall` that re-raised it may have unwound the script's frames). */
        g->hostAllocations++;
        clua_traceback(L, L, NULL, 0);
        lua_setfield(L, LUA_REGISTRYINDEX, CLUA_TRACEBACK_FIELD);
        g->hostAllocations--;
    }
    g->hostAllocations++;
    lua_pushfstring(L, "time budget of %d ms exceeded", (int)(g->budgetNanos / 1000000));
    g->hostAllocations--;
    return lua_error(L);
}

/// Whether the running call's budget is spent, once its deadline (on the monotonic clock) has passed: the budget
/// counts the thread's CPU time — what the call ran, not what it waited for a CPU on a busy machine — with the wall
/// clock as a backstop (`CLUA_WALL_BACKSTOP` budgets). When time is left, the deadline moves to when it would be
/// spent and this answers 0. (The CPU clock costs a system call, so it is read only here: a call that ends before
/// its deadline never reads it; the time before its first look is counted on the wall clock.) In budget.c.
int clua_budget_spent(lua_State *L, CLuaGuard *g, int64_t now);

/// [-0, +0, e] For C loops, where no hook fires: raises the budget's `timeout` error once the call's budget is
/// spent. Reads the clock: a loop calls it every thousand steps or so.
static inline void clua_check_deadline(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    if (g->timedOut) clua_raise_budget_exceeded(L, g);
    if (g->deadlineNanos == 0) return;
    int64_t now = clua_now_nanos();
    if (now >= g->deadlineNanos && clua_budget_spent(L, g, now)) clua_raise_budget_exceeded(L, g);
}

/// `checkbudget()` for the sandbox's Lua: raises the budget's `timeout` once the running call's deadline has passed
/// (C that the hook cannot interrupt — Lua's parser between two pieces of a long chunk — looks at the clock so).
static inline int clua_sandbox_checkbudget(lua_State *L) {
    clua_check_deadline(L);
    return 0;
}

/// `newhandle(metatable)` for the sandbox's Lua: a full userdata of no bytes with that metatable — what the sandbox's
/// files are, so that `type(io.stdout)` is `"userdata"`, as in Lua (their state is the Lua side's, keyed by them).
static inline int clua_sandbox_newhandle(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_newuserdatauv(L, 0, 0);
    lua_pushvalue(L, 1);
    lua_setmetatable(L, -2);
    return 1;
}

/// The count hook: checks the deadline every `hookInterval` instructions. Once it passes, the hook fires on
/// every instruction and raises each time, so neither `pcall` nor a `__close` handler can keep the script alive.
static inline void clua_budget_hook(lua_State *L, lua_Debug *ar) {
    CLuaGuard *g = clua_guard(L);
    if (g->countingInstructions) {
        g->instructionCount += 1;
        if (!g->timedOut && g->instructionCount % 1024 != 0) return; /* the clock is read every 1,024 */
    }
    (void)ar;
    if (!g->timedOut) {
        if (g->deadlineNanos == 0) return;
        int64_t now = clua_now_nanos();
        if (now < g->deadlineNanos || !clua_budget_spent(L, g, now)) return;
    }
    clua_raise_budget_exceeded(L, g);
}

/// `coroutine.resume(co, ...)` for the sandbox: Lua 5.4's, with the time budget holding inside `co` (while it
/// runs, the watchdog arms its hook there) and a spent budget the caller's failure too: it stops the whole call,
/// as it does outside coroutines, rather than being an error `resume` returns. In protected.c.
int clua_sandbox_resume(lua_State *L);

/// `coroutine.close(co)` for the sandbox: Lua's (upvalue 1), nested at most `CLUA_CLOSE_DEPTH` deep — Lua 5.4.4
/// overflows the C stack on deep chains of `coroutine.close` (a crash, not an error: its bug list, "C-stack
/// overflow with deep nesting of coroutine.close"). In protected.c.
int clua_sandbox_close(lua_State *L);
#define CLUA_CLOSE_DEPTH 64

/// `makeclose(close)` [-1, +1, m]: the sandbox's `coroutine.close` over Lua's `close`.
static inline int clua_make_sandbox_close(lua_State *L) {
    lua_settop(L, 1);
    lua_pushcclosure(L, clua_sandbox_close, 1);
    return 1;
}

/// `coroutine.wrap(f)` for the sandbox: refuses what is not a function as Lua's `wrap` does (its message, named by
/// the call site), then returns a function that resumes a new coroutine of `f` as the sandbox's `resume` does and
/// raises its errors as Lua's `wrap` does (upvalue 1: Lua's `coroutine.close`, for a coroutine that died). In
/// protected.c.
int clua_sandbox_wrap(lua_State *L);

/// `makewrap(close)` [-1, +1, m]: the sandbox's `coroutine.wrap`, given Lua's `coroutine.close`.
static inline int clua_make_sandbox_wrap(lua_State *L) {
    lua_settop(L, 1);
    lua_pushcclosure(L, clua_sandbox_wrap, 1);
    return 1;
}

/// Raises Lua's "bad argument #arg to 'name' (message)" for a sandbox function written in C, as `luaL_argerror`
/// words it — the name the call site gives the function, "calling 'name' on bad self" for a method — except that a
/// function called with no name at hand (by `pcall`, say) is called `name` where Lua would look it up among the
/// loaded libraries, which hold Lua's own functions, not the sandbox's. In protected.c.
int clua_argument_error(lua_State *L, int arg, const char *message, const char *name);

/// `luaL_typeerror`'s message ("<expected> expected, got <type>", the type a `__name` metafield names) through
/// `clua_argument_error`. In protected.c.
int clua_type_error(lua_State *L, int arg, const char *expected, const char *name);

/// Pushes the sandbox's `find`, `match`, `gmatch`, `gsub`, `rep`, `format` and `tostring` as a table: Lua 5.4's semantics and
/// messages, interruptible by the time budget, no addresses. In strings.c (the matcher in patterns.c, `format`
/// and `tostring` in format.c).
int clua_push_sandbox_strings(lua_State *L);

/// Pushes the sandbox's `table.move`, `insert`, `remove` and `concat` as a table: Lua 5.4's semantics and messages,
/// interruptible by the time budget. In tables.c.
int clua_push_sandbox_tables(lua_State *L);

/// Arms the budget for a top-level call (a nested one keeps the outer call's deadline). In budget.c.
void clua_begin_call(lua_State *L, CLuaGuard *g);

/// Disarms the budget after a top-level call: removes a hook the watchdog set, or restores the count hook's
/// normal rate (unless instructions are being counted). In budget.c.
void clua_end_call(lua_State *L, CLuaGuard *g);

/// `restartbudget()`, a Lua function for trusted host code: gives the running top-level call a fresh time
/// budget, counted from now (nothing once the budget is spent). For host loops that run many script functions
/// in one call, each within its own budget. In budget.c.
int clua_restart_budget(lua_State *L);

/// `within(account, milliseconds, bytes, f, ...)`, a Lua function for trusted host code: calls `f(...)` with a
/// tighter budget — its time ends `milliseconds` from now unless the running call's ends sooner, and it may
/// allocate `bytes` more than the VM holds as it starts, within the VM's cap (0: the running call's, for
/// either) — and returns what `f` returns, or raises its error once both are back as they were. Counts in
/// `account` (`newaccount()`): the calls begun; for those that returned, how many and the blocks they allocated;
/// and the time of one call in 16 (the clock costs about what a short call does). A call begun and not returned
/// failed (`f` must not yield). For host code that runs code of several origins in one call, each within its
/// own limits and with its own account (a store's mounted plugins). In budget.c.
int clua_call_within(lua_State *L);

/// `newaccount()` and `readaccount(account)` (a table: `begun`, `returned`, `nanoseconds`, `timed`,
/// `allocations`), for trusted host code; `clua_define_accounts` registers their metatable once per VM. In budget.c.
int clua_new_account(lua_State *L);
int clua_read_account(lua_State *L);
void clua_define_accounts(lua_State *L);

/// What `restartbudget()` does, for C. The new deadline is counted from the kernel's last clock tick, rounded
/// up: never sooner than the budget from now, at most one tick (1–4 ms) later. In budget.c.
void clua_restart_budget_now(lua_State *L);

/// For trusted host C that caught, with `lua_pcall`, the `timeout` error of a budget spent by script code it ran
/// within a call (the readers a run calls between its actions): the budget is no longer spent and restarts from
/// now, and the hook is back to what a running call has — so the host can end its work and return normally.
/// Scripts cannot reach it: a spent budget stays uncatchable for them. In budget.c.
void clua_recover_budget(lua_State *L);

/// For a host function that waited `nanos` of the wall clock for another thread (a store's action that a spec
/// checks): that time is not the running call's, so its wall-clock backstop moves by as much. (Its CPU time is
/// counted as ever: waiting spends none.) In budget.c.
void clua_budget_exclude(lua_State *L, int64_t nanos);


/// What copying a table learned about it, for the next copy of the same table: its size (sequence part, other
/// keys, entries), and whether it is flat (no table inside: its keys and values then wait in a list at the
/// `scratch` stack slot). Start with `{ -1, -1, 0, 0 }`.
/// [-0, +1, m] Pushes the string of `length` bytes at `bytes` (at most 15), whose host form is (`low`, `high`): 16
/// bytes that are the same for two strings exactly when their bytes are (a Swift small string's bits). One the
/// host pushed lately is taken from the registry, where the cache keeps it, without hashing or interning it again:
/// the keys and names of actions, converted for every dispatch, are a few strings over and over. (Each string has
/// two slots it may be kept in, so that two the host pushes in turn do not keep displacing each other.)
void clua_push_short_string(lua_State *L, uint64_t low, uint64_t high, const char *bytes, size_t length);

/// One field of a table the host pushes in one call (`clua_push_small_fields`): its key, and its value when that is
/// a string, as Swift small strings — 16 bytes, the string's bytes first and its length in the last byte's low four
/// bits (`clua_push_short_string` takes them so) — and a boolean (`integer` 0 or 1) or number value.
typedef struct CLuaSmallField {
    uint64_t key[2];
    int type;          /* LUA_TBOOLEAN, LUA_TNUMBER or LUA_TSTRING */
    int isInteger;     /* a number that is an integer */
    lua_Integer integer;
    lua_Number number;
    uint64_t string[2];
} CLuaSmallField;

/// [-0, +1, m] Pushes a new table of the `count` fields (distinct keys), each key and string value through the cache
/// of short strings (`clua_push_short_string`): what the host pushes for an action of a few fields, in one call. The
/// caller has made sure of 3 stack slots.
void clua_push_small_fields(lua_State *L, const CLuaSmallField *fields, int count);

/// [-0, +0, -] Makes `tables` tables of a few fields — the first `counts[0]` of `fields`, then the next
/// `counts[1]`, … (distinct keys in each) — as `clua_push_small_fields` makes one, and stores them in the list at
/// `list` from `position` on: what the host converts for a run of actions made anew, in one call. A key the
/// tables share is made once for the call (kept on the stack), not taken from the cache for each table. Returns
/// 0, doing nothing, when the stack cannot grow for it.
int clua_push_small_tables(lua_State *L, int list, lua_Integer position, const CLuaSmallField *fields,
                           const int *counts, int tables);

typedef struct CLuaCopyShape {
    int sequence;
    int others;
    int entries;
    int flat;
} CLuaCopyShape;

/// [-0, +1] Pushes a deep copy of the table at `index`, which must be plain data as the host converts it: no
/// metatables, no cycles, nested at most as deep as the host's conversion allows (each level needs 4 stack
/// slots the caller has made sure of). Raw access only; allocates like the conversion it stands in for.
/// `scratch` is a stack slot the copier may use (0: none); keep it and `shape` from one copy of a table to the
/// next. In values.c.
void clua_copy_plain_table(lua_State *L, int index, int scratch, CLuaCopyShape *shape);

/// One field of a table read by `clua_read_flat_fields`: a string key, and a boolean, number or string value (the
/// strings' bytes stay valid while the table holds them).
typedef struct CLuaFlatField {
    const char *key;
    size_t keyLength;
    int type;          /* LUA_TBOOLEAN, LUA_TNUMBER or LUA_TSTRING */
    int isInteger;     /* a number that is an integer */
    lua_Integer integer;
    lua_Number number;
    int boolean;
    const char *string;
    size_t stringLength;
} CLuaFlatField;

/// [-0, +0] Reads the fields of the table at `index` into `fields`, in `lua_next`'s order, when they are few and
/// flat — at most `capacity` of them, every key a string and every value a boolean, number or string — and
/// returns how many; otherwise -1, having read nothing of use (a key of another type, a value of another type,
/// more fields, or no room on the stack for a key and a value). What a conversion does with most tables (props, an action, a record of a state), in one
/// call rather than a dozen calls of the Lua API per field. Raw access only. In values.c.
int clua_read_flat_fields(lua_State *L, int index, CLuaFlatField *fields, int capacity);

/// How deep a table `clua_copy_data` copies may nest: as deep as the host's conversion makes them
/// (`LuaLimits.conversionDepth`'s default).
#define CLUA_COPY_DEPTH 200

/// `copydata(v [, readonly])` [-(1|2), +1, m], a Lua function for trusted host code: a deep copy of `v` when it is a
/// table of plain data as the host converts it (no metatables, no cycles, nested at most `CLUA_COPY_DEPTH` deep), `v`
/// itself otherwise — a mounted store's copy of an action for each plugin, made in C in one pass rather than by a Lua
/// loop over `next`. With `readonly` (what `clua_reads_only` answered for its receiver), `v` itself too when its
/// receiver could change nothing of it: `true` (reads any of its fields), when it holds no tables; a list of keys
/// (reads those fields only), when none of those fields holds a table. Either way only without a metatable. `clua_push_copy_data` [-0, +1, m] pushes it (a closure remembering the sizes of the tables
/// it copied last, so that tables of one shape are made at their size without counting). In values.c.
int clua_copy_data(lua_State *L);
int clua_push_copy_data(lua_State *L);

/// [-0, +(0|1), m] Whether the value at `index` is a Lua function whose bytecode provably only reads the fields of its
/// `argument`-th parameter (1-based): every instruction naming that parameter's register reads a field, its length or
/// truth, or compares it with a constant — no store into it, no copy of it anywhere, no call, return, operator or
/// nested function that could receive it. 0: not proved (a C function, a vararg parameter, an unknown instruction:
/// conservative); 1: proved, and the fields it reads cannot be named (a key that is a value); 2: proved, and the
/// list of the keys it reads (each a constant: `a.name`, `a[3]`) is pushed. In bytecode.c.
int clua_reads_only_argument(lua_State *L, int index, int argument);

/// [-0, +(0|1), m] Whether the value at `index` is a Lua function whose bytecode provably reads the same named fields
/// of its `argument`-th parameter on every run and nothing else of it — `clua_reads_only_argument`'s 2, with no
/// length of it read and no jump, test or loop in the function (straight-line code reads each of those fields
/// every time, unless it raises first) —, the list of those keys pushed when it is (1); 0 otherwise. In bytecode.c.
int clua_reads_only_fields(lua_State *L, int index, int argument);

/// `clua_global_accesses(f)` [-1, +1, m], a Lua function: the globals the Lua function `f` (a compiled chunk, not run)
/// reads and writes by name — `x`, `x = …`, `function x() end`, `_G.x`, `_G.x = …` — in it and every function nested
/// in it, as a list of `{ name = …, line = …, write = bool, nested = bool }` (`nested`: inside a function rather
/// than at the chunk's top level). What `luastore check` lists globals from. In bytecode.c.
int clua_global_accesses(lua_State *L);

/// `readsonly(f [, n [, fields]])` [-(1|2|3), +1, m], a Lua function for trusted host code: what
/// `clua_reads_only_argument(f, n or 1)` answers — `false`, `true`, or the list of keys read; with `fields`, what
/// `clua_reads_only_fields` answers — the list of keys read, or `false`.
int clua_reads_only(lua_State *L);

/// [-0, +0, m] Stores in `list[first..last]` the value at `list[first - 1]` again: a table as a deep copy each
/// (`clua_copy_plain_table`, with `scratch` and `shape` as it takes them), anything else as it is — what a value
/// dispatched again and again becomes, in one call for the run of it. With `shareFlat` (whoever receives the
/// list's values only reads their fields: `clua_reads_only_argument`), a table that holds no tables and has no
/// metatable is stored itself again, not copied: nothing such a receiver does can change it or tell the copies
/// apart. In values.c.
void clua_repeat_in_list(lua_State *L, int list, lua_Integer first, lua_Integer last, int scratch, CLuaCopyShape *shape,
                         int shareFlat);

/// `istable(v)` and `isstring(v)`, Lua functions for trusted host code: `type(v) == "table"` (or `"string"`)
/// without making a string — Lua's `type` pushes its answer as a string, found again in the string cache with
/// a `strcmp`, on every call, which made it the dearest part of a write barrier that asks it several times
/// per access.
static inline int clua_is_table(lua_State *L) {
    lua_pushboolean(L, lua_type(L, 1) == LUA_TTABLE);
    return 1;
}

/// `callerkind(level)` [-1, +1, -]: what runs `level` levels above the function that calls it — "main" (a chunk's
/// top level), "Lua" (a function) or "C" (or nothing) — as `debug.getinfo(level + 1, "S").what` says, for the
/// sandbox's strict globals (Lua's `strict.lua` rule: only functions may not read undeclared globals).
static inline int clua_caller_kind(lua_State *L) {
    lua_Debug ar;
    int level = (int)luaL_optinteger(L, 1, 1);
    if (level >= 0 && lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar)) {
        lua_pushstring(L, ar.what);
    } else {
        lua_pushliteral(L, "C");
    }
    return 1;
}

static inline int clua_is_string(lua_State *L) {
    lua_pushboolean(L, lua_type(L, 1) == LUA_TSTRING);
    return 1;
}

/// Starts (`on` nonzero) or stops counting every instruction the VM executes into `instructionCount`, and sets
/// the hook that enforcement and counting need. In budget.c.
void clua_count_instructions(lua_State *L, CLuaGuard *g, int on);

/// Whether the watchdog can enforce budgets in this process (not under ThreadSanitizer, which holds back
/// signals while uninstrumented code such as the Lua interpreter runs). In watchdog.c.
int clua_watchdog_available(void);

/// How many threads the watchdog watches now: those on which a call under it has run, until they exit. In watchdog.c.
int clua_watched_threads(void);

/// Makes `signal` (SIGINT: Ctrl-C) stop the script running on the calling thread as the stand-alone `lua` does: the
/// error "interrupted!" at its next instruction, then the signal's default action for the next one; with no call
/// running, the default action at once. Answers `sigaction`'s result. In interrupt.c.
int clua_interrupt_on(int signal);

/// The hook an interrupt sets (interrupt.c): raises "interrupted!" once, after setting the budget's hook back.
void clua_interrupt_hook(lua_State *L, lua_Debug *ar);

/// Trampoline for Swift functions (upvalue 1 is the Swift function's box). Raises what Swift reports.
static inline int clua_call_swift(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    int results = g->callSwift(L, lua_touserdata(L, lua_upvalueindex(1)));
    if (results < 0) return lua_error(L);
    return results;
}

static inline const char *clua_traceback_field(void) { return CLUA_TRACEBACK_FIELD; }

/// Calls the function at 1 with the values above it, and returns what it returned: a C function a script is called
/// through as the stand-alone `lua` calls one (its tracebacks end with this frame, `[C]: in ?`).
static inline int clua_call_as_main(lua_State *L) {
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/// Message handler for top-level calls: records the location and the traceback, returns the error value as is.
/// It calls no metamethod, so an error value whose `__tostring` loops cannot hang it.
static inline int clua_message_handler(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    if (!g->timedOut) clua_note_location(L, g, 1);
    g->hostAllocations++;
    if (!g->timedOut || lua_getfield(L, LUA_REGISTRYINDEX, CLUA_TRACEBACK_FIELD) != LUA_TSTRING) {
        /* (a spent budget's traceback was taken where the script stopped: `clua_raise_budget_exceeded`) */
        clua_traceback(L, L, NULL, 1);
        lua_setfield(L, LUA_REGISTRYINDEX, CLUA_TRACEBACK_FIELD);
    }
    g->hostAllocations--;
    lua_settop(L, 1);
    return 1;
}

/// The registry field where `clua_main_message_handler` leaves what the stand-alone `lua` prints of an uncaught
/// error (a string), and the one saying that it prints no traceback with it (true: the message came from `__tostring`).
#define CLUA_MAIN_MESSAGE_FIELD "luakit.mainmessage"
#define CLUA_MAIN_PLAIN_FIELD "luakit.mainplain"
static inline const char *clua_main_message_field(void) { return CLUA_MAIN_MESSAGE_FIELD; }
static inline const char *clua_main_plain_field(void) { return CLUA_MAIN_PLAIN_FIELD; }

/// Message handler for a script called as the stand-alone `lua` calls one (`LuaVM.callAsMain`): records what
/// `clua_message_handler` records, and what `lua`'s own handler makes of the error value — a string or a number as
/// it is; a value whose `__tostring` gives a string, that string (with no traceback); anything else "(error object
/// is a T value)" — in `CLUA_MAIN_MESSAGE_FIELD`. Returns the error value as is. (A spent budget raises at every
/// instruction, so no `__tostring` runs then.)
static inline int clua_main_message_handler(lua_State *L) {
    clua_message_handler(L);
    CLuaGuard *g = clua_guard(L);
    int plain = 0;
    if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER) {
        lua_pushvalue(L, 1);
        lua_tostring(L, -1);
    } else if (!g->timedOut && luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
        plain = 1;
    } else {
        lua_settop(L, 1);
        lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    lua_setfield(L, LUA_REGISTRYINDEX, CLUA_MAIN_MESSAGE_FIELD);
    lua_pushboolean(L, plain);
    lua_setfield(L, LUA_REGISTRYINDEX, CLUA_MAIN_PLAIN_FIELD);
    lua_settop(L, 1);
    return 1;
}

/// A builtin the prelude writes in Lua, as scripts reach it: a C function calling upvalue 1 with its arguments,
/// returning what it returns (a coroutine may yield inside). In builtins.c.
int clua_builtin(lua_State *L);

/// `builtin(f)` [-1, +1, m]: `clua_builtin` over the Lua function `f`.
int clua_make_builtin(lua_State *L);

/// A searcher of `package.searchers` written in Lua: a builtin that a traceback shows where `require` called it
/// (`[C]: in ?`, as Lua's C searchers show when the file they found does not compile). In builtins.c.
int clua_searcher(lua_State *L);

/// `searcher(f)` [-1, +1, m]: `clua_searcher` over the Lua function `f`.
int clua_make_searcher(lua_State *L);

/// `error(message [, level])` for the prelude's own chunks: Lua's `error`, except that the level counts past the C
/// frames of builtins (`clua_builtin`, `clua_sandbox_next`): level 2 in a builtin's Lua is the script's line that
/// called the builtin, in a tail call too, as for Lua's own C builtins. In builtins.c.
int clua_builtin_error(lua_State *L);

/// `callnoyield(f, ...)` [-(n+1), +r, e] for the prelude's Lua: calls `f` as Lua's C functions call Lua
/// (`lua_call`, no continuation), so that a yield inside it is refused — "attempt to yield across a C-call
/// boundary" — as in a module Lua's `require` runs. In builtins.c.
int clua_call_noyield(lua_State *L);

/// `argerror(arg, message)` for the prelude's builtins: Lua's `luaL_argerror` for the builtin the script called (the C
/// frame just past the prelude's own): "bad argument #arg to 'name' (message)" at the script's line, the name as the
/// script called it — a method's arguments counted past `self` ("calling 'name' on bad self") — or, where the call
/// names none (`pcall(io.open, {})`), its name among the modules loaded (`io.open`), else `?`. In builtins.c.
int clua_builtin_argerror(lua_State *L);

/// The sandbox's `next`: Lua's `lua_next` for a table that is no host's, else the prelude's (upvalue 1) for a
/// library (upvalue 2: the read-only tables), a namespace's globals (upvalue 3) or a table whose metatable is sealed
/// (upvalue 4). In builtins.c.
int clua_sandbox_next(lua_State *L);

/// `makenext(next, frozen, globalsets, sealed)` [-4, +1, m]: the sandbox's `next` (`clua_sandbox_next`).
int clua_make_sandbox_next(lua_State *L);

/// The sandbox's `print`: Lua's (`luaB_print`), each value as the sandbox's `tostring` gives it, tab-separated, then a
/// line break, through the host's `write` and `print` — gathered and handed over once, except that what comes before a
/// value with a `__tostring` is written first, so that what that writes or raises comes where Lua's would. In format.c.
int clua_sandbox_print(lua_State *L);

/// `makeprint(tostring, write, print)` [-3, +1, m]: the sandbox's `print` (`clua_sandbox_print`), over the identities of
/// the sandbox's `tostring` (its upvalue) and the host's `write` and `print`. In format.c.
int clua_make_sandbox_print(lua_State *L);

/// `makepairs(next)` [-1, +1, m]: the sandbox's `pairs`, Lua's, returning the sandbox's `next` for a table without
/// `__pairs` (so `pairs(t)` returns the `next` scripts see, as in Lua). In builtins.c.
int clua_make_sandbox_pairs(lua_State *L);

/// The sandbox's `debug.traceback`: Lua's, through `clua_traceback`. In builtins.c.
int clua_sandbox_traceback(lua_State *L);

/// The scripts' `error`: Lua's, its levels counting the frames a traceback shows when a script calls it (the
/// prelude's own are not counted: a module's `error(m, 2)` is `require`'s, as in Lua). In builtins.c.
int clua_sandbox_error(lua_State *L);

/// The sandbox's `debug.getinfo`: Lua's, over the frames a traceback shows (the prelude's and the host's are not
/// counted); `func` is given for the script's own functions only. In builtins.c.
int clua_sandbox_getinfo(lua_State *L);

/// The sandbox's `pcall`: as Lua's (a coroutine may yield inside it), except that an exhausted time budget is
/// re-raised. In protected.c.
int clua_sandbox_pcall(lua_State *L);

/// The sandbox's `xpcall`: as Lua's (a coroutine may yield inside it; a handler that fails makes the error "error in
/// error handling"), except that a handler written in Lua runs once the stack has unwound, protected — Lua 5.4.4
/// mishandles scripts that run while an error is being handled (its bug list: "Lua-stack overflow when C stack
/// overflows while handling an error"). Lua's own `debug.traceback`, C that runs no script, runs where the error was
/// raised, as in Lua: `xpcall(f, debug.traceback)` shows the frames that failed. An exhausted time budget is never
/// handed to a handler, and is re-raised. In protected.c.
int clua_sandbox_xpcall(lua_State *L);

/// `placedpcall(f, ...)` [-(n+1), +(1…|3), e], a Lua function for trusted host code: calls `f` as the sandbox's `pcall`
/// does (the time budget's error goes on) and returns `true` and its results, or `false`, what it raised and the
/// place it was raised at — `file:line` of the first frame, from the raise outwards, of a Lua function that is not
/// the host's (nil when none is) — read where it was raised, as busted's handler reads it to place an error that
/// does not say where it comes from (`luastore test`).
int clua_placed_pcall(lua_State *L);

/// Opens the libraries the sandbox is built from. Run it with `lua_pcall`: it may raise on memory exhaustion.
static inline int clua_open_libraries(lua_State *L) {
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    /* (`random` and `randomseed` share their generator's state, their first upvalue: 4 words of 64 bits) */
    if (lua_getfield(L, -1, "random") == LUA_TFUNCTION && lua_getupvalue(L, -1, 1) != NULL) {
        if (lua_type(L, -1) == LUA_TUSERDATA && lua_rawlen(L, -1) == 4 * sizeof(uint64_t)) {
            clua_guard(L)->random = (uint64_t *)lua_touserdata(L, -1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
    luaL_requiref(L, LUA_COLIBNAME, luaopen_coroutine, 1);
    luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 1); /* (the prelude gives scripts its clock and environment, or nothing) */
    luaL_requiref(L, LUA_DBLIBNAME, luaopen_debug, 1); /* (the prelude keeps `traceback` and removes the rest) */
    lua_pushcfunction(L, clua_sandbox_traceback); /* (Lua's, leaving the prelude's frames out) */
    lua_setfield(L, -2, "traceback");
    lua_pushcfunction(L, clua_sandbox_getinfo); /* (Lua's, over the frames a script is shown: the prelude hands it on) */
    lua_setfield(L, -2, "scriptgetinfo");
    clua_guard(L)->traceback = clua_sandbox_traceback;
    lua_settop(L, 0);
    return 0;
}

/// Copies the state of `math.random`'s generator into `words` (what it draws next follows from it alone); returns
/// 0 where the generator was not found (then nothing is copied).
static inline int clua_random_state(lua_State *L, uint64_t words[4]) {
    const uint64_t *random = clua_guard(L)->random;
    if (random == NULL) return 0;
    memcpy(words, random, 4 * sizeof(uint64_t));
    return 1;
}

/// Sets the state of `math.random`'s generator (as `clua_random_state` gave it); returns 0 where it was not found.
static inline int clua_set_random_state(lua_State *L, const uint64_t words[4]) {
    uint64_t *random = clua_guard(L)->random;
    if (random == NULL) return 0;
    memcpy(random, words, 4 * sizeof(uint64_t));
    return 1;
}

/// The registry field holding the environment `os.getenv` reads where the clock is recorded (a table of strings,
/// or absent: nothing set).
#define CLUA_ENVIRONMENT_FIELD "luakit.environment"

/// [-0, +0, e] Replaces the global `os` (and `package.loaded`'s) with the sandbox's: with `recorded` (argument 1, a
/// boolean), `time`, `clock`, `date` and `getenv` read the guard's recorded clock and the environment the host set;
/// without, Lua's own (the real clock and the process's environment). Either way `difftime` is Lua's, and `exit`,
/// `execute`, `remove`, `rename`, `tmpname` and `setlocale` raise, naming themselves. In clock.c.
int clua_open_os(lua_State *L);

/// Creates a VM whose allocator and hook report to `g`; NULL when even that fails. With `CLUA_ENFORCE_WATCHDOG`
/// (if available: the watchdog runs and its `SIGURG` handler is in place) the watchdog watches the threads its
/// calls run on; otherwise the count hook is set. In budget.c.
lua_State *clua_newstate(CLuaGuard *g);

/// Closes the VM. In budget.c.
void clua_closestate(CLuaGuard *g);

#endif
