// Each call's time budget: a VM made and closed, a call begun and ended (its deadline published for the watchdog,
// watchdog.c), what a call has spent (CPU time, bounded by the wall clock), budgets restarted, excluded and
// accounted per plugin (`call_within`). docs/design.md, "Budgets", says why it counts this way.
#include "guard_private.h"
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

lua_State *clua_newstate(CLuaGuard *g) {
    lua_State *L = lua_newstate(clua_allocate, g);
    if (L == NULL) {
        clua_free_slabs(g);
        return NULL;
    }
    *(CLuaGuard **)lua_getextraspace(L) = g;
    g->state = L;
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG &&
        !(clua_watchdog_available() && g->budgetNanos > 0 && clua_watchdog_ready())) {
        g->enforcement = CLUA_ENFORCE_COUNT_HOOK;
    }
    if (g->enforcement == CLUA_ENFORCE_COUNT_HOOK) lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, g->hookInterval);
    lua_gc(L, LUA_GCINC, 0, 0, 0);
    return L;
}

void clua_closestate(CLuaGuard *g) {
    if (g->state != NULL) lua_close(g->state);
    g->state = NULL;
    clua_free_slabs(g);
}

/// The hook between calls: none under the watchdog, the count hook at its normal rate otherwise.
static void set_resting_hook(lua_State *L, CLuaGuard *g) {
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG) lua_sethook(L, NULL, 0, 0);
    else lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, g->hookInterval);
}

/// [-0, +0, -] Sets the deadline of `g` (whose call runs on this thread) and publishes its thread's: the
/// earliest among the calls under the watchdog running there (usually this one alone; more when one VM's call
/// calls another's).
static void set_deadline(CLuaGuard *g, int64_t deadline) {
    store_deadline(g, deadline);
    WatchedThread *w = clua_watched_this_thread;
    if (w == NULL) return;
    int64_t earliest = 0;
    for (CLuaGuard *r = clua_running_on_this_thread; r != NULL; r = r->outerRunning) {
        int64_t d = r->deadlineNanos;
        if (d != 0 && r->enforcement == CLUA_ENFORCE_WATCHDOG && (earliest == 0 || d < earliest)) earliest = d;
    }
    __atomic_store_n(&w->deadline, earliest, __ATOMIC_RELAXED);
}

/// The calling thread's CPU time in nanoseconds; 0 when it cannot be read.
static int64_t thread_cpu_nanos(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/// [-0, +0, -] Starts the running call's budget at `now`: nothing counted, the first look after a quarter of it.
/// Returns the deadline of that look. (Under the count hook, which slows every instruction anyway, the CPU clock
/// is read now; under the watchdog, the first look finds a baseline in the watchdog's samples.)
static int64_t start_budget(CLuaGuard *g, int64_t now) {
    g->budgetStartNanos = now;
    g->budgetCountedNanos = 0;
    g->budgetCPUMarkNanos = g->enforcement == CLUA_ENFORCE_COUNT_HOOK ? thread_cpu_nanos() : 0;
    return now + g->budgetNanos / BUDGET_FIRST_LOOK_SHARE;
}

/// What the running call (its budget started at `start`) has spent by `now`, when the thread's CPU clock reads
/// `cpu` and nothing was counted yet: the CPU time since the watchdog's last sample of this thread (which may hold
/// some of the time before the call), and for the time between the start and a sample taken after it, the wall
/// clock — or, when the sample before that one was taken before the start, the CPU time between the two samples
/// if that is less (a watchdog kept from running on a loaded machine samples late: the thread may have waited
/// for a processor all that while). Never less than the call ran, and never more than the wall clock since the start.
static int64_t first_count(int64_t start, int64_t now, int64_t cpu) {
    int64_t wall = now - start;
    WatchedThread *w = clua_watched_this_thread;
    if (w == NULL) return wall;
    uint64_t before = __atomic_load_n(&w->sampleSequence, __ATOMIC_ACQUIRE);
    int64_t sampleWall = __atomic_load_n(&w->sampleWall, __ATOMIC_RELAXED);
    int64_t sampleCPU = __atomic_load_n(&w->sampleCPU, __ATOMIC_RELAXED);
    int64_t earlierWall = __atomic_load_n(&w->earlierWall, __ATOMIC_RELAXED);
    int64_t earlierCPU = __atomic_load_n(&w->earlierCPU, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    uint64_t after = __atomic_load_n(&w->sampleSequence, __ATOMIC_RELAXED);
    if (before != after || (before & 1) != 0 || sampleWall == 0 || sampleWall > now || sampleCPU > cpu) return wall;
    int64_t untilSample = 0;
    if (sampleWall > start) {
        untilSample = sampleWall - start;
        if (earlierWall != 0 && earlierWall <= start && earlierCPU <= sampleCPU && sampleCPU - earlierCPU < untilSample) {
            untilSample = sampleCPU - earlierCPU;
        }
    }
    int64_t used = cpu - sampleCPU + untilSample;
    return used < wall ? used : wall;
}

int clua_budget_spent(lua_State *L, CLuaGuard *g, int64_t now) {
    if (g->budgetNanos <= 0) return 1;
    int64_t cpu = thread_cpu_nanos();
    if (cpu <= 0) return now >= g->budgetStartNanos + g->budgetNanos; /* (no CPU clock: the wall clock's budget) */
    if (g->budgetCPUMarkNanos == 0) g->budgetCountedNanos += first_count(g->budgetStartNanos, now, cpu);
    else g->budgetCountedNanos += cpu - g->budgetCPUMarkNanos;
    g->budgetCPUMarkNanos = cpu;
    int64_t backstop = g->budgetStartNanos + CLUA_WALL_BACKSTOP * g->budgetNanos;
    if (g->budgetCountedNanos >= g->budgetNanos || now >= backstop) return 1;
    int64_t next = now + (g->budgetNanos - g->budgetCountedNanos);
    set_deadline(g, next < backstop ? next : backstop);
    // The hook the watchdog's signal set to fire on every instruction rests again (the handler checks the
    // deadline, so it cannot set it again for the new one); the count hook keeps its rate.
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG && !g->countingInstructions && lua_gethookmask(L) != 0 &&
        lua_gethook(L) != clua_interrupt_hook) {
        lua_sethook(L, NULL, 0, 0);
    }
    return 0;
}

void clua_begin_call(lua_State *L, CLuaGuard *g) {
    (void)L;
    if (g->callDepth++ > 0) return;
    g->timedOut = 0;
    g->memoryRefused = 0;
    g->failureLine = 0;
    g->failureSource[0] = '\0';
    g->outerRunning = clua_running_on_this_thread;
    clua_running_on_this_thread = g;
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG) {
        WatchedThread *w = clua_this_thread_watch();
        if (w != NULL) {
            __atomic_store_n(&w->callsBegun, w->callsBegun + 1, __ATOMIC_RELAXED);
        } else { // (no memory for a watch: this VM counts instructions from now on, as without the watchdog)
            g->enforcement = CLUA_ENFORCE_COUNT_HOOK;
            lua_sethook(g->state, clua_budget_hook, LUA_MASKCOUNT, g->hookInterval);
        }
    }
    int64_t deadline = g->budgetNanos > 0 ? start_budget(g, clua_now_nanos()) : 0;
    set_deadline(g, deadline);
    // (A watchdog that looks within a poll of the deadline anyway is not woken: as while it polls.)
    if (deadline != 0) {
        wake_watchdog_if_late(deadline);
    }
}

void clua_end_call(lua_State *L, CLuaGuard *g) {
    if (--g->callDepth > 0) return;
    set_deadline(g, 0);
    clua_running_on_this_thread = g->outerRunning;
    g->outerRunning = NULL;
    // The handler runs on this thread, so once the deadline is 0 and the guard is off the chain it cannot
    // set the hook again; whatever it set before is removed here.
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (g->countingInstructions) {
        if (g->timedOut) lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, 1);
    } else if (g->enforcement == CLUA_ENFORCE_WATCHDOG ? lua_gethookmask(L) != 0 : g->timedOut) {
        set_resting_hook(L, g);
    }
}

/// The monotonic clock, read cheaply (the kernel's last tick, a fraction of the precise clock's cost), rounded up by one
/// tick, so a deadline counted from it is never earlier than one counted from the precise clock — at most one
/// tick (1–4 ms) later. For per-step budgets restarted many times a second.
static int64_t coarse_now_rounded_up(void) {
    // Found once; VMs on other threads may find it at the same time (the same value): read and written atomically.
    static int64_t cachedResolution = -1;
    int64_t resolution = __atomic_load_n(&cachedResolution, __ATOMIC_RELAXED);
    if (resolution == -1) {
        struct timespec res;
        resolution = clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 ? (int64_t)res.tv_sec * 1000000000 + res.tv_nsec : -2;
        __atomic_store_n(&cachedResolution, resolution, __ATOMIC_RELAXED);
    }
    struct timespec ts;
    if (resolution < 0 || clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return clua_now_nanos();
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + resolution;
}

void clua_restart_budget_now(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    if (g->callDepth == 0 || g->timedOut || g->budgetNanos <= 0) return;
    set_deadline(g, start_budget(g, coarse_now_rounded_up()));
    // A hook the handler set for the old deadline (which had just passed) would otherwise stay until the call
    // ends; the handler checks the deadline, so it cannot set it again for the new one.
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG && !g->countingInstructions && lua_gethookmask(L) != 0) {
        lua_sethook(L, NULL, 0, 0);
    }
}

void clua_recover_budget(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    if (g->callDepth == 0 || !g->timedOut) return;
    g->timedOut = 0;
    g->failureLine = 0;
    g->failureSource[0] = '\0';
    if (g->budgetNanos > 0) set_deadline(g, start_budget(g, coarse_now_rounded_up()));
    // The spent budget set the hook to fire on every instruction; a running call's hook is none under the
    // watchdog, the count hook at its normal rate otherwise (when instructions are counted it fires on every
    // one anyway).
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (g->countingInstructions) return;
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG) lua_sethook(L, NULL, 0, 0);
    else lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, g->hookInterval);
}

void clua_budget_exclude(lua_State *L, int64_t nanos) {
    CLuaGuard *g = clua_guard(L);
    if (g->callDepth == 0 || g->timedOut || g->budgetNanos <= 0 || nanos <= 0) return;
    g->budgetStartNanos += nanos;
}

int clua_restart_budget(lua_State *L) {
    clua_restart_budget_now(L);
    // A trusted loop's step (not a run's action, which restarts through the C above at a dispatch's pace): its
    // baseline is the CPU clock read now, not the watchdog's last sample, which a loaded machine can leave behind
    // the steps before it (whose CPU time would then count against this one).
    CLuaGuard *g = clua_guard(L);
    if (g->callDepth > 0 && !g->timedOut && g->budgetNanos > 0 && g->budgetCPUMarkNanos == 0) {
        g->budgetCPUMarkNanos = thread_cpu_nanos();
    }
    return 0;
}

/// `within` times one call in this many (reading the clock twice costs about what a short call does).
#define WITHIN_SAMPLE 16

/// What `within` counts for one origin of code (`newaccount()`, read by `readaccount`): a full userdata.
typedef struct WithinAccount {
    int64_t begun, returned, nanoseconds, timed, allocations;
} WithinAccount;

static const char *const ACCOUNT = "luastore within account";

int clua_new_account(lua_State *L) {
    WithinAccount *account = lua_newuserdatauv(L, sizeof(WithinAccount), 0);
    memset(account, 0, sizeof(WithinAccount));
    luaL_setmetatable(L, ACCOUNT);
    return 1;
}

int clua_read_account(lua_State *L) {
    const WithinAccount *account = luaL_checkudata(L, 1, ACCOUNT);
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, account->begun);
    lua_setfield(L, -2, "begun");
    lua_pushinteger(L, account->returned);
    lua_setfield(L, -2, "returned");
    lua_pushinteger(L, account->nanoseconds);
    lua_setfield(L, -2, "nanoseconds");
    lua_pushinteger(L, account->timed);
    lua_setfield(L, -2, "timed");
    lua_pushinteger(L, account->allocations);
    lua_setfield(L, -2, "allocations");
    return 1;
}

void clua_define_accounts(lua_State *L) {
    luaL_newmetatable(L, ACCOUNT);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
}

int clua_call_within(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    // (Trusted callers only, once per call of a plugin: the size stands in for `luaL_checkudata`'s registry lookup.)
    if (lua_type(L, 1) != LUA_TUSERDATA || lua_rawlen(L, 1) != sizeof(WithinAccount)) luaL_typeerror(L, 1, "account");
    WithinAccount *account = lua_touserdata(L, 1);
    lua_Integer milliseconds = luaL_checkinteger(L, 2), bytes = luaL_checkinteger(L, 3);
    luaL_checktype(L, 4, LUA_TFUNCTION);
    int64_t outerDeadline = load_deadline(g), outerBudget = g->budgetNanos;
    int64_t outerStart = g->budgetStartNanos, outerCounted = g->budgetCountedNanos, outerMark = g->budgetCPUMarkNanos;
    size_t outerLimit = g->bytesLimit;
    int shortened = 0, limited = 0;
    int timed = (++account->begun % WITHIN_SAMPLE) == 1;
    int64_t started = timed || milliseconds > 0 ? clua_now_nanos() : 0, allocations = g->allocationCount;
    if (milliseconds > 0 && g->callDepth > 0 && !g->timedOut) {
        int64_t budget = (int64_t)milliseconds * 1000000;
        // (Only a budget that ends before the outer one could — it counts CPU time, never faster than the wall
        // clock — is a shorter one; otherwise the outer budget, whose accounting goes on, governs.)
        if (outerDeadline == 0 || started + budget < outerStart + outerBudget) {
            shortened = 1;
            g->budgetNanos = budget; // (what the timeout's message names)
            int64_t deadline = start_budget(g, started);
            set_deadline(g, deadline);
            wake_watchdog_if_late(deadline);
        }
    }
    size_t room = outerLimit > g->bytesInUse ? outerLimit - g->bytesInUse : 0;
    if (bytes > 0 && (size_t)bytes < room) {
        limited = 1;
        g->bytesLimit = g->bytesInUse + (size_t)bytes;
    }
    int arguments = lua_gettop(L) - 4;
    if (shortened || limited) { // (limits to put back, even when it fails)
        int status = lua_pcall(L, arguments, LUA_MULTRET, 0);
        g->bytesLimit = outerLimit;
        if (shortened) {
            g->budgetNanos = outerBudget;
            g->budgetStartNanos = outerStart;
            g->budgetCountedNanos = outerCounted;
            g->budgetCPUMarkNanos = outerMark;
            if (!g->timedOut) set_deadline(g, outerDeadline);
        }
        if (status != LUA_OK) return lua_error(L); // (the same error, on: a spent budget stays spent)
    } else {
        lua_call(L, arguments, LUA_MULTRET); // (a failure leaves the call begun and not returned: the count of failures)
    }
    if (timed) {
        account->nanoseconds += clua_now_nanos() - started;
        account->timed++;
    }
    account->allocations += g->allocationCount - allocations;
    account->returned++;
    return lua_gettop(L) - 3;
}

void clua_count_instructions(lua_State *L, CLuaGuard *g, int on) {
    g->countingInstructions = on != 0;
    if (on) lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, 1);
    else set_resting_hook(L, g);
}
