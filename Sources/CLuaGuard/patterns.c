// The sandbox's pattern matcher, the engine under `string.find`, `match`, `gmatch` and `gsub` (`strings.c`).
//
// Lua's own pattern matcher cannot be interrupted: it runs in C, where no hook fires, and a backtracking
// pattern such as `string.rep("a*", 20) .. "b"` takes exponential time. This one gives exactly Lua 5.4's results
// and error messages (the differential tests and `scripts/fuzz-patterns` compare them with Lua's own), and every
// entry into `match` counts a step; every 1,024 steps the clock is read against the call's deadline, and past it
// the script stops with the same `timeout` error the budget hook raises (as Luau calls its interrupt on each entry
// to `match`). Lua itself bounds only the recursion depth (200, "pattern too complex"), as this does.
//
// Everything here runs inside a protected call the host made, so raising is allowed: each function is `[-n, +m, e]`.
#include "patterns.h"

#include <ctype.h>

// MARK: The budget

/// [-0, +0, e] Counts a step; every `STEPS_BETWEEN_CLOCK_READS` reads the clock and raises the budget's
/// `timeout` error once the deadline has passed.
static void count_step(Matcher *m) {
    if (--m->stepsToClockRead != 0) return;
    m->stepsToClockRead = STEPS_BETWEEN_CLOCK_READS;
    clua_check_deadline(m->L);
}

// MARK: Matching (Lua 5.4's semantics, step for step)

void clua_pattern_init(Matcher *m, lua_State *L, const char *s, size_t length, const char *p, size_t patternLength) {
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
        const char *rest = clua_pattern_match(m, s + count, end + 1);
        if (rest != NULL) return rest;
    }
    return NULL;
}

/// [-0, +0, e] `x-`: the shortest run that lets the rest match.
static const char *expand_lazily(Matcher *m, const char *s, const char *p, const char *end) {
    for (;;) {
        const char *rest = clua_pattern_match(m, s, end + 1);
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
    const char *rest = clua_pattern_match(m, s, p);
    if (rest == NULL) m->level--;
    return rest;
}

/// [-0, +0, e] Closes the innermost open capture at `s` and matches the rest.
static const char *end_capture(Matcher *m, const char *s, const char *p) {
    int l = open_capture(m);
    m->captures[l].length = s - m->captures[l].start;
    const char *rest = clua_pattern_match(m, s, p);
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
const char *clua_pattern_match(Matcher *m, const char *s, const char *p) {
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
                    const char *rest = clua_pattern_match(m, s + 1, end + 1);
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
ptrdiff_t clua_pattern_get_capture(Matcher *m, int i, const char *s, const char *e, const char **start) {
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
void clua_pattern_push_capture(Matcher *m, int i, const char *s, const char *e) {
    const char *start;
    ptrdiff_t length = clua_pattern_get_capture(m, i, s, e, &start);
    if (length != CAPTURE_POSITION) lua_pushlstring(m->L, start, (size_t)length);
}

/// [-0, +n, e] Pushes every capture of the match `s..e` (the whole match when there are none and `s` is
/// given); returns how many.
int clua_pattern_push_captures(Matcher *m, const char *s, const char *e) {
    int count = (m->level == 0 && s != NULL) ? 1 : m->level;
    luaL_checkstack(m->L, count, "too many captures");
    for (int i = 0; i < count; i++) clua_pattern_push_capture(m, i, s, e);
    return count;
}
