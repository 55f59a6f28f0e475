// The sandbox's string functions that search — `string.find`, `match`, `gmatch`, `gsub` — on the pattern matcher
// of `patterns.c`, and the registration of every string function the sandbox replaces (`format.c` has `format` and
// `tostring`).
//
// A plain search (`find` with `plain`, or a pattern without special characters) is Lua's first-byte scan until
// that has cost as much as the subject's length, then glibc's `memmem` (the two-way algorithm: linear): Lua's scan
// alone is quadratic on needles such as `string.rep("a", 100000) .. "b"`. The first occurrence is the same.
//
// Everything here runs inside a protected call the host made (these are `lua_CFunction`s the scripts call),
// so raising is allowed: each function is `[-n, +m, e]`.
#define _GNU_SOURCE /* memmem */
#include "patterns.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>

/// In format.c.
int clua_sandbox_format(lua_State *L);
/// In format.c.
int clua_sandbox_tostring(lua_State *L);

// MARK: find, match, gmatch, gsub

/// A 1-based position relative to a string of `length` bytes (negative: from the end), clipped at 1.
static size_t relative_start(lua_Integer position, size_t length) {
    if (position > 0) return (size_t)position;
    if (position == 0) return 1;
    if (position < -(lua_Integer)length) return 1;
    return length + (size_t)position + 1;
}

/// The first occurrence of `needle` (`n` bytes) in `s` (`length` bytes), or NULL. Lua's scan — `memchr` for the
/// first byte, `memcmp` for the rest — is fastest on the short needles scripts search for, but quadratic on
/// some (`("a"):rep(100000) .. "b"` in a run of `a`s); so once its comparisons have cost as much as the
/// subject's length, the rest of the search is glibc's `memmem` (two-way: linear). Either way the first
/// occurrence is found.
static const char *find_plain(const char *s, size_t length, const char *needle, size_t n) {
    if (n == 0) return s;
    if (n > length) return NULL;
    const char *last = s + (length - n); /* the last place the needle fits */
    size_t budget = length;
    for (const char *at = s; at <= last;) {
        const char *hit = memchr(at, needle[0], (size_t)(last - at) + 1);
        if (hit == NULL) return NULL;
        if (memcmp(hit + 1, needle + 1, n - 1) == 0) return hit;
        if (n > budget) return memmem(hit + 1, (size_t)(s + length - (hit + 1)), needle, n);
        budget -= n;
        at = hit + 1;
    }
    return NULL;
}

/// Whether the pattern has none of the special characters (NULs included: it may go on after one).
static int is_plain(const char *p, size_t length) {
    size_t at = 0;
    do {
        if (strpbrk(p + at, SPECIALS)) return 0;
        at += strlen(p + at) + 1;
    } while (at <= length);
    return 1;
}

/// [-(2|3|4), +(1|2+captures), e] `find` (`wantPositions`) and `match`.
static int find_or_match(lua_State *L, int wantPositions) {
    size_t length, patternLength;
    const char *s = luaL_checklstring(L, 1, &length);
    const char *p = luaL_checklstring(L, 2, &patternLength);
    size_t start = relative_start(luaL_optinteger(L, 3, 1), length) - 1;
    if (start > length) {
        luaL_pushfail(L);
        return 1;
    }
    if (wantPositions && (lua_toboolean(L, 4) || is_plain(p, patternLength))) {
        const char *found = find_plain(s + start, length - start, p, patternLength);
        if (found != NULL) {
            lua_pushinteger(L, (found - s) + 1);
            lua_pushinteger(L, (lua_Integer)((found - s) + patternLength));
            return 2;
        }
    } else {
        Matcher m;
        const char *from = s + start;
        int anchored = *p == '^';
        if (anchored) {
            p++;
            patternLength--;
        }
        clua_pattern_init(&m, L, s, length, p, patternLength);
        do {
            m.level = 0;
            const char *end = clua_pattern_match(&m, from, p);
            if (end != NULL) {
                if (wantPositions) {
                    lua_pushinteger(L, (from - s) + 1);
                    lua_pushinteger(L, end - s);
                    return clua_pattern_push_captures(&m, NULL, NULL) + 2;
                }
                return clua_pattern_push_captures(&m, from, end);
            }
        } while (from++ < m.subjectEnd && !anchored);
    }
    luaL_pushfail(L);
    return 1;
}

static int sandbox_find(lua_State *L) { return find_or_match(L, 1); }
static int sandbox_match(lua_State *L) { return find_or_match(L, 0); }

/// What a `gmatch` iterator keeps between calls (a userdata; the subject and pattern are upvalues beside it).
typedef struct GmatchState {
    const char *from;
    const char *pattern;
    const char *lastMatch;   /* the end of the last match: an empty match there is skipped */
    Matcher matcher;
} GmatchState;

/// The iterator `gmatch` returns [-0, +captures, e].
static int gmatch_next(lua_State *L) {
    GmatchState *g = (GmatchState *)lua_touserdata(L, lua_upvalueindex(3));
    g->matcher.L = L;
    g->matcher.stepsToClockRead = STEPS_BETWEEN_CLOCK_READS;
    for (const char *from = g->from; from <= g->matcher.subjectEnd; from++) {
        g->matcher.level = 0;
        const char *end = clua_pattern_match(&g->matcher, from, g->pattern);
        if (end != NULL && end != g->lastMatch) {
            g->from = g->lastMatch = end;
            return clua_pattern_push_captures(&g->matcher, from, end);
        }
    }
    return 0;
}

static int sandbox_gmatch(lua_State *L) {
    size_t length, patternLength;
    const char *s = luaL_checklstring(L, 1, &length);
    const char *p = luaL_checklstring(L, 2, &patternLength);
    size_t start = relative_start(luaL_optinteger(L, 3, 1), length) - 1;
    lua_settop(L, 2); /* the subject and pattern stay alive as upvalues */
    GmatchState *g = (GmatchState *)lua_newuserdatauv(L, sizeof(GmatchState), 0);
    if (start > length) start = length + 1; /* past the end: nothing to find (and no pointer overflow) */
    clua_pattern_init(&g->matcher, L, s, length, p, patternLength);
    g->from = s + start;
    g->pattern = p;
    g->lastMatch = NULL;
    lua_pushcclosure(L, gmatch_next, 3);
    return 1;
}

/// [-0, +0, e] Appends the replacement string (argument 3) for the match `s..e`, expanding `%0`–`%9` and `%%`.
static void add_expanded(Matcher *m, luaL_Buffer *b, const char *s, const char *e) {
    lua_State *L = m->L;
    size_t length;
    const char *text = lua_tolstring(L, 3, &length);
    const char *escape;
    while ((escape = memchr(text, ESCAPE, length)) != NULL) {
        luaL_addlstring(b, text, (size_t)(escape - text));
        escape++;
        if (*escape == ESCAPE) {
            luaL_addchar(b, ESCAPE);
        } else if (*escape == '0') {
            luaL_addlstring(b, s, (size_t)(e - s));
        } else if (isdigit((unsigned char)*escape)) {
            const char *start;
            ptrdiff_t captured = clua_pattern_get_capture(m, *escape - '1', s, e, &start);
            if (captured == CAPTURE_POSITION) luaL_addvalue(b);
            else luaL_addlstring(b, start, (size_t)captured);
        } else {
            luaL_error(L, "invalid use of '%c' in replacement string", ESCAPE);
        }
        length -= (size_t)(escape + 1 - text);
        text = escape + 1;
    }
    luaL_addlstring(b, text, length);
}

/// [-0, +0, e] Appends the replacement of the match `s..e`; returns whether it differs from the match
/// (a function or table giving nil or false keeps the match).
static int add_replacement(Matcher *m, luaL_Buffer *b, const char *s, const char *e, int kind) {
    lua_State *L = m->L;
    if (kind == LUA_TFUNCTION) {
        lua_pushvalue(L, 3);
        int count = clua_pattern_push_captures(m, s, e);
        lua_call(L, count, 1);
    } else if (kind == LUA_TTABLE) {
        clua_pattern_push_capture(m, 0, s, e);
        lua_gettable(L, 3);
    } else {
        add_expanded(m, b, s, e);
        return 1;
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(b, s, (size_t)(e - s));
        return 0;
    }
    if (!lua_isstring(L, -1)) return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    luaL_addvalue(b);
    return 1;
}

static int sandbox_gsub(lua_State *L) {
    size_t length, patternLength;
    const char *s = luaL_checklstring(L, 1, &length);
    const char *p = luaL_checklstring(L, 2, &patternLength);
    const char *lastMatch = NULL;
    int kind = lua_type(L, 3);
    lua_Integer limit = luaL_optinteger(L, 4, (lua_Integer)length + 1);
    int anchored = *p == '^';
    lua_Integer replaced = 0;
    int changed = 0;
    luaL_argexpected(L, kind == LUA_TNUMBER || kind == LUA_TSTRING || kind == LUA_TFUNCTION || kind == LUA_TTABLE, 3,
                     "string/function/table");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (anchored) {
        p++;
        patternLength--;
    }
    Matcher m;
    clua_pattern_init(&m, L, s, length, p, patternLength);
    while (replaced < limit) {
        m.level = 0;
        const char *end = clua_pattern_match(&m, s, p);
        if (end != NULL && end != lastMatch) {
            replaced++;
            changed = add_replacement(&m, &b, s, end, kind) | changed;
            s = lastMatch = end;
        } else if (s < m.subjectEnd) {
            luaL_addchar(&b, *s++);
        } else {
            break;
        }
        if (anchored) break;
    }
    if (!changed) {
        lua_pushvalue(L, 1);
    } else {
        luaL_addlstring(&b, s, (size_t)(m.subjectEnd - s));
        luaL_pushresult(&b);
    }
    lua_pushinteger(L, replaced);
    return 2;
}

// MARK: rep

/// `string.rep(s, n [, sep])` [-(2|3), +1, m]: Lua 5.4's, with its result and errors, but what it makes is copied in
/// doubling blocks, and a result with nothing in it (an empty `s` and `sep`) is made at once: Lua's loop runs `n`
/// times whatever is repeated, and `(""):rep(math.maxinteger)` never returned (no hook fires in C). A result that
/// has bytes is bounded by the memory cap before anything is copied.
static int sandbox_rep(lua_State *L) {
    size_t length, separatorLength;
    const char *s = luaL_checklstring(L, 1, &length);
    lua_Integer n = luaL_checkinteger(L, 2);
    const char *separator = luaL_optlstring(L, 3, "", &separatorLength);
    const size_t largest = (size_t)INT_MAX; /* Lua 5.4's MAXSIZE where size_t is as wide as int or wider */
    if (n <= 0 || length + separatorLength == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    if (length + separatorLength < length || length + separatorLength > largest / (size_t)n) {
        return luaL_error(L, "resulting string too large");
    }
    size_t unit = length + separatorLength;
    size_t total = (size_t)n * length + (size_t)(n - 1) * separatorLength;
    luaL_Buffer b;
    char *p = luaL_buffinitsize(L, &b, total);
    memcpy(p, s, length);
    if (total > length) memcpy(p + length, separator, separatorLength);
    size_t filled = total < unit ? total : unit;
    while (filled < total) { /* the result repeats every `unit` bytes: double what is there */
        size_t more = total - filled < filled ? total - filled : filled;
        memcpy(p + filled, p, more);
        filled += more;
    }
    luaL_pushresultsize(&b, total);
    return 1;
}

// MARK: Registration

int clua_push_sandbox_strings(lua_State *L) {
    static const luaL_Reg functions[] = {
        { "find", sandbox_find }, { "match", sandbox_match }, { "gmatch", sandbox_gmatch },
        { "gsub", sandbox_gsub }, { "rep", sandbox_rep }, { "format", clua_sandbox_format },
        { "tostring", clua_sandbox_tostring },
        { NULL, NULL },
    };
    luaL_newlibtable(L, functions);
    lua_createtable(L, 0, 0); /* the identities */
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    luaL_setfuncs(L, functions, 1);
    return 1;
}
