// Ctrl-C as the stand-alone `lua` takes it (lua.c's `laction`): the interrupt sets a hook on the running VM's main
// thread that raises "interrupted!" at the script's next instruction — an error as any other (a `pcall` catches it),
// after which the hook the budget needs is back — and puts the signal's default action back, so a second Ctrl-C
// ends the process. With no call running, the interrupt ends the process at once.
#include "guard_private.h"
#include <errno.h>
#include <signal.h>

/// The thread the VM's calls run on: an interrupt delivered to another thread of the process is passed on to it.
static pthread_t interrupt_target;

void clua_interrupt_hook(lua_State *L, lua_Debug *ar) {
    CLuaGuard *g = clua_guard(L);
    if (g->timedOut) { // (a spent budget wins: its hook raises on every instruction)
        clua_budget_hook(L, ar);
        return;
    }
    if (g->countingInstructions) lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, 1);
    else if (g->enforcement == CLUA_ENFORCE_COUNT_HOOK) lua_sethook(L, clua_budget_hook, LUA_MASKCOUNT, g->hookInterval);
    else lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void on_interrupt(int signal) {
    int saved = errno;
    if (!pthread_equal(pthread_self(), interrupt_target)) {
        pthread_kill(interrupt_target, signal);
    } else {
        struct sigaction standard;
        memset(&standard, 0, sizeof standard);
        standard.sa_handler = SIG_DFL;
        sigemptyset(&standard.sa_mask);
        sigaction(signal, &standard, NULL);
        CLuaGuard *g = clua_running_on_this_thread;
        if (g == NULL) {
            raise(signal);
        } else {
            __atomic_signal_fence(__ATOMIC_SEQ_CST);
            lua_sethook(g->state, clua_interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
        }
    }
    errno = saved;
}

int clua_interrupt_on(int signal) {
    interrupt_target = pthread_self();
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART; // (as `signal` installs it for lua: a read under way goes on)
    return sigaction(signal, &action, NULL);
}
