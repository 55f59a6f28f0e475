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
// - A plain search (`find` with `plain`, or a pattern without special characters) is Lua's first-byte scan
//   until that has cost as much as the subject's length, then glibc's `memmem` (the two-way algorithm:
//   linear): Lua's scan alone is quadratic on needles such as `string.rep("a", 100000) .. "b"`. The first
//   occurrence is the same.
//
// `tostring` is Lua's `luaL_tolstring` with identities for addresses: `"table: 0x55d0c3a5e2a0"` becomes
// `"table: 0x00000000000007"` — the seventh object shown — the same on every run.
//
// Everything here runs inside a protected call the host made (these are `lua_CFunction`s the scripts call),
// so raising is allowed: each function is `[-n, +m, e]`.
#define _GNU_SOURCE /* memmem */
#include "clua_guard.h"

#include <ctype.h>
#include <float.h>
#include <locale.h>
#include <math.h>

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

/// The upvalue of every function here: the identities `tostring` gave (object -> number, weak keys; the count
/// so far under the key 0).
#define IDENTITIES lua_upvalueindex(1)

/// [-1, +1, m] Replaces the text on top (`luaL_tolstring`'s of the object at `index`) with `kept` bytes of it,
/// then ": 0x" and the object's identity: a number it keeps while it lives, given in the order objects are
/// first shown — the same on every run, where an address differs from run to run.
static void replace_address(lua_State *L, int index, size_t kept) {
    index = lua_absindex(L, index);
    lua_Integer id;
    lua_pushvalue(L, index);
    if (lua_rawget(L, IDENTITIES) == LUA_TNUMBER) {
        id = lua_tointeger(L, -1);
        lua_pop(L, 1);
    } else {
        lua_pop(L, 1);
        lua_rawgeti(L, IDENTITIES, 0);
        id = lua_tointeger(L, -1) + 1;
        lua_pop(L, 1);
        lua_pushinteger(L, id);
        lua_rawseti(L, IDENTITIES, 0);
        lua_pushvalue(L, index);
        lua_pushinteger(L, id);
        lua_rawset(L, IDENTITIES);
    }
    const char *text = lua_tostring(L, -1);
    char number[24];
    snprintf(number, sizeof number, "%014llx", (unsigned long long)id);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, text, kept);
    luaL_addstring(&b, ": 0x");
    luaL_addstring(&b, number);
    luaL_pushresult(&b);
    lua_remove(L, -2);
}

/// Whether values of this type print with an address in Lua.
static int has_address(int type) {
    return type == LUA_TTABLE || type == LUA_TFUNCTION || type == LUA_TUSERDATA || type == LUA_TLIGHTUSERDATA ||
           type == LUA_TTHREAD;
}

int clua_sandbox_tostring(lua_State *L) {
    luaL_checkany(L, 1);
    int type = lua_type(L, 1);
    size_t length;
    const char *text = luaL_tolstring(L, 1, &length);
    if (has_address(type)) {
        size_t kept = without_address(text, length);
        if (kept != length) replace_address(L, 1, kept);
    }
    return 1;
}

// MARK: format

// Lua 5.4's `string.format`, conversion for conversion, except `%p` (refused: no addresses) and `%s` of a
// table, function, userdata or thread (its `tostring` without the address).

#define FORMAT_FLAGS_FLOAT "-+#0 "  /* a, A, e, E, f, F, g, G */
#define FORMAT_FLAGS_HEX "-#0"      /* o, x, X */
#define FORMAT_FLAGS_INT "-+0 "     /* d, i */
#define FORMAT_FLAGS_UNSIGNED "-0"  /* u */
#define FORMAT_FLAGS_CHAR "-"       /* c, s */
#define MAXIMUM_FORMAT 32           /* a conversion with '%', flags, width, precision, length modifier, NUL */
#define MAXIMUM_ITEM 120            /* the longest result of one conversion, but '%f' */
#define MAXIMUM_ITEM_F (110 + DBL_MAX_10_EXP)

/// At most two digits from `s`.
static const char *skip_two_digits(const char *s) {
    if (isdigit((unsigned char)*s)) {
        s++;
        if (isdigit((unsigned char)*s)) s++;
    }
    return s;
}

/// [-0, +0, e] Checks a conversion (`%`, then flags from `flags`, a width of at most two digits that does not
/// start with '0', a precision when `precision`, then its letter).
static void check_conversion(lua_State *L, const char *conversion, const char *flags, int precision) {
    const char *at = conversion + 1;
    at += strspn(at, flags);
    if (*at != '0') {
        at = skip_two_digits(at);
        if (*at == '.' && precision) at = skip_two_digits(at + 1);
    }
    if (!isalpha((unsigned char)*at)) luaL_error(L, "invalid conversion specification: '%s'", conversion);
}

/// [-0, +0, e] Copies the conversion starting after a '%' at `format` into `conversion` (with its '%');
/// returns where its letter is.
static const char *read_conversion(lua_State *L, const char *format, char *conversion) {
    size_t length = strspn(format, FORMAT_FLAGS_FLOAT "123456789.") + 1;
    if (length >= MAXIMUM_FORMAT - 10) luaL_error(L, "invalid format (too long)");
    conversion[0] = '%';
    memcpy(conversion + 1, format, length);
    conversion[length + 1] = '\0';
    return format + length - 1;
}

/// Inserts the length modifier `modifier` before the conversion's letter.
static void add_length_modifier(char *conversion, const char *modifier) {
    size_t length = strlen(conversion), extra = strlen(modifier);
    char letter = conversion[length - 1];
    memcpy(conversion + length - 1, modifier, extra);
    conversion[length + extra - 1] = letter;
    conversion[length + extra] = '\0';
}

/// [-0, +0, e] `%q` of a string: in double quotes, with `"`, `\` and newlines escaped and control bytes as
/// decimal escapes (three digits when a digit follows).
static void add_quoted(luaL_Buffer *b, const char *s, size_t length) {
    luaL_addchar(b, '"');
    for (; length > 0; length--, s++) {
        if (*s == '"' || *s == '\\' || *s == '\n') {
            luaL_addchar(b, '\\');
            luaL_addchar(b, *s);
        } else if (iscntrl((unsigned char)*s)) {
            char escape[10];
            snprintf(escape, sizeof escape, isdigit((unsigned char)*(s + 1)) ? "\\%03d" : "\\%d", (int)(unsigned char)*s);
            luaL_addstring(b, escape);
        } else {
            luaL_addchar(b, *s);
        }
    }
    luaL_addchar(b, '"');
}

/// [-0, +0, e] `%q` of the argument: a literal Lua reads back as the same value.
static void add_literal(lua_State *L, luaL_Buffer *b, int argument) {
    switch (lua_type(L, argument)) {
    case LUA_TSTRING: {
        size_t length;
        const char *s = lua_tolstring(L, argument, &length);
        add_quoted(b, s, length);
        break;
    }
    case LUA_TNUMBER: {
        char *out = luaL_prepbuffsize(b, MAXIMUM_ITEM);
        int written;
        if (!lua_isinteger(L, argument)) {
            lua_Number n = lua_tonumber(L, argument);
            if (n == (lua_Number)HUGE_VAL) {
                written = snprintf(out, MAXIMUM_ITEM, "1e9999");
            } else if (n == -(lua_Number)HUGE_VAL) {
                written = snprintf(out, MAXIMUM_ITEM, "-1e9999");
            } else if (n != n) {
                written = snprintf(out, MAXIMUM_ITEM, "(0/0)");
            } else {
                written = lua_number2strx(L, out, MAXIMUM_ITEM, "%" LUA_NUMBER_FRMLEN "a", n);
                if (memchr(out, '.', (size_t)written) == NULL) { /* a locale's radix character becomes a dot */
                    char *point = memchr(out, lua_getlocaledecpoint(), (size_t)written);
                    if (point != NULL) *point = '.';
                }
            }
        } else {
            lua_Integer n = lua_tointeger(L, argument);
            written = snprintf(out, MAXIMUM_ITEM, n == LUA_MININTEGER ? "0x%" LUA_INTEGER_FRMLEN "x" : LUA_INTEGER_FMT,
                               (LUAI_UACINT)n);
        }
        luaL_addsize(b, (size_t)written);
        break;
    }
    case LUA_TNIL:
    case LUA_TBOOLEAN:
        luaL_tolstring(L, argument, NULL);
        luaL_addvalue(b);
        break;
    default:
        luaL_argerror(L, argument, "value has no literal form");
    }
}

/// [-0, +1, e] `tostring` of the value at `index` without an address (`luaL_tolstring`'s `"table: 0x…"`
/// becomes `"table"`); returns the text and its length.
static const char *to_string_without_address(lua_State *L, int index, size_t *length) {
    int type = lua_type(L, index);
    const char *text = luaL_tolstring(L, index, length);
    if (has_address(type)) {
        size_t kept = without_address(text, *length);
        if (kept != *length) {
            replace_address(L, index, kept);
            text = lua_tolstring(L, -1, length);
        }
    }
    return text;
}

static int sandbox_format(lua_State *L) {
    int top = lua_gettop(L);
    int argument = 1;
    size_t length;
    const char *format = luaL_checklstring(L, argument, &length);
    const char *end = format + length;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    while (format < end) {
        if (*format != ESCAPE) {
            luaL_addchar(&b, *format++);
            continue;
        }
        if (*++format == ESCAPE) {
            luaL_addchar(&b, *format++);
            continue;
        }
        char conversion[MAXIMUM_FORMAT];
        int room = MAXIMUM_ITEM;
        char *out = luaL_prepbuffsize(&b, (size_t)room);
        int written = 0;
        if (++argument > top) return luaL_argerror(L, argument, "no value");
        format = read_conversion(L, format, conversion);
        const char *flags;
        switch (*format++) {
        case 'c':
            check_conversion(L, conversion, FORMAT_FLAGS_CHAR, 0);
            written = snprintf(out, (size_t)room, conversion, (int)luaL_checkinteger(L, argument));
            break;
        case 'd':
        case 'i':
            flags = FORMAT_FLAGS_INT;
            goto integer;
        case 'u':
            flags = FORMAT_FLAGS_UNSIGNED;
            goto integer;
        case 'o':
        case 'x':
        case 'X':
            flags = FORMAT_FLAGS_HEX;
        integer: {
            lua_Integer n = luaL_checkinteger(L, argument);
            check_conversion(L, conversion, flags, 1);
            add_length_modifier(conversion, LUA_INTEGER_FRMLEN);
            written = snprintf(out, (size_t)room, conversion, (LUAI_UACINT)n);
            break;
        }
        case 'a':
        case 'A':
            check_conversion(L, conversion, FORMAT_FLAGS_FLOAT, 1);
            add_length_modifier(conversion, LUA_NUMBER_FRMLEN);
            written = lua_number2strx(L, out, room, conversion, luaL_checknumber(L, argument));
            break;
        case 'f':
            room = MAXIMUM_ITEM_F;
            out = luaL_prepbuffsize(&b, (size_t)room);
            /* fall through */
        case 'e':
        case 'E':
        case 'g':
        case 'G': {
            lua_Number n = luaL_checknumber(L, argument);
            check_conversion(L, conversion, FORMAT_FLAGS_FLOAT, 1);
            add_length_modifier(conversion, LUA_NUMBER_FRMLEN);
            written = snprintf(out, (size_t)room, conversion, (LUAI_UACNUMBER)n);
            break;
        }
        case 'p':
            return luaL_argerror(L, argument, "'%p' is not available to scripts");
        case 'q':
            if (conversion[2] != '\0') return luaL_error(L, "specifier '%%q' cannot have modifiers");
            add_literal(L, &b, argument);
            break;
        case 's': {
            size_t textLength;
            const char *text = to_string_without_address(L, argument, &textLength);
            if (conversion[2] == '\0') {
                luaL_addvalue(&b);
            } else {
                luaL_argcheck(L, textLength == strlen(text), argument, "string contains zeros");
                check_conversion(L, conversion, FORMAT_FLAGS_CHAR, 1);
                if (strchr(conversion, '.') == NULL && textLength >= 100) {
                    luaL_addvalue(&b); /* too long to format, and no precision to cut it: whole */
                } else {
                    written = snprintf(out, (size_t)room, conversion, text);
                    lua_pop(L, 1);
                }
            }
            break;
        }
        default: /* 'F' and the length modifiers too, as in Lua 5.4.4 */
            return luaL_error(L, "invalid conversion '%s' to 'format'", conversion);
        }
        luaL_addsize(&b, (size_t)written);
    }
    luaL_pushresult(&b);
    return 1;
}

// MARK: Registration

int clua_push_sandbox_strings(lua_State *L) {
    static const luaL_Reg functions[] = {
        { "find", sandbox_find }, { "match", sandbox_match }, { "gmatch", sandbox_gmatch },
        { "gsub", sandbox_gsub }, { "format", sandbox_format }, { "tostring", clua_sandbox_tostring },
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
