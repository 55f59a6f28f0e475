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
#include "guard_private.h"
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CLUA_UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CLUA_UNDER_TSAN 1
#endif

// Initial-exec: the signal handler reads it, and static TLS is never allocated lazily (no malloc in a handler,
// even when this code ends up in a shared library).
_Thread_local CLuaGuard *clua_running_on_this_thread __attribute__((tls_model("initial-exec")));

/// This thread's watch, once a call under the watchdog ran on it. (Initial-exec, as `clua_running_on_this_thread`.)
_Thread_local WatchedThread *clua_watched_this_thread __attribute__((tls_model("initial-exec")));
/// Its destructor takes a watch off the registry as its thread exits.
static pthread_key_t watch_key;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t registry_changed;
static WatchedThread *registry_head;
static int registry_count;
static int watchdog_started;
/// When the watchdog looks next (monotonic nanoseconds; 0 while it is awake or has been woken). A call whose
/// deadline is more than a poll beyond it wakes it. Read without the lock.
int64_t clua_watchdog_looks_at;
static struct sigaction previous_action;

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
        for (CLuaGuard *g = clua_running_on_this_thread; g != NULL; g = g->outerRunning) {
            int64_t deadline = g->deadlineNanos;
            if (deadline != 0 && now >= deadline && !g->timedOut) {
                lua_State *running = g->running != NULL ? g->running : g->state;
                // (Setting a hook marks every Lua frame on the stack: a signal per tick while one is set already,
                // 500,000 frames deep, took all the thread's time — in Lua's own stack reallocation, where no hook
                // fires — and the script never reached the hook. One is enough until it fires.)
                if (lua_gethook(running) != clua_budget_hook || lua_gethookcount(running) != 1) {
                    lua_sethook(running, clua_budget_hook, LUA_MASKCOUNT, 1);
                }
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
        __atomic_store_n(&clua_watchdog_looks_at, wake, __ATOMIC_SEQ_CST);
        /* (A call that began after this look and before the time was published read the earlier time, and did
           not wake the watchdog: seen now. While calls keep coming the wait is one poll, and nothing is checked.) */
        if (quietLooks > 0 && calls_unseen()) continue;
        struct timespec until = { .tv_sec = wake / 1000000000, .tv_nsec = wake % 1000000000 };
        pthread_cond_timedwait(&registry_changed, &registry_lock, &until);
        __atomic_store_n(&clua_watchdog_looks_at, 0, __ATOMIC_SEQ_CST);
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
    if (clua_watched_this_thread == w) clua_watched_this_thread = NULL;
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
int clua_watchdog_ready(void) {
    pthread_mutex_lock(&registry_lock);
    // A VM made after the host replaced the handler would never be stopped: it uses the count hook instead.
    int ready = start_watchdog() && handler_in_place();
    pthread_mutex_unlock(&registry_lock);
    return ready;
}

/// The calling thread's watch: made, registered and set to be taken off at the thread's exit the first time a
/// call under the watchdog runs on it. NULL when there is no memory for one.
WatchedThread *clua_this_thread_watch(void) {
    WatchedThread *w = clua_watched_this_thread;
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
    clua_watched_this_thread = w;
    return w;
}

int clua_watched_threads(void) {
    pthread_mutex_lock(&registry_lock);
    int count = registry_count;
    pthread_mutex_unlock(&registry_lock);
    return count;
}

/// Wakes the watchdog for a call with this deadline, unless it was woken meanwhile or looks soon enough.
void clua_wake_watchdog(int64_t deadline) {
    pthread_mutex_lock(&registry_lock);
    int64_t looksAt = __atomic_load_n(&clua_watchdog_looks_at, __ATOMIC_RELAXED);
    if (looksAt != 0 && deadline + WATCHDOG_POLL_NANOS < looksAt) {
        __atomic_store_n(&clua_watchdog_looks_at, 0, __ATOMIC_RELAXED);
        pthread_cond_broadcast(&registry_changed);
    }
    pthread_mutex_unlock(&registry_lock);
}
