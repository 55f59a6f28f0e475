// The sandbox's protected calls: `pcall` and `xpcall` that let the time budget's error through, coroutines'
// resume, wrap and close that do the same, and argument errors named as Lua names them.
#include "clua_guard.h"
#include <string.h>

// MARK: Argument errors

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

// MARK: A call placed where it raised (host code)

/// The message handler of `placedpcall`, run where the error was raised: the error and the place of the first frame
/// of a Lua function that is not the host's (a chunk named `host:…`), `file:line`, or nil, in a list.
static int placed_handler(lua_State *L) {
    lua_settop(L, 1);
    lua_Debug frame;
    for (int level = 1; lua_getstack(L, level, &frame); level++) {
        if (!lua_getinfo(L, "Sl", &frame)) break;
        if (frame.currentline <= 0 || strcmp(frame.what, "C") == 0 || strncmp(frame.short_src, "host:", 5) == 0) continue;
        lua_pushfstring(L, "%s:%d", frame.short_src, frame.currentline);
        break;
    }
    lua_settop(L, 2);
    lua_createtable(L, 2, 0);
    lua_insert(L, 1);
    lua_rawseti(L, 1, 2);
    lua_rawseti(L, 1, 1);
    return 1;
}

int clua_placed_pcall(lua_State *L) {
    luaL_checkany(L, 1);
    int arguments = lua_gettop(L) - 1;
    lua_pushcfunction(L, placed_handler);
    lua_insert(L, 1); /* [handler, f, args...] */
    int status = lua_pcall(L, arguments, LUA_MULTRET, 1);
    CLuaGuard *g = clua_guard(L);
    if (g->timedOut) return clua_raise_budget_exceeded(L, g);
    if (status == LUA_OK) {
        lua_pushboolean(L, 1);
        lua_replace(L, 1);
        return lua_gettop(L);
    }
    lua_pushboolean(L, 0);
    if (status == LUA_ERRRUN && lua_type(L, -2) == LUA_TTABLE) { /* what the handler made */
        lua_rawgeti(L, -2, 1);
        lua_rawgeti(L, -3, 2);
        return 3;
    }
    lua_insert(L, -2); /* (a memory error, or one in the handler: no place) */
    return 2;
}

/// A function `coroutine.wrap` made (upvalue 1: Lua's `coroutine.close`, 2: the coroutine): resumes the coroutine as
/// the sandbox's `resume` does, called directly rather than through a call of the Lua API, so that each nesting of
/// wrapped coroutines takes as much of Lua's C stack as Lua's own `wrap` does. An error is raised as lcorolib.c's
/// `auxwrap` raises it: a dead coroutine's to-be-closed variables closed first (by Lua's `close`, nested at most
/// `CLUA_CLOSE_DEPTH` deep, as the sandbox's `coroutine.close`), and a message given the caller's position.
static int sandbox_wrapped(lua_State *L) {
    lua_State *co = lua_tothread(L, lua_upvalueindex(2));
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_insert(L, 1);
    int results = clua_sandbox_resume(L); /* [co, true, results...] or [co, false, error] */
    if (lua_toboolean(L, -results)) return results - 1;
    int status = lua_status(co);
    if (status != LUA_OK && status != LUA_YIELD) { /* an error in the coroutine: it is dead */
        CLuaGuard *g = clua_guard(L);
        if (g->closeDepth >= CLUA_CLOSE_DEPTH) {
            return luaL_error(L, "coroutine.close: nested more than %d deep (deeper chains overflow Lua 5.4.4's C stack)",
                              CLUA_CLOSE_DEPTH);
        }
        g->closeDepth++;
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_pushvalue(L, lua_upvalueindex(2));
        int closing = lua_pcall(L, 1, 2, 0);
        g->closeDepth--;
        if (closing != LUA_OK) return lua_error(L); /* (a spent budget too: it stays spent) */
        if (!lua_toboolean(L, -2)) lua_copy(L, -1, -3); /* what closing it raised, or the error itself */
        lua_pop(L, 2);
    }
    if (status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

int clua_sandbox_wrap(lua_State *L) {
    if (lua_type(L, 1) != LUA_TFUNCTION) return clua_type_error(L, 1, "function", "coroutine.wrap");
    lua_settop(L, 1);
    lua_State *co = lua_newthread(L);
    lua_pushvalue(L, 1);
    lua_xmove(L, co, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, -2);
    lua_pushcclosure(L, sandbox_wrapped, 2);
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
    lua_xmove(co, L, 1); /* the error (moving nothing when a coroutine resumes itself: `co` is `L`) */
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
}

int clua_sandbox_close(lua_State *L) {
    CLuaGuard *g = clua_guard(L);
    // Lua's refusals first, raised here as lcorolib.c raises them (at the script's line, naming 'close'): the
    // protected call below would take both the position and the name away.
    lua_State *co = lua_tothread(L, 1);
    if (co == NULL) { /* (named as a script called it, or by its library's name when nothing names it: `pcall(coroutine.close, 1)`) */
        lua_Debug self;
        const char *name = lua_getstack(L, 0, &self) && lua_getinfo(L, "n", &self) && self.name != NULL ? self.name : "coroutine.close";
        const char *type = luaL_getmetafield(L, 1, "__name") == LUA_TSTRING ? lua_tostring(L, -1)
                         : lua_type(L, 1) == LUA_TNONE ? "no value" : luaL_typename(L, 1);
        return luaL_error(L, "bad argument #1 to '%s' (thread expected, got %s)", name, type);
    }
    if (co == L) return luaL_error(L, "cannot close a running coroutine");
    lua_Debug frame;
    if (lua_status(co) == LUA_OK && lua_getstack(co, 0, &frame)) return luaL_error(L, "cannot close a normal coroutine");
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
