// The pattern matcher the sandbox's string functions share (`patterns.c`): Lua 5.4's semantics, step for step, under
// the time budget. Internal to CLuaGuard (not in `include/`).
#ifndef CLUA_PATTERNS_H
#define CLUA_PATTERNS_H

#include "clua_guard.h"

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


/// [-0, +0, -] Readies `m` to match pattern `p` (`patternLength` bytes) in subject `s` (`length` bytes).
void clua_pattern_init(Matcher *m, lua_State *L, const char *s, size_t length, const char *p, size_t patternLength);
/// [-0, +0, e] Where a match of `p` starting at `s` ends, or NULL; counts steps against the time budget.
const char *clua_pattern_match(Matcher *m, const char *s, const char *p);
/// [-0, +n, m] Pushes a match's captures (the whole match when it has none); returns how many.
int clua_pattern_push_captures(Matcher *m, const char *s, const char *e);
/// [-0, +1, e] Pushes capture `i` of the match from `s` to `e`.
void clua_pattern_push_capture(Matcher *m, int i, const char *s, const char *e);
/// [-0, +0, e] Capture `i` of the match from `s` to `e`: its length (or `CAPTURE_POSITION`), its start in `*start`.
ptrdiff_t clua_pattern_get_capture(Matcher *m, int i, const char *s, const char *e, const char **start);

#endif
