// The time budget's watchdog, and the per-call arming it relies on.
//
// Lua 5.4 traps every instruction while any hook is set (a count hook of 1,000 still makes the interpreter
// call into ldebug.c once per instruction), which made every script ≈ 20–30 % slower just to check a clock
// that almost never runs out. So by default no hook is set. Each top-level call publishes its deadline in its
// thread's watch (a `WatchedThread`: the earliest deadline among the calls running on that thread, made the
// first time a VM runs a call there); one watchdog thread per process sleeps until the earliest deadline it
// knows of, and looks for new calls every `WATCHDOG_POLL_NANOS` while VMs are busy; each look that finds no
// call doubles the wait before the next, up to `WATCHDOG_REST_NANOS`, so idle VMs cost next to nothing (a
// handful of wake-ups in the seconds after the last call, then one every two seconds). A look reads one watch
// per thread that runs VMs, however many VMs there are: 10,000 stores sharing a pool of two threads cost two.
// (With a record per VM, each look and each VM made walked all of them.) The watchdog publishes when it means
// to look next, and a call whose
// deadline it would otherwise notice more than a poll late wakes it (the first call after a quiet spell); when
// a call overruns, it sends the VM's thread `SIGURG`, whose
// handler, on that thread, sets a count hook of 1 with `lua_sethook` — the one Lua function made to be called
// from a signal handler (lua.c stops scripts on Ctrl-C the same way). The hook then raises at the script's next
// instruction and keeps raising, as before, so nothing can catch it.
//
// Why SIGURG: it is ignored by default (a stray one is harmless), debuggers and runtimes leave it alone, and
// hardly any program uses it (Go preempts goroutines with it for the same reasons). A handler the host had
// installed before still receives every SIGURG that is not the watchdog's.
//
// Memory safety: the watchdog never reads a guard. It reads the watches under the registry lock, and a thread's
// watch leaves the registry (on that thread, as it exits) before it is freed. The handler touches only the
// guards whose calls are running on its own thread (a thread-local chain, set and cleared by that thread), so it
// never sees a guard that is gone.
#include "clua_guard.h"
#include <string.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CLUA_UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CLUA_UNDER_TSAN 1
#endif

/// How long the watchdog sleeps before looking for calls it has not seen yet. A call that starts right after
/// a look is noticed at most this late; its deadline is honoured exactly unless the budget is shorter.
#define WATCHDOG_POLL_NANOS 20000000LL
/// How soon the watchdog signals again a call that is still running past its deadline (its thread may have
/// been inside a C function, which no hook interrupts).
#define WATCHDOG_RESIGNAL_NANOS 5000000LL
/// How long the watchdog waits between looks at most, once quiet. A call that began at the very moment the
/// watchdog published its next look (the two crossed, unseen by each other) is noticed this late at worst.
#define WATCHDOG_REST_NANOS 2000000000LL
/// A call's budget counts the thread's CPU time (`clua_budget_spent`), but never past this many budgets of the
/// wall clock: a thread that gets no CPU at all (a stopped process, a starved machine) still stops.
#define CLUA_WALL_BACKSTOP 5
/// The first look at a call's budget comes after this share of it (1/4): a call that ends before then never
/// reads the CPU clock (a system call), and the time before that look is counted on the wall clock.
#define BUDGET_FIRST_LOOK_SHARE 4

// Initial-exec: the signal handler reads it, and static TLS is never allocated lazily (no malloc in a handler,
// even when this code ends up in a shared library).
static _Thread_local CLuaGuard *running_on_this_thread __attribute__((tls_model("initial-exec")));

/// What the watchdog sees of one thread that runs calls of VMs under it.
typedef struct WatchedThread {
    pthread_t thread;
    int64_t deadline;                 /* the earliest deadline among the calls running on the thread (0: none);
                                         written by the thread only (atomically: the watchdog reads it) */
    uint64_t callsBegun;              /* top-level calls begun on the thread; written by it (atomically) */
    uint64_t callsSeen;               /* `callsBegun` when the watchdog last looked (the watchdog's own) */
    clockid_t cpuClock;               /* the thread's CPU clock (`pthread_getcpuclockid`) */
    int hasCPUClock;
    /* The thread's CPU time as the watchdog last read it, and when (monotonic), under a sequence that is odd
       while they are written (the watchdog writes, the thread reads: `clua_budget_spent`'s baseline). */
    uint64_t sampleSequence;
    int64_t sampleWall;
    int64_t sampleCPU;
    int64_t earlierWall;              /* the sample before it (0: none), which bounds the CPU time spent between */
    int64_t earlierCPU;
    int64_t sampledDeadline;          /* the deadline the last sample was taken for (the watchdog's own): one sample
                                         per deadline, the first look after it was published — near its start */
    struct WatchedThread *next;       /* the registry's list (under its lock) */
    struct WatchedThread *previous;
} WatchedThread;

/// This thread's watch, once a call under the watchdog ran on it. (Initial-exec, as `running_on_this_thread`.)
static _Thread_local WatchedThread *watched_this_thread __attribute__((tls_model("initial-exec")));
/// Its destructor takes a watch off the registry as its thread exits.
static pthread_key_t watch_key;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t registry_changed;
static WatchedThread *registry_head;
static int registry_count;
static int watchdog_started;
/// When the watchdog looks next (monotonic nanoseconds; 0 while it is awake or has been woken). A call whose
/// deadline is more than a poll beyond it wakes it. Read without the lock.
static int64_t watchdog_looks_at;
static struct sigaction previous_action;

static inline int64_t load_deadline(const CLuaGuard *g) {
    return __atomic_load_n(&g->deadlineNanos, __ATOMIC_RELAXED);
}

static inline void store_deadline(CLuaGuard *g, int64_t value) {
    __atomic_store_n(&g->deadlineNanos, value, __ATOMIC_RELAXED);
}

int clua_watchdog_available(void) {
#ifdef CLUA_UNDER_TSAN
    return 0;
#else
    return 1;
#endif
}

// MARK: The signal handler (runs on a VM's thread)

static void forward_to_previous(int signal, siginfo_t *info, void *context) {
    if (previous_action.sa_flags & SA_SIGINFO) {
        if (previous_action.sa_sigaction != NULL) previous_action.sa_sigaction(signal, info, context);
    } else if (previous_action.sa_handler != SIG_IGN && previous_action.sa_handler != SIG_DFL &&
               previous_action.sa_handler != NULL) {
        previous_action.sa_handler(signal);
    }
}

static void on_watchdog_signal(int signal, siginfo_t *info, void *context) {
    int saved = errno;
    if (info != NULL && info->si_code == SI_TKILL && info->si_pid == getpid()) {
        int64_t now = clua_now_nanos();
        for (CLuaGuard *g = running_on_this_thread; g != NULL; g = g->outerRunning) {
            int64_t deadline = g->deadlineNanos;
            if (deadline != 0 && now >= deadline && !g->timedOut) {
                lua_State *running = g->running;
                lua_sethook(running != NULL ? running : g->state, clua_budget_hook, LUA_MASKCOUNT, 1);
            }
        }
    } else {
        forward_to_previous(signal, info, context);
    }
    errno = saved;
}

// MARK: The watchdog thread

/// [registry lock held] Whether a call began on any watched thread since the last look, or is running.
static int calls_since_last_look(void) {
    int busy = 0;
    for (WatchedThread *w = registry_head; w != NULL; w = w->next) {
        uint64_t begun = __atomic_load_n(&w->callsBegun, __ATOMIC_SEQ_CST);
        if (begun != w->callsSeen || __atomic_load_n(&w->deadline, __ATOMIC_RELAXED) != 0) busy = 1;
        w->callsSeen = begun;
    }
    return busy;
}

/// [registry lock held] Whether a call began that the last look has not seen (without marking it seen).
static int calls_unseen(void) {
    for (WatchedThread *w = registry_head; w != NULL; w = w->next) {
        if (__atomic_load_n(&w->callsBegun, __ATOMIC_SEQ_CST) != w->callsSeen) return 1;
    }
    return 0;
}

/// [registry lock held] Reads the CPU clock of a thread that runs a call, for the budget's baseline.
static void sample_cpu(WatchedThread *w, int64_t now) {
    struct timespec ts;
    if (!w->hasCPUClock || clock_gettime(w->cpuClock, &ts) != 0) return;
    uint64_t sequence = __atomic_load_n(&w->sampleSequence, __ATOMIC_RELAXED);
    __atomic_store_n(&w->sampleSequence, sequence + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&w->earlierWall, __atomic_load_n(&w->sampleWall, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    __atomic_store_n(&w->earlierCPU, __atomic_load_n(&w->sampleCPU, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    __atomic_store_n(&w->sampleWall, now, __ATOMIC_RELAXED);
    __atomic_store_n(&w->sampleCPU, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, __ATOMIC_RELAXED);
    __atomic_store_n(&w->sampleSequence, sequence + 2, __ATOMIC_RELEASE);
}

static void *watchdog_main(void *unused) {
    (void)unused;
    pthread_mutex_lock(&registry_lock);
    int quietLooks = 0;
    for (;;) {
        while (registry_count == 0) pthread_cond_wait(&registry_changed, &registry_lock);
        quietLooks = calls_since_last_look() ? 0 : quietLooks + 1;
        // Every poll while calls begin; each quiet look doubles the wait, up to the rest.
        int64_t wait = quietLooks >= 7 ? WATCHDOG_REST_NANOS : WATCHDOG_POLL_NANOS << quietLooks;
        if (wait > WATCHDOG_REST_NANOS) wait = WATCHDOG_REST_NANOS;
        int64_t now = clua_now_nanos();
        int64_t wake = now + wait;
        for (WatchedThread *w = registry_head; w != NULL; w = w->next) {
            int64_t deadline = __atomic_load_n(&w->deadline, __ATOMIC_RELAXED);
            if (deadline == 0) continue;
            if (deadline != w->sampledDeadline) {
                w->sampledDeadline = deadline;
                sample_cpu(w, now);
            }
            if (now >= deadline) {
                pthread_kill(w->thread, SIGURG);
                if (now + WATCHDOG_RESIGNAL_NANOS < wake) wake = now + WATCHDOG_RESIGNAL_NANOS;
            } else if (deadline < wake) {
                wake = deadline;
            }
        }
        __atomic_store_n(&watchdog_looks_at, wake, __ATOMIC_SEQ_CST);
        /* (A call that began after this look and before the time was published read the earlier time, and did
           not wake the watchdog: seen now. While calls keep coming the wait is one poll, and nothing is checked.) */
        if (quietLooks > 0 && calls_unseen()) continue;
        struct timespec until = { .tv_sec = wake / 1000000000, .tv_nsec = wake % 1000000000 };
        pthread_cond_timedwait(&registry_changed, &registry_lock, &until);
        __atomic_store_n(&watchdog_looks_at, 0, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

/// [on an exiting thread: `watch_key`'s destructor] Takes the thread's watch off the registry and frees it.
static void unwatch_thread(void *watch) {
    WatchedThread *w = watch;
    pthread_mutex_lock(&registry_lock);
    if (w->previous != NULL) w->previous->next = w->next;
    else registry_head = w->next;
    if (w->next != NULL) w->next->previous = w->previous;
    registry_count -= 1;
    pthread_mutex_unlock(&registry_lock);
    if (watched_this_thread == w) watched_this_thread = NULL;
    free(w);
}

/// Installs the handler and starts the thread, once. Called with the registry lock held.
static int start_watchdog(void) {
    if (watchdog_started) return 1;
    if (pthread_key_create(&watch_key, unwatch_thread) != 0) return 0;
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&registry_changed, &attributes);
    pthread_condattr_destroy(&attributes);

    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_watchdog_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGURG, &action, &previous_action) != 0) {
        pthread_key_delete(watch_key);
        return 0;
    }

    pthread_attr_t threadAttributes;
    pthread_attr_init(&threadAttributes);
    pthread_attr_setdetachstate(&threadAttributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&threadAttributes, 64 * 1024);
    // The watchdog never handles SIGURG itself: block it (and everything else) there.
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pthread_t thread;
    int status = pthread_create(&thread, &threadAttributes, watchdog_main, NULL);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    pthread_attr_destroy(&threadAttributes);
    if (status != 0) {
        sigaction(SIGURG, &previous_action, NULL);
        pthread_key_delete(watch_key);
        return 0;
    }
    watchdog_started = 1;
    return 1;
}

/// Whether SIGURG still reaches the watchdog's handler (directly, not through one the host installed since).
static int handler_in_place(void) {
    struct sigaction current;
    if (sigaction(SIGURG, NULL, &current) != 0) return 0;
    return (current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == on_watchdog_signal;
}

/// Whether the watchdog runs (started now, the first time) and its handler is in place.
static int watchdog_ready(void) {
    pthread_mutex_lock(&registry_lock);
    // A VM made after the host replaced the handler would never be stopped: it uses the count hook instead.
    int ready = start_watchdog() && handler_in_place();
    pthread_mutex_unlock(&registry_lock);
    return ready;
}

/// The calling thread's watch: made, registered and set to be taken off at the thread's exit the first time a
/// call under the watchdog runs on it. NULL when there is no memory for one.
static WatchedThread *this_thread_watch(void) {
    WatchedThread *w = watched_this_thread;
    if (w != NULL) return w;
    w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    // Threads started from a dispatch or cooperative-pool thread inherit a mask that blocks every signal.
    sigset_t urgent;
    sigemptyset(&urgent);
    sigaddset(&urgent, SIGURG);
    pthread_sigmask(SIG_UNBLOCK, &urgent, NULL);
    w->thread = pthread_self();
    w->hasCPUClock = pthread_getcpuclockid(w->thread, &w->cpuClock) == 0;
    if (pthread_setspecific(watch_key, w) != 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_lock(&registry_lock);
    w->next = registry_head;
    if (registry_head != NULL) registry_head->previous = w;
    registry_head = w;
    registry_count += 1;
    pthread_cond_signal(&registry_changed);
    pthread_mutex_unlock(&registry_lock);
    watched_this_thread = w;
    return w;
}

int clua_watched_threads(void) {
    pthread_mutex_lock(&registry_lock);
    int count = registry_count;
    pthread_mutex_unlock(&registry_lock);
    return count;
}

// MARK: VMs and calls

lua_State *clua_newstate(CLuaGuard *g) {
    lua_State *L = lua_newstate(clua_allocate, g);
    if (L == NULL) {
        clua_free_slabs(g);
        return NULL;
    }
    *(CLuaGuard **)lua_getextraspace(L) = g;
    g->state = L;
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG &&
        !(clua_watchdog_available() && g->budgetNanos > 0 && watchdog_ready())) {
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

/// Wakes the watchdog for a call with this deadline, unless it was woken meanwhile or looks soon enough.
static void wake_watchdog(int64_t deadline) {
    pthread_mutex_lock(&registry_lock);
    int64_t looksAt = __atomic_load_n(&watchdog_looks_at, __ATOMIC_RELAXED);
    if (looksAt != 0 && deadline + WATCHDOG_POLL_NANOS < looksAt) {
        __atomic_store_n(&watchdog_looks_at, 0, __ATOMIC_RELAXED);
        pthread_cond_broadcast(&registry_changed);
    }
    pthread_mutex_unlock(&registry_lock);
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
    WatchedThread *w = watched_this_thread;
    if (w == NULL) return;
    int64_t earliest = 0;
    for (CLuaGuard *r = running_on_this_thread; r != NULL; r = r->outerRunning) {
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
    WatchedThread *w = watched_this_thread;
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
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG && !g->countingInstructions && lua_gethookmask(L) != 0) lua_sethook(L, NULL, 0, 0);
    return 0;
}

void clua_begin_call(lua_State *L, CLuaGuard *g) {
    (void)L;
    if (g->callDepth++ > 0) return;
    g->timedOut = 0;
    g->memoryRefused = 0;
    g->failureLine = 0;
    g->failureSource[0] = '\0';
    g->outerRunning = running_on_this_thread;
    running_on_this_thread = g;
    if (g->enforcement == CLUA_ENFORCE_WATCHDOG) {
        WatchedThread *w = this_thread_watch();
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
        int64_t looksAt = __atomic_load_n(&watchdog_looks_at, __ATOMIC_RELAXED);
        if (looksAt != 0 && deadline + WATCHDOG_POLL_NANOS < looksAt) wake_watchdog(deadline);
    }
}

void clua_end_call(lua_State *L, CLuaGuard *g) {
    if (--g->callDepth > 0) return;
    set_deadline(g, 0);
    running_on_this_thread = g->outerRunning;
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
            int64_t looksAt = __atomic_load_n(&watchdog_looks_at, __ATOMIC_RELAXED);
            if (looksAt != 0 && deadline + WATCHDOG_POLL_NANOS < looksAt) wake_watchdog(deadline);
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

// MARK: Coroutines

int clua_argument_error(lua_State *L, int arg, const char *message, const char *name) {
    lua_Debug ar;
    if (!lua_getstack(L, 0, &ar)) return luaL_error(L, "bad argument #%d (%s)", arg, message); /* (no stack frame) */
    lua_getinfo(L, "n", &ar);
    if (ar.namewhat != NULL && strcmp(ar.namewhat, "method") == 0) {
        arg--; /* (do not count 'self') */
        if (arg == 0) return luaL_error(L, "calling '%s' on bad self (%s)", ar.name, message);
    }
    return luaL_error(L, "bad argument #%d to '%s' (%s)", arg, ar.name != NULL ? ar.name : name, message);
}

int clua_type_error(lua_State *L, int arg, const char *expected, const char *name) {
    const char *actual;
    if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING) actual = lua_tostring(L, -1);
    else if (lua_type(L, arg) == LUA_TLIGHTUSERDATA) actual = "light userdata";
    else actual = luaL_typename(L, arg);
    return clua_argument_error(L, arg, lua_pushfstring(L, "%s expected, got %s", expected, actual), name);
}

// MARK: pcall, xpcall

/// What `pcall` returns once its call ended (at once, or in the continuation after a yield inside it): `true` and
/// the results, or `false` and the error — unless the time budget ran out, which goes on.
static int finish_pcall(lua_State *L, int status, lua_KContext extra) {
    (void)extra;
    CLuaGuard *g = clua_guard(L);
    if (g->timedOut) return clua_raise_budget_exceeded(L, g);
    if (status != LUA_OK && status != LUA_YIELD) {
        lua_pushboolean(L, 0);
        lua_pushvalue(L, -2);
        return 2;
    }
    return lua_gettop(L);
}

int clua_sandbox_pcall(lua_State *L) {
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1); /* [true, f, args...] */
    int status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, finish_pcall);
    return finish_pcall(L, status, 0);
}

/// What `xpcall` returns once its call ended (as `finish_pcall`; the stack holds `[f, handler, true, ...]`). A script's
/// handler (`extra` 0) is called here, once the stack has unwound, protected: if it fails, the error is Lua's "error
/// in error handling". Lua's traceback (`extra` 1) ran where the error was raised.
static int finish_xpcall(lua_State *L, int status, lua_KContext extra) {
    CLuaGuard *g = clua_guard(L);
    if (g->timedOut) return clua_raise_budget_exceeded(L, g); /* (not what a handler made of it) */
    if (status == LUA_OK || status == LUA_YIELD) return lua_gettop(L) - 2;
    if (extra == 0) {
        lua_pushvalue(L, 2);
        lua_insert(L, -2); /* [..., handler, error] */
        if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
            if (g->timedOut) return clua_raise_budget_exceeded(L, g);
            lua_pop(L, 1);
            lua_pushliteral(L, "error in error handling");
        }
    }
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
}

int clua_sandbox_xpcall(lua_State *L) {
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    int traceback = lua_tocfunction(L, 2) == clua_guard(L)->traceback;
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2); /* [f, handler, true, f, args...] */
    int status = lua_pcallk(L, n - 2, LUA_MULTRET, traceback ? 2 : 0, traceback, finish_xpcall);
    return finish_xpcall(L, status, traceback);
}

int clua_sandbox_wrap(lua_State *L) {
    if (lua_type(L, 1) != LUA_TFUNCTION) return clua_type_error(L, 1, "function", "coroutine.wrap");
    lua_settop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 1, 1);
    return 1;
}

int clua_sandbox_resume(lua_State *L) {
    lua_State *co = lua_tothread(L, 1);
    if (co == NULL) return clua_type_error(L, 1, "thread", "coroutine.resume");
    CLuaGuard *g = clua_guard(L);
    int arguments = lua_gettop(L) - 1;
    // (What lcorolib.c's auxresume checks, in its words.)
    if (!lua_checkstack(co, arguments + 1)) {
        lua_pushboolean(L, 0);
        lua_pushliteral(L, "too many arguments to resume");
        return 2;
    }
    lua_xmove(L, co, arguments); /* (lua_resume refuses a coroutine that is running, normal or dead, in Lua's words) */
    lua_State *outer = g->running;
    g->running = co;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    // A coroutine made before the count hook was set, or a budget spent already, gets the hook a running call has.
    if (g->timedOut) lua_sethook(co, clua_budget_hook, LUA_MASKCOUNT, 1);
    else if (lua_gethookmask(L) != 0 && lua_gethookmask(co) == 0) lua_sethook(co, lua_gethook(L), lua_gethookmask(L), lua_gethookcount(L));
    int results = 0;
    int status = lua_resume(co, L, arguments, &results);
    g->running = outer;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (g->timedOut) {
        // The budget ran out inside: the caller stops too (every instruction of it raises from now on).
        lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, 1);
        lua_xmove(co, L, 1);
        return lua_error(L);
    }
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, results + 1)) {
            lua_pop(co, results);
            lua_pushboolean(L, 0);
            lua_pushliteral(L, "too many results to resume");
            return 2;
        }
        lua_pushboolean(L, 1);
        lua_xmove(co, L, results);
        return results + 1;
    }
    lua_pushboolean(L, 0);
    lua_xmove(co, L, 1); /* the error */
    return 2;
}

int clua_sandbox_close(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    if (g->closeDepth >= CLUA_CLOSE_DEPTH) {
        return luaL_error(L, "coroutine.close: nested more than %d deep (deeper chains overflow Lua 5.4.4's C stack)",
                          CLUA_CLOSE_DEPTH);
    }
    g->closeDepth++;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    g->closeDepth--;
    if (status != LUA_OK) return lua_error(L); /* (a spent budget too: it stays spent) */
    return lua_gettop(L);
}