// The sandbox's pattern functions — `string.find`, `match`, `gmatch`, `gsub` — and `tostring`, in C.
//
// Lua's own pattern matcher cannot be interrupted: it runs in C, where no hook fires, and a backtracking
// pattern such as `string.rep("a*", 20) .. "b"` takes exponential time. These functions give exactly Lua 5.4's
// results and error messages (the differential tests and `scripts/fuzz-patterns` compare them with Lua's own,
// kept by the prelude as `reference_patterns`), with two differences of policy:
//
// - Every entry into `match` counts a step; every 1,024 steps the clock is read against the call's deadline,
//   and past it the script stops with the same `timeout` error the budget hook raises (as Luau calls its interrupt on each entry to `match`). Lua itself bounds only the recursion depth
//   (200, "pattern too complex"), as this does.
// - A plain search (`find` with `plain`, or a pattern without special characters) uses glibc's `memmem`
//   (the two-way algorithm: linear), not Lua's first-byte scan, which is quadratic on needles such as
//   `string.rep("a", 100000) .. "b"`. The first occurrence is the same.
//
// `tostring` is Lua's `luaL_tolstring` without addresses: `"table: 0x55…"` becomes `"table"`.
//
// Everything here runs inside a protected call the host made (these are `lua_CFunction`s the scripts call),
// so raising is allowed: each function is `[-n, +m, e]`.
#define _GNU_SOURCE /* memmem */
#include "clua_guard.h"

#include <ctype.h>

#define ESCAPE '%'
#define SPECIALS "^$*+?.([%-"
#define MAXIMUM_CAPTURES 32        /* LUA_MAXCAPTURES */
#define MAXIMUM_DEPTH 200          /* MAXCCALLS in lstrlib.c: "pattern too complex" */
#define STEPS_BETWEEN_CLOCK_READS 1024
#define CAPTURE_UNFINISHED (-1)
#define CAPTURE_POSITION (-2)

typedef struct Matcher {
    const char *subject;           /* the subject's first byte */
    const char *subjectEnd;        /* one past its last */
    const char *patternEnd;
    lua_State *L;
    int depth;                     /* recursion left before "pattern too complex" */
    unsigned stepsToClockRead;
    int level;                     /* captures opened so far */
    struct {
        const char *start;
        ptrdiff_t length;          /* or CAPTURE_UNFINISHED, CAPTURE_POSITION */
    } captures[MAXIMUM_CAPTURES];
} Matcher;

static const char *match(Matcher *m, const char *s, const char *p);

// MARK: The budget

/// [-0, +0, e] Counts a step; every `STEPS_BETWEEN_CLOCK_READS` reads the clock and raises the budget's
/// `timeout` error once the deadline has passed.
static void count_step(Matcher *m) {
    if (--m->stepsToClockRead != 0) return;
    m->stepsToClockRead = STEPS_BETWEEN_CLOCK_READS;
    CLuaGuard *g = clua_guard(m->L);
    if (g->timedOut || (g->deadlineNanos != 0 && clua_now_nanos() >= g->deadlineNanos)) {
        clua_raise_budget_exceeded(m->L, g);
    }
}

// MARK: Matching (Lua 5.4's semantics, step for step)

static void matcher_init(Matcher *m, lua_State *L, const char *s, size_t length, const char *p, size_t patternLength) {
    m->L = L;
    m->subject = s;
    m->subjectEnd = s + length;
    m->patternEnd = p + patternLength;
    m->depth = MAXIMUM_DEPTH;
    m->stepsToClockRead = STEPS_BETWEEN_CLOCK_READS;
    m->level = 0;
}

/// [-0, +0, e] The capture `%l` refers to (`l` the digit's character), which must be closed.
static int capture_index(Matcher *m, int l) {
    l -= '1';
    if (l < 0 || l >= m->level || m->captures[l].length == CAPTURE_UNFINISHED) {
        return luaL_error(m->L, "invalid capture index %%%d", l + 1);
    }
    return l;
}

/// [-0, +0, e] The innermost capture still open.
static int open_capture(Matcher *m) {
    for (int level = m->level - 1; level >= 0; level--) {
        if (m->captures[level].length == CAPTURE_UNFINISHED) return level;
    }
    return luaL_error(m->L, "invalid pattern capture");
}

/// [-0, +0, e] Where the single-character class starting at `p` ends.
static const char *class_end(Matcher *m, const char *p) {
    char c = *p++;
    if (c == ESCAPE) {
        if (p == m->patternEnd) luaL_error(m->L, "malformed pattern (ends with '%%')");
        return p + 1;
    }
    if (c == '[') {
        if (*p == '^') p++;
        do { /* up to the closing ']'; a ']' right after '[' or '[^' is a member */
            if (p == m->patternEnd) luaL_error(m->L, "malformed pattern (missing ']')");
            if (*(p++) == ESCAPE && p < m->patternEnd) p++;
        } while (*p != ']');
        return p + 1;
    }
    return p;
}

/// [-0, +0, -] Whether byte `c` is in class `%k` (upper case: the complement); other `k` are themselves.
static int in_class(int c, int k) {
    int yes;
    switch (tolower(k)) {
    case 'a': yes = isalpha(c); break;
    case 'c': yes = iscntrl(c); break;
    case 'd': yes = isdigit(c); break;
    case 'g': yes = isgraph(c); break;
    case 'l': yes = islower(c); break;
    case 'p': yes = ispunct(c); break;
    case 's': yes = isspace(c); break;
    case 'u': yes = isupper(c); break;
    case 'w': yes = isalnum(c); break;
    case 'x': yes = isxdigit(c); break;
    case 'z': yes = (c == 0); break; /* deprecated in 5.2, still in 5.4 */
    default: return k == c;
    }
    return islower(k) ? yes : !yes;
}

/// [-0, +0, -] Whether `c` is in the set `[...]` from `p` (its '[') to `last` (its ']').
static int in_set(int c, const char *p, const char *last) {
    int inside = 1;
    if (*(p + 1) == '^') {
        inside = 0;
        p++;
    }
    while (++p < last) {
        if (*p == ESCAPE) {
            p++;
            if (in_class(c, (unsigned char)*p)) return inside;
        } else if (*(p + 1) == '-' && p + 2 < last) {
            p += 2;
            if ((unsigned char)*(p - 2) <= c && c <= (unsigned char)*p) return inside;
        } else if ((unsigned char)*p == c) {
            return inside;
        }
    }
    return !inside;
}

/// [-0, +0, -] Whether the byte at `s` matches the class from `p` to `end`.
static int single_match(Matcher *m, const char *s, const char *p, const char *end) {
    if (s >= m->subjectEnd) return 0;
    int c = (unsigned char)*s;
    switch (*p) {
    case '.': return 1;
    case ESCAPE: return in_class(c, (unsigned char)*(p + 1));
    case '[': return in_set(c, p, end - 1);
    default: return (unsigned char)*p == c;
    }
}

/// [-0, +0, e] `%bxy` at `s` (`p` at x): the end of the balanced run, or NULL.
static const char *match_balance(Matcher *m, const char *s, const char *p) {
    if (p >= m->patternEnd - 1) luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
    if (*s != *p) return NULL;
    int open = *p, close = *(p + 1), depth = 1;
    while (++s < m->subjectEnd) {
        if (*s == close) {
            if (--depth == 0) return s + 1;
        } else if (*s == open) {
            depth++;
        }
    }
    return NULL;
}

/// [-0, +0, e] `x*` (and `x+` after its first): the longest run that lets the rest match.
static const char *expand_greedily(Matcher *m, const char *s, const char *p, const char *end) {
    ptrdiff_t count = 0;
    while (single_match(m, s + count, p, end)) count++;
    for (; count >= 0; count--) {
        const char *rest = match(m, s + count, end + 1);
        if (rest != NULL) return rest;
    }
    return NULL;
}

/// [-0, +0, e] `x-`: the shortest run that lets the rest match.
static const char *expand_lazily(Matcher *m, const char *s, const char *p, const char *end) {
    for (;;) {
        const char *rest = match(m, s, end + 1);
        if (rest != NULL) return rest;
        if (!single_match(m, s, p, end)) return NULL;
        s++;
    }
}

/// [-0, +0, e] Opens capture `length` (CAPTURE_UNFINISHED or CAPTURE_POSITION) at `s` and matches the rest.
static const char *start_capture(Matcher *m, const char *s, const char *p, ptrdiff_t length) {
    if (m->level >= MAXIMUM_CAPTURES) luaL_error(m->L, "too many captures");
    m->captures[m->level].start = s;
    m->captures[m->level].length = length;
    m->level++;
    const char *rest = match(m, s, p);
    if (rest == NULL) m->level--;
    return rest;
}

/// [-0, +0, e] Closes the innermost open capture at `s` and matches the rest.
static const char *end_capture(Matcher *m, const char *s, const char *p) {
    int l = open_capture(m);
    m->captures[l].length = s - m->captures[l].start;
    const char *rest = match(m, s, p);
    if (rest == NULL) m->captures[l].length = CAPTURE_UNFINISHED;
    return rest;
}

/// [-0, +0, e] `%1`–`%9`: the same bytes as the capture, at `s`.
static const char *match_back_reference(Matcher *m, const char *s, int digit) {
    int l = capture_index(m, digit);
    size_t length = (size_t)m->captures[l].length;
    if ((size_t)(m->subjectEnd - s) >= length && memcmp(m->captures[l].start, s, length) == 0) return s + length;
    return NULL;
}

/// [-0, +0, e] Matches the pattern from `p` at `s`: the end of the match, or NULL. Each entry is a step.
static const char *match(Matcher *m, const char *s, const char *p) {
    if (m->depth-- == 0) luaL_error(m->L, "pattern too complex");
    count_step(m);
again: /* the pattern's tail, without recursing */
    if (p != m->patternEnd) {
        switch (*p) {
        case '(':
            s = *(p + 1) == ')' ? start_capture(m, s, p + 2, CAPTURE_POSITION)
                                : start_capture(m, s, p + 1, CAPTURE_UNFINISHED);
            break;
        case ')':
            s = end_capture(m, s, p + 1);
            break;
        case '$':
            if (p + 1 != m->patternEnd) goto single; /* a '$' that is not last is itself */
            s = s == m->subjectEnd ? s : NULL;
            break;
        case ESCAPE:
            switch (*(p + 1)) {
            case 'b':
                s = match_balance(m, s, p + 2);
                if (s != NULL) {
                    p += 4;
                    goto again;
                }
                break;
            case 'f': {
                p += 2;
                if (*p != '[') luaL_error(m->L, "missing '[' after '%%f' in pattern");
                const char *end = class_end(m, p);
                int before = s == m->subject ? '\0' : (unsigned char)*(s - 1);
                // (At the subject's end `*s` is the string's terminating NUL, as in Lua.)
                if (!in_set(before, p, end - 1) && in_set((unsigned char)*s, p, end - 1)) {
                    p = end;
                    goto again;
                }
                s = NULL;
                break;
            }
            case '0': case '1': case '2': case '3': case '4':
            case '5': case '6': case '7': case '8': case '9':
                s = match_back_reference(m, s, (unsigned char)*(p + 1));
                if (s != NULL) {
                    p += 2;
                    goto again;
                }
                break;
            default:
                goto single;
            }
            break;
        default:
        single: { /* a single-character class and its optional suffix */
            const char *end = class_end(m, p);
            if (!single_match(m, s, p, end)) {
                if (*end == '*' || *end == '?' || *end == '-') { /* may match nothing */
                    p = end + 1;
                    goto again;
                }
                s = NULL;
            } else {
                switch (*end) {
                case '?': {
                    const char *rest = match(m, s + 1, end + 1);
                    if (rest != NULL) {
                        s = rest;
                    } else {
                        p = end + 1;
                        goto again;
                    }
                    break;
                }
                case '+':
                    s = expand_greedily(m, s + 1, p, end);
                    break;
                case '*':
                    s = expand_greedily(m, s, p, end);
                    break;
                case '-':
                    s = expand_lazily(m, s, p, end);
                    break;
                default:
                    s++;
                    p = end;
                    goto again;
                }
            }
            break;
        }
        }
    }
    m->depth++;
    return s;
}

// MARK: Captures

/// [-0, +(0|1), e] Capture `i` of a match `s..e`: its start and length, or (pushing the position)
/// CAPTURE_POSITION. Without captures, capture 0 is the whole match.
static ptrdiff_t get_capture(Matcher *m, int i, const char *s, const char *e, const char **start) {
    if (i >= m->level) {
        if (i != 0) luaL_error(m->L, "invalid capture index %%%d", i + 1);
        *start = s;
        return e - s;
    }
    ptrdiff_t length = m->captures[i].length;
    *start = m->captures[i].start;
    if (length == CAPTURE_UNFINISHED) {
        luaL_error(m->L, "unfinished capture");
    } else if (length == CAPTURE_POSITION) {
        lua_pushinteger(m->L, (m->captures[i].start - m->subject) + 1);
    }
    return length;
}

/// [-0, +1, e] Pushes capture `i` of the match `s..e`.
static void push_capture(Matcher *m, int i, const char *s, const char *e) {
    const char *start;
    ptrdiff_t length = get_capture(m, i, s, e, &start);
    if (length != CAPTURE_POSITION) lua_pushlstring(m->L, start, (size_t)length);
}

/// [-0, +n, e] Pushes every capture of the match `s..e` (the whole match when there are none and `s` is
/// given); returns how many.
static int push_captures(Matcher *m, const char *s, const char *e) {
    int count = (m->level == 0 && s != NULL) ? 1 : m->level;
    luaL_checkstack(m->L, count, "too many captures");
    for (int i = 0; i < count; i++) push_capture(m, i, s, e);
    return count;
}

// MARK: find, match, gmatch, gsub

/// A 1-based position relative to a string of `length` bytes (negative: from the end), clipped at 1.
static size_t relative_start(lua_Integer position, size_t length) {
    if (position > 0) return (size_t)position;
    if (position == 0) return 1;
    if (position < -(lua_Integer)length) return 1;
    return length + (size_t)position + 1;
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
        const char *found = patternLength == 0 ? s + start
                                               : memmem(s + start, length - start, p, patternLength);
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
        matcher_init(&m, L, s, length, p, patternLength);
        do {
            m.level = 0;
            const char *end = match(&m, from, p);
            if (end != NULL) {
                if (wantPositions) {
                    lua_pushinteger(L, (from - s) + 1);
                    lua_pushinteger(L, end - s);
                    return push_captures(&m, NULL, NULL) + 2;
                }
                return push_captures(&m, from, end);
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
        const char *end = match(&g->matcher, from, g->pattern);
        if (end != NULL && end != g->lastMatch) {
            g->from = g->lastMatch = end;
            return push_captures(&g->matcher, from, end);
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
    matcher_init(&g->matcher, L, s, length, p, patternLength);
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
            ptrdiff_t captured = get_capture(m, *escape - '1', s, e, &start);
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
        int count = push_captures(m, s, e);
        lua_call(L, count, 1);
    } else if (kind == LUA_TTABLE) {
        push_capture(m, 0, s, e);
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
    matcher_init(&m, L, s, length, p, patternLength);
    while (replaced < limit) {
        m.level = 0;
        const char *end = match(&m, s, p);
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

// MARK: tostring

/// The length of `text` without an address Lua's `%p` added (`"table: 0x55d0…"` → 5), or `length`: only
/// when the part before ": 0x" has no ':' and hex digits follow to the end.
static size_t without_address(const char *text, size_t length) {
    const char *colon = memchr(text, ':', length);
    if (colon == NULL) return length;
    size_t at = (size_t)(colon - text);
    if (length < at + 5 || memcmp(colon, ": 0x", 4) != 0) return length;
    for (size_t i = at + 4; i < length; i++) {
        if (!isxdigit((unsigned char)text[i])) return length;
    }
    return at;
}

int clua_sandbox_tostring(lua_State *L) {
    luaL_checkany(L, 1);
    int type = lua_type(L, 1);
    size_t length;
    const char *text = luaL_tolstring(L, 1, &length);
    if (type == LUA_TTABLE || type == LUA_TFUNCTION || type == LUA_TUSERDATA || type == LUA_TLIGHTUSERDATA ||
        type == LUA_TTHREAD) {
        size_t kept = without_address(text, length);
        if (kept != length) lua_pushlstring(L, text, kept);
    }
    return 1;
}

// MARK: Registration

int clua_push_sandbox_strings(lua_State *L) {
    static const luaL_Reg functions[] = {
        { "find", sandbox_find }, { "match", sandbox_match }, { "gmatch", sandbox_gmatch },
        { "gsub", sandbox_gsub }, { "tostring", clua_sandbox_tostring }, { NULL, NULL },
    };
    luaL_newlib(L, functions);
    return 1;
}
