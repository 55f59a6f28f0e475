// What the watchdog (watchdog.c) and the calls it watches (budget.c) share: the limits' constants, a thread's
// watch, the thread-local chains the signal handler reads, and the three calls between the two files.
#ifndef CLUA_GUARD_PRIVATE_H
#define CLUA_GUARD_PRIVATE_H

#include "clua_guard.h"
#include <pthread.h>
#include <stdint.h>
#include <time.h>

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
extern _Thread_local CLuaGuard *clua_running_on_this_thread __attribute__((tls_model("initial-exec")));

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

/// This thread's watch, once a call under the watchdog ran on it. (Initial-exec, as `clua_running_on_this_thread`.)
extern _Thread_local WatchedThread *clua_watched_this_thread __attribute__((tls_model("initial-exec")));

static inline int64_t load_deadline(const CLuaGuard *g) {
    return __atomic_load_n(&g->deadlineNanos, __ATOMIC_RELAXED);
}

static inline void store_deadline(CLuaGuard *g, int64_t value) {
    __atomic_store_n(&g->deadlineNanos, value, __ATOMIC_RELAXED);
}

/// Whether the watchdog runs (started now, the first time) and its handler is in place.
int clua_watchdog_ready(void);
/// The calling thread's watch (made and registered the first time); NULL when there is no memory for one.
WatchedThread *clua_this_thread_watch(void);
/// Wakes the watchdog for a call with this deadline, unless it was woken meanwhile or looks soon enough.
void clua_wake_watchdog(int64_t deadline);

/// When the watchdog looks next (monotonic nanoseconds; 0 while it is awake or has been woken). Read without the
/// lock, written under it (watchdog.c).
extern int64_t clua_watchdog_looks_at;

/// Wakes the watchdog when it would notice `deadline` more than a poll late; a watchdog that looks within a poll
/// of it anyway is not woken (as while it polls), and then no lock is taken.
static inline void wake_watchdog_if_late(int64_t deadline) {
    int64_t looksAt = __atomic_load_n(&clua_watchdog_looks_at, __ATOMIC_RELAXED);
    if (looksAt != 0 && deadline + WATCHDOG_POLL_NANOS < looksAt) clua_wake_watchdog(deadline);
}

#endif
