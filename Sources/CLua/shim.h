// Lua's C API macros as functions Swift can call. One line each, no logic: the comment names the macro.
#ifndef CLUA_SHIM_H
#define CLUA_SHIM_H

#include <lua5.4/lua.h>
#include <lua5.4/lauxlib.h>
#include <lua5.4/lualib.h>

/// lua_pop
static inline void clua_pop(lua_State *L, int n) { lua_pop(L, n); }
/// lua_pcall
static inline int clua_pcall(lua_State *L, int nargs, int nresults, int msgh) { return lua_pcall(L, nargs, nresults, msgh); }
/// lua_tonumber
static inline lua_Number clua_tonumber(lua_State *L, int index) { return lua_tonumber(L, index); }
/// lua_tointeger
static inline lua_Integer clua_tointeger(lua_State *L, int index) { return lua_tointeger(L, index); }
/// lua_pushcfunction
static inline void clua_pushcfunction(lua_State *L, lua_CFunction f) { lua_pushcfunction(L, f); }
/// lua_insert
static inline void clua_insert(lua_State *L, int index) { lua_insert(L, index); }
/// lua_remove
static inline void clua_remove(lua_State *L, int index) { lua_remove(L, index); }
/// lua_gc (variadic in C)
static inline int clua_gc(lua_State *L, int what, int data) { return lua_gc(L, what, data); }
/// lua_gc(L, LUA_GCINC, pause, stepmul, 0): the incremental collector; returns the previous mode
static inline int clua_gc_incremental(lua_State *L, int pause, int stepmul) { return lua_gc(L, LUA_GCINC, pause, stepmul, 0); }
/// lua_gc(L, LUA_GCGEN, minormul, majormul): the generational collector; returns the previous mode
static inline int clua_gc_generational(lua_State *L, int minormul, int majormul) { return lua_gc(L, LUA_GCGEN, minormul, majormul); }
/// LUA_REGISTRYINDEX
static inline int clua_registryindex(void) { return LUA_REGISTRYINDEX; }

#endif
