// The sandbox's builtins written in Lua, as scripts see them: C functions, as Lua's own are.
//
// The prelude writes some builtins in Lua (`setmetatable`, `rawset`, `print`, `require`, `io.open`, …). Scripts reach
// each through `builtin(f)`: a C function that calls `f`. So each is what Lua's builtin is — a C function, whose
// caller keeps its frame in a tail call (`return setmetatable(1)` fails at the line that says it), that
// `string.dump` refuses, that a traceback names `[C]: in function 'setmetatable'` — and the prelude's own frames
// never show: its chunks raise with `builtin_error`, which counts levels as `error` does but past these C frames
// (an error "at level 2" is at the line of the script that called the builtin), and the sandbox's tracebacks
// (`clua_traceback`) leave its frames out. `next` and `pairs` are C through and through: a plain table is walked by
// Lua's own `lua_next`, at Lua's cost, and `pairs(t)` returns the very `next` scripts see.
//
// Everything here runs inside a protected call the host made, so raising is allowed: each function is `[-n, +m, e]`.
#include <string.h>
#include "clua_guard.h"

/// The source prefix of the prelude's chunks (`PreludeParts`, `SandboxFiles`): frames a traceback leaves out.
#define SANDBOX_SOURCE "host:LuaKit/Sandbox/"

static int builtin_results(lua_State *L, int status, lua_KContext context) {
    (void)status;
    (void)context;
    return lua_gettop(L);
}

int clua_builtin(lua_State *L) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_callk(L, lua_gettop(L) - 1, LUA_MULTRET, 0, builtin_results);
    return lua_gettop(L);
}

/// [-1, +1, m] `function` as a C closure over the function argument 1.
static int closure_over_function(lua_State *L, lua_CFunction function) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);
    lua_pushcclosure(L, function, 1);
    return 1;
}

int clua_make_builtin(lua_State *L) {
    return closure_over_function(L, clua_builtin);
}

int clua_searcher(lua_State *L) {
    return clua_builtin(L); /* (a function of its own, for tracebacks to tell: `is_shown_frame`) */
}

int clua_make_searcher(lua_State *L) {
    return closure_over_function(L, clua_searcher);
}

/// The C function frame `ar` runs (NULL for Lua).
static lua_CFunction frame_function(lua_State *L, lua_Debug *ar) {
    lua_getinfo(L, "f", ar);
    lua_CFunction function = lua_tocfunction(L, -1);
    lua_pop(L, 1);
    return function;
}

/// Whether the function of frame `ar` is one of the C functions that stand for a builtin written in Lua.
static int is_builtin_frame(lua_State *L, lua_Debug *ar) {
    lua_CFunction function = frame_function(L, ar);
    return function == clua_builtin || function == clua_searcher || function == clua_sandbox_next;
}

int clua_builtin_error(lua_State *L) {
    int level = (int)luaL_optinteger(L, 2, 1);
    lua_settop(L, 1);
    if (lua_type(L, 1) == LUA_TSTRING && level > 0) {
        lua_Debug ar;
        for (int at = 1; at <= level; at++) {
            if (!lua_getstack(L, at, &ar)) break;
            if (is_builtin_frame(L, &ar)) level++; /* (the script called the builtin, not this C function) */
        }
        luaL_where(L, level);
        lua_pushvalue(L, 1);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

static int is_hidden_frame(lua_State *L1, lua_Debug *ar);
static int push_loaded_name(lua_State *L, int function);

int clua_call_noyield(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

int clua_builtin_argerror(lua_State *L) {
    int arg = (int)luaL_checkinteger(L, 1);
    const char *extramsg = luaL_checkstring(L, 2);
    lua_Debug ar;
    int level = 1;
    /* The builtin the script called: the C frame just above the prelude's own frames. */
    while (lua_getstack(L, level, &ar) && is_hidden_frame(L, &ar)) level++;
    if (!lua_getstack(L, level, &ar) || !is_builtin_frame(L, &ar)) {
        return luaL_error(L, "bad argument #%d (%s)", arg, extramsg);
    }
    /* From here as lauxlib's `luaL_argerror`, for that frame. */
    lua_getinfo(L, "n", &ar);
    if (ar.namewhat != NULL && strcmp(ar.namewhat, "method") == 0) {
        arg--;
        if (arg == 0) {
            luaL_where(L, level + 1);
            lua_pushfstring(L, "calling '%s' on bad self (%s)", ar.name, extramsg);
            lua_concat(L, 2);
            return lua_error(L);
        }
    }
    const char *name = ar.name;
    if (name == NULL) { /* (as `pushglobalfuncname`: its name among the modules loaded) */
        int top = lua_gettop(L);
        lua_getinfo(L, "f", &ar);
        name = push_loaded_name(L, top + 1) ? lua_tostring(L, -1) : "?";
    }
    luaL_where(L, level + 1);
    lua_pushfstring(L, "bad argument #%d to '%s' (%s)", arg, name, extramsg);
    lua_concat(L, 2);
    return lua_error(L);
}

// MARK: next and pairs

int clua_sandbox_next(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 2); /* [t, key] */
    int plain = 1;
    if (lua_getmetatable(L, 1)) {
        // (A table of the host's — a library, a namespace's globals, a store's state — is walked as the prelude
        // says (upvalue 1); any other is Lua's. Each of those has a `__metatable`: a metatable without one, as
        // scripts' are, is Lua's at once. A sealed table is told by that value, which `getmetatable` answers.)
        lua_pushliteral(L, "__metatable");
        if (lua_rawget(L, -2) != LUA_TNIL) {
            plain = lua_rawget(L, lua_upvalueindex(4)) == LUA_TNIL; /* sealed[getmetatable(t)] */
            lua_pushvalue(L, 1);
            plain = plain && lua_rawget(L, lua_upvalueindex(2)) == LUA_TNIL; /* frozen[t] */
            lua_pushvalue(L, 1);
            plain = plain && lua_rawget(L, lua_upvalueindex(3)) == LUA_TNIL; /* global_sets[t] */
        }
        lua_settop(L, 2);
    }
    if (plain) {
        if (lua_next(L, 1)) return 2;
        lua_pushnil(L);
        return 1;
    }
    return clua_builtin(L); /* (the prelude's `next`, upvalue 1, as a builtin calls its Lua) */
}

int clua_make_sandbox_next(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    for (int arg = 2; arg <= 4; arg++) luaL_checktype(L, arg, LUA_TTABLE);
    lua_settop(L, 4);
    lua_pushcclosure(L, clua_sandbox_next, 4);
    return 1;
}

static int pairs_results(lua_State *L, int status, lua_KContext context) {
    (void)L;
    (void)status;
    (void)context;
    return 3;
}

/// Whether the table at 1 is one of the host's that the sandbox's `next` (at `next`) walks as the prelude says — a
/// library, a namespace's globals, a store's state (`clua_sandbox_next`'s test, read from its upvalues).
static int is_hosts_table(lua_State *L, int next) {
    if (lua_type(L, 1) != LUA_TTABLE) return 0;
    int top = lua_gettop(L), hosts = 0;
    if (lua_getmetatable(L, 1)) {
        lua_pushliteral(L, "__metatable");
        if (lua_rawget(L, -2) != LUA_TNIL) { /* [mt, marker] */
            if (lua_getupvalue(L, next, 4) != NULL && lua_type(L, -1) == LUA_TTABLE) { /* sealed[marker] */
                lua_pushvalue(L, -2);
                hosts = lua_rawget(L, -2) != LUA_TNIL;
            }
            for (int set = 2; set <= 3 && !hosts; set++) { /* frozen[t], global_sets[t] */
                if (lua_getupvalue(L, next, set) != NULL && lua_type(L, -1) == LUA_TTABLE) {
                    lua_pushvalue(L, 1);
                    hosts = lua_rawget(L, -2) != LUA_TNIL;
                }
            }
        }
    }
    lua_settop(L, top);
    return hosts;
}

/// `pairs(t)` as Lua's: `__pairs`'s three results, else the sandbox's `next` (upvalue 1), `t` and nil — which a table
/// of the host's gives too, as the plain table it stands for would (`next` walks it as its `__pairs` does).
static int sandbox_pairs(lua_State *L) {
    luaL_checkany(L, 1);
    if (is_hosts_table(L, lua_upvalueindex(1)) || luaL_getmetafield(L, 1, "__pairs") == LUA_TNIL) {
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_pushvalue(L, 1);
        lua_pushnil(L);
    } else {
        lua_pushvalue(L, 1);
        lua_callk(L, 1, 3, 0, pairs_results);
    }
    return 3;
}

int clua_make_sandbox_pairs(lua_State *L) {
    return closure_over_function(L, sandbox_pairs);
}

// MARK: Tracebacks

/// Whether a chunk's `source` is the prelude's.
static int is_prelude_source(const char *source) {
    if (source == NULL) return 0;
    if (*source == '=' || *source == '@') source++; /* (the host names its chunks "=name": LuaVM.compile) */
    return strncmp(source, SANDBOX_SOURCE, sizeof SANDBOX_SOURCE - 1) == 0;
}

/// Whether frame `ar` is one a sandbox traceback leaves out: the prelude's own Lua, or `builtin_error`.
static int is_hidden_frame(lua_State *L1, lua_Debug *ar) {
    lua_getinfo(L1, "Sf", ar);
    lua_CFunction function = lua_tocfunction(L1, -1);
    lua_pop(L1, 1);
    if (function == clua_builtin_error || function == clua_builtin_argerror) return 1;
    return is_prelude_source(ar->source);
}

/// Whether frame `level` of `L1` runs the prelude's own Lua.
static int is_prelude_lua(lua_State *L1, int level) {
    lua_Debug ar;
    return level >= 0 && lua_getstack(L1, level, &ar) && lua_getinfo(L1, "S", &ar) && is_prelude_source(ar.source);
}

/// Whether frame `level` of `L1` runs Lua of a host chunk other than the prelude's (a scripted store's runtime,
/// named "=host:…" as every host chunk is): a traceback leaves it out, and the C functions it calls or that call it.
static int is_host_lua(lua_State *L1, int level) {
    lua_Debug ar;
    if (level < 0 || !lua_getstack(L1, level, &ar) || !lua_getinfo(L1, "S", &ar) || ar.source == NULL) return 0;
    const char *source = ar.source;
    if (*source == '=' || *source == '@') source++;
    return strncmp(source, "host:", 5) == 0 && strncmp(source, SANDBOX_SOURCE, sizeof SANDBOX_SOURCE - 1) != 0;
}

/// [-0, +1, m] Whether `table` (at the top of L's stack) holds the function at `function` as a field, at most `depth`
/// tables down: if so its dotted name is pushed (lauxlib's `findfield`, which names functions in Lua's tracebacks).
static int find_field(lua_State *L, int function, int depth) {
    if (depth == 0 || lua_type(L, -1) != LUA_TTABLE) return 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            if (lua_rawequal(L, function, -1)) {
                lua_pop(L, 1);
                return 1;
            }
            if (find_field(L, function, depth - 1)) {
                lua_pushliteral(L, "."); /* [key, table, name] -> [key, ".", name] */
                lua_replace(L, -3);
                lua_concat(L, 3);
                return 1;
            }
        }
        lua_pop(L, 1);
    }
    return 0;
}

/// [-0, +(0|1), m] Pushes the name of the function at index `function` among the modules loaded, as lauxlib's
/// `pushglobalfuncname` (`_G.` left out): Lua's table of them (the libraries as scripts see them, the default
/// namespace's globals), then the default namespace's `package.loaded` (its modules: `mymod.f`). 0 when none holds it.
static int push_loaded_name(lua_State *L, int function) {
    int top = lua_gettop(L);
    int found = 0;
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    found = find_field(L, function, 2);
    if (!found) {
        lua_settop(L, top);
        found = lua_getfield(L, LUA_REGISTRYINDEX, CLUA_MODULES_FIELD) == LUA_TTABLE && find_field(L, function, 2);
    }
    if (!found) {
        lua_settop(L, top);
        return 0;
    }
    const char *name = lua_tostring(L, -1);
    if (strncmp(name, LUA_GNAME ".", 3) == 0) lua_pushstring(L, name + 3);
    else lua_pushvalue(L, -1);
    lua_replace(L, top + 1);
    lua_settop(L, top + 1);
    return 1;
}

/// [-0, +1, m] Pushes how a traceback names frame `ar`'s function, as `luaL_traceback` does: its name among the
/// modules loaded (`_G.` left out), else the name its caller used, else "main chunk", `function <file:line>` or "?".
static void push_function_name(lua_State *L, lua_State *L1, lua_Debug *ar) {
    int top = lua_gettop(L);
    lua_getinfo(L1, "f", ar);
    lua_xmove(L1, L, 1);
    if (push_loaded_name(L, top + 1)) {
        lua_pushfstring(L, "function '%s'", lua_tostring(L, -1));
        lua_replace(L, top + 1);
        lua_settop(L, top + 1);
        return;
    }
    lua_settop(L, top);
    if (*ar->namewhat != '\0') lua_pushfstring(L, "%s '%s'", ar->namewhat, ar->name);
    else if (*ar->what == 'm') lua_pushliteral(L, "main chunk");
    else if (*ar->what != 'C') lua_pushfstring(L, "function <%s:%d>", ar->short_src, ar->linedefined);
    else lua_pushliteral(L, "?");
}

/// The last level of L1's stack (a binary search, as lauxlib's `lastlevel`).
static int last_level(lua_State *L1) {
    lua_Debug ar;
    int low = 1, high = 1;
    while (lua_getstack(L1, high, &ar)) {
        low = high;
        high *= 2;
    }
    while (low < high) {
        int middle = (low + high) / 2;
        if (lua_getstack(L1, middle, &ar)) low = middle + 1;
        else high = middle;
    }
    return high - 1;
}

/// How many levels a traceback shows before and after the ones it skips in a deep stack (lauxlib's).
enum { LEVELS_FIRST = 10, LEVELS_LAST = 11 };

/// Whether a script's frames are among L1's innermost from `level` on: then a traceback or `debug.getinfo` shows the
/// script's frames, not the host's around them (a scripted store's runtime); with none (a host chunk's own failure)
/// it shows the host's. (Looked for among a few only: `lua_getstack` walks from the top, so a deep stack's every
/// level would cost its depth.)
static int is_scripted(lua_State *L1, int level) {
    lua_Debug ar;
    for (int at = level; at < level + 32 && lua_getstack(L1, at, &ar); at++) {
        lua_getinfo(L1, "S", &ar);
        if (strcmp(ar.what, "C") != 0 && ar.source != NULL && strstr(ar.source, "host:") != ar.source + 1) return 1;
    }
    return 0;
}

/// Whether frame `at` of L1 (`ar`, from `lua_getstack`) is one a script sees: not the prelude's own, nor — in a
/// `scripted` stack — the host's Lua or a C function it calls or that calls it.
static int is_shown_frame(lua_State *L1, lua_Debug *ar, int at, int scripted) {
    if (is_hidden_frame(L1, ar)) return 0;
    // (A C function the prelude's Lua called is the prelude's too: `load` reading a script's reader, `require`'s
    // file read. The builtin a script called shows, as Lua's C function does.)
    // (A searcher `require` called shows — `[C]: in ?` — as Lua's does when what it loads does not compile.)
    if (strcmp(ar->what, "C") == 0 && is_prelude_lua(L1, at + 1) && frame_function(L1, ar) != clua_searcher) return 0;
    if (scripted && is_host_lua(L1, at)) return 0;
    return !(scripted && strcmp(ar->what, "C") == 0 && (is_host_lua(L1, at + 1) || is_host_lua(L1, at - 1)));
}

void clua_traceback(lua_State *L, lua_State *L1, const char *message, int level) {
    luaL_Buffer buffer;
    lua_Debug ar;
    int last = last_level(L1);
    int shownBeforeSkip = (last - level > LEVELS_FIRST + LEVELS_LAST) ? LEVELS_FIRST : -1;
    luaL_buffinit(L, &buffer);
    if (message != NULL) {
        luaL_addstring(&buffer, message);
        luaL_addchar(&buffer, '\n');
    }
    luaL_addstring(&buffer, "stack traceback:");
    int scripted = is_scripted(L1, level);
    while (lua_getstack(L1, level++, &ar)) {
        int at = level - 1;
        if (!is_shown_frame(L1, &ar, at, scripted)) continue;
        if (shownBeforeSkip-- == 0) {
            int skipped = last - level - LEVELS_LAST + 1;
            lua_pushfstring(L, "\n\t...\t(skipping %d levels)", skipped);
            luaL_addvalue(&buffer);
            level += skipped;
            continue;
        }
        lua_getinfo(L1, "Slnt", &ar);
        if (ar.currentline <= 0) lua_pushfstring(L, "\n\t%s: in ", ar.short_src);
        else lua_pushfstring(L, "\n\t%s:%d: in ", ar.short_src, ar.currentline);
        luaL_addvalue(&buffer);
        push_function_name(L, L1, &ar);
        luaL_addvalue(&buffer);
        if (ar.istailcall) luaL_addstring(&buffer, "\n\t(...tail calls...)");
    }
    luaL_pushresult(&buffer);
}

/// The thread a debug function is asked about — its first argument when that is a thread (`*arg` 1: the others
/// come after it), else the running one (`*arg` 0) —, as ldblib's `getthread`.
static lua_State *thread_argument(lua_State *L, int *arg) {
    if (lua_isthread(L, 1)) {
        *arg = 1;
        return lua_tothread(L, 1);
    }
    *arg = 0;
    return L;
}

int clua_sandbox_traceback(lua_State *L) {
    int arg;
    lua_State *L1 = thread_argument(L, &arg);
    const char *message = lua_tostring(L, arg + 1);
    if (message == NULL && !lua_isnoneornil(L, arg + 1)) {
        lua_pushvalue(L, arg + 1); /* (a message that is no string is returned as it is) */
        return 1;
    }
    int level = (int)luaL_optinteger(L, arg + 2, (L == L1) ? 1 : 0);
    clua_traceback(L, L1, message, level);
    return 1;
}

// MARK: `debug.getinfo`

/// [-0, +0, m] `t[name] = value` for the table on top, as ldblib's `settabs*`.
static void set_string(lua_State *L, const char *name, const char *value) {
    lua_pushstring(L, value);
    lua_setfield(L, -2, name);
}

static void set_integer(lua_State *L, const char *name, lua_Integer value) {
    lua_pushinteger(L, value);
    lua_setfield(L, -2, name);
}

static void set_boolean(lua_State *L, const char *name, int value) {
    lua_pushboolean(L, value);
    lua_setfield(L, -2, name);
}

/// [-0, +0, m] Moves the value `lua_getinfo` left on L1's stack into the table on top of L's, as `name`.
static void take_from_stack(lua_State *L, lua_State *L1, const char *name) {
    if (L == L1) lua_rotate(L, -2, 1);
    else lua_xmove(L1, L, 1);
    lua_setfield(L, -2, name);
}

/// The real level of L1's stack that a script's `level` names: the script counts only the frames it is shown
/// (`is_shown_frame`), from `first` (0 in another thread; in the running one, `getinfo`'s own frame); -1 past its end.
/// (`lua_getstack` walks from the top, so a level deep in a deep stack costs its depth squared: the loop looks at the
/// running call's deadline, L's, at every level.)
static int shown_level(lua_State *L, lua_State *L1, int first, lua_Integer level) {
    lua_Debug ar;
    int scripted = is_scripted(L1, first);
    lua_Integer seen = -1;
    for (int at = first; lua_getstack(L1, at, &ar); at++) {
        clua_check_deadline(L);
        if (at == first || is_shown_frame(L1, &ar, at, scripted)) seen++;
        if (seen == level) return at;
    }
    return -1;
}

/// Whether frame `at`'s function is the script's own Lua (not the prelude's, not a host chunk's, not C): the only
/// functions `getinfo`'s `func` hands out from the stack — a C function there may be the host's own, with its state
/// in its upvalues.
static int is_script_function(lua_State *L1, int at) {
    lua_Debug ar;
    if (!lua_getstack(L1, at, &ar) || is_hidden_frame(L1, &ar) || is_host_lua(L1, at)) return 0;
    return strcmp(ar.what, "C") != 0;
}

int clua_sandbox_getinfo(lua_State *L) {
    int arg;
    lua_State *L1 = thread_argument(L, &arg);
    const char *options = luaL_optstring(L, arg + 2, "flnSrtu");
    if (!lua_checkstack(L, 3) || (L1 != L && !lua_checkstack(L1, 3))) return luaL_error(L, "stack overflow");
    luaL_argcheck(L, options[0] != '>', arg + 2, "invalid option '>'");
    lua_Debug ar;
    int at = -1; /* the real level described (-1: a function given) */
    int given = lua_isfunction(L, arg + 1);
    if (!given) {
        lua_Integer level = luaL_checkinteger(L, arg + 1);
        at = level < 0 ? -1 : shown_level(L, L1, 0, level);
        if (at < 0 || !lua_getstack(L1, at, &ar)) {
            luaL_pushfail(L);
            return 1;
        }
    }
    // What is asked of Lua: of the stack, `func` only for the script's own functions; `what` too for `nups`.
    int withFunction = strchr(options, 'f') != NULL && (given || is_script_function(L1, at));
    const char *asked = withFunction || strchr(options, 'f') == NULL ? options : luaL_gsub(L, options, "f", "");
    asked = lua_pushfstring(L, "%s%s%s", given ? ">" : "", asked, strchr(options, 'u') != NULL ? "S" : "");
    if (given) { /* (the function on L1's top, last: `lua_getinfo` takes it from there) */
        lua_pushvalue(L, arg + 1);
        lua_xmove(L, L1, 1);
    }
    if (!lua_getinfo(L1, asked, &ar)) return luaL_argerror(L, arg + 2, "invalid option");
    lua_newtable(L);
    if (strchr(options, 'S')) {
        lua_pushlstring(L, ar.source, ar.srclen);
        lua_setfield(L, -2, "source");
        set_string(L, "short_src", ar.short_src);
        set_integer(L, "linedefined", ar.linedefined);
        set_integer(L, "lastlinedefined", ar.lastlinedefined);
        set_string(L, "what", ar.what);
    }
    if (strchr(options, 'l')) set_integer(L, "currentline", ar.currentline);
    if (strchr(options, 'u')) {
        // (A C function shows none: the sandbox's keep their state in upvalues — a builtin written in Lua, `next` —
        // where Lua's own have none.)
        set_integer(L, "nups", strcmp(ar.what, "C") == 0 ? 0 : ar.nups);
        set_integer(L, "nparams", ar.nparams);
        set_boolean(L, "isvararg", ar.isvararg);
    }
    if (strchr(options, 'n')) {
        lua_Debug caller;
        int called_by_script = at < 0 || !lua_getstack(L1, at + 1, &caller) || is_shown_frame(L1, &caller, at + 1, 1);
        set_string(L, "name", called_by_script ? ar.name : NULL);
        set_string(L, "namewhat", called_by_script ? ar.namewhat : "");
    }
    if (strchr(options, 'r')) {
        set_integer(L, "ftransfer", ar.ftransfer);
        set_integer(L, "ntransfer", ar.ntransfer);
    }
    if (strchr(options, 't')) set_boolean(L, "istailcall", ar.istailcall);
    if (strchr(options, 'L')) take_from_stack(L, L1, "activelines");
    if (withFunction) take_from_stack(L, L1, "func");
    return 1;
}

// MARK: `error`

int clua_sandbox_error(lua_State *L) {
    int level = (int)luaL_optinteger(L, 2, 1);
    lua_settop(L, 1);
    if (lua_type(L, 1) == LUA_TSTRING && level > 0) {
        // Levels count the frames a traceback shows, when a script called: its level 2 in a module's main chunk
        // is `require`'s (no line), not the prelude's Lua that calls the chunk. Called from the host's or the
        // prelude's own Lua, every frame counts, as in Lua.
        lua_Debug ar;
        int at = level;
        if (lua_getstack(L, 1, &ar) && is_shown_frame(L, &ar, 1, 1) && strcmp(ar.what, "C") != 0) {
            at = shown_level(L, L, 0, level);
        }
        if (at >= 0 && lua_getstack(L, at, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
            lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
        } else {
            lua_pushliteral(L, "");
        }
        lua_pushvalue(L, 1);
        lua_concat(L, 2);
    }
    return lua_error(L);
}
