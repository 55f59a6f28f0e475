// The sandbox's `tostring` and `string.format`, in C.
//
// `tostring` is Lua's `luaL_tolstring` with identities for addresses: `"table: 0x55d0c3a5e2a0"` becomes
// `"table: 0x00000000000007"` — the seventh object shown — the same on every run. `format` is Lua's, with `%s`
// of a table, function, userdata or thread written as `tostring` writes it, and `%p` refused (no addresses).
//
// Everything here runs inside a protected call the host made (these are `lua_CFunction`s the scripts call),
// so raising is allowed: each function is `[-n, +m, e]`.
#include "clua_guard.h"

#include <ctype.h>
#include <float.h>
#include <locale.h>
#include <math.h>

#define ESCAPE '%' /* L_ESC: the conversions' mark */

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

/// [-0, +1, e] Pushes `tostring` of the value at `index`, in the running function's frame (its upvalue 1 the
/// identities): Lua's `luaL_tolstring` — a `__tostring` called from here, as from Lua's —, an identity for an address.
static void push_tostring(lua_State *L, int index) {
    int type = lua_type(L, index);
    size_t length;
    const char *text = luaL_tolstring(L, index, &length);
    if (has_address(type)) {
        size_t kept = without_address(text, length);
        if (kept != length) replace_address(L, index, kept);
    }
}

int clua_sandbox_tostring(lua_State *L) {
    if (lua_type(L, 1) == LUA_TNONE) return clua_argument_error(L, 1, "value expected", "tostring");
    push_tostring(L, 1);
    return 1;
}

// MARK: print

#define PRINT_WRITE lua_upvalueindex(2) /* the host's `write`: text, no line break */
#define PRINT_LINE lua_upvalueindex(3)  /* the host's `print`: the rest of a line, a line break, a flush */

/// [-pending, +0, e] Hands the `pending` pieces on top to `function` (`PRINT_WRITE` or `PRINT_LINE`), as one string.
static void print_pieces(lua_State *L, int pending, int function) {
    if (pending == 0) lua_pushliteral(L, "");
    else lua_concat(L, pending);
    lua_pushvalue(L, function);
    lua_insert(L, -2);
    lua_call(L, 1, 0);
}

int clua_sandbox_print(lua_State *L) {
    int count = lua_gettop(L);
    int pending = 0; /* pieces on the stack above the arguments, not written yet */
    for (int i = 1; i <= count; i++) {
        luaL_checkstack(L, 4, "too many values to print");
        // A `__tostring` runs code: what comes before it is written first, so that what it writes, or raises, comes
        // where Lua's `print` (which writes each value as it goes) has it.
        if (luaL_getmetafield(L, i, "__tostring") != LUA_TNIL) {
            lua_pop(L, 1);
            if (pending > 0) print_pieces(L, pending, PRINT_WRITE);
            pending = 0;
        }
        push_tostring(L, i);
        if (i > 1) {
            lua_pushliteral(L, "\t");
            lua_insert(L, -2);
            pending++;
        }
        pending++;
        if (pending >= 32) {
            lua_concat(L, pending);
            pending = 1;
        }
    }
    print_pieces(L, pending, PRINT_LINE);
    return 0;
}

int clua_make_sandbox_print(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    if (lua_getupvalue(L, 1, 1) == NULL) return luaL_argerror(L, 1, "the sandbox's tostring expected");
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    lua_pushcclosure(L, clua_sandbox_print, 3);
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

/// A long `%q` or format string is worked through in pieces: the budget is looked at after each (a piece of
/// plain bytes is copied at once; an escape is a step of its own).
#define PIECE_BYTES (64 << 10)
#define STEPS_BETWEEN_CLOCK_READS 1024

/// [-0, +0, e] Counts `count` steps; past `STEPS_BETWEEN_CLOCK_READS` of them, raises the budget's `timeout` once
/// it is spent. (`%q` of tens of megabytes of control bytes, or a format string of millions of conversions, ran
/// in this one C call for half a second past any budget.)
static void count_steps(lua_State *L, int *steps, int count) {
    *steps -= count;
    if (*steps > 0) return;
    *steps = STEPS_BETWEEN_CLOCK_READS;
    clua_check_deadline(L);
}

/// Whether `%q` writes the byte `c` escaped.
static int needs_escape(unsigned char c) {
    return c == '"' || c == '\\' || c == '\n' || iscntrl(c);
}

/// [-0, +0, e] `%q` of a string: in double quotes, with `"`, `\` and newlines escaped and control bytes as
/// decimal escapes (three digits when a digit follows), as Lua writes them; the bytes between escapes copied
/// as they are, a piece at a time.
static void add_quoted(lua_State *L, luaL_Buffer *b, const char *s, size_t length) {
    const char *end = s + length;
    int steps = STEPS_BETWEEN_CLOCK_READS;
    luaL_addchar(b, '"');
    while (s < end) {
        const char *plain = s, *limit = end - s > PIECE_BYTES ? s + PIECE_BYTES : end;
        while (s < limit && !needs_escape((unsigned char)*s)) s++;
        if (s > plain) {
            luaL_addlstring(b, plain, (size_t)(s - plain));
            count_steps(L, &steps, (int)((s - plain) >> 6) + 1);
            continue;
        }
        unsigned char c = (unsigned char)*s++;
        luaL_addchar(b, '\\');
        if (c == '"' || c == '\\' || c == '\n') {
            luaL_addchar(b, (char)c);
        } else { /* (`s` may be the end: a Lua string's bytes are followed by a NUL, which is no digit) */
            int wide = isdigit((unsigned char)*s);
            if (wide || c >= 100) luaL_addchar(b, (char)('0' + c / 100));
            if (wide || c >= 10) luaL_addchar(b, (char)('0' + c / 10 % 10));
            luaL_addchar(b, (char)('0' + c % 10));
        }
        count_steps(L, &steps, 1);
    }
    luaL_addchar(b, '"');
}

/// [-0, +0, e] `%q` of the argument: a literal Lua reads back as the same value.
static void add_literal(lua_State *L, luaL_Buffer *b, int argument) {
    switch (lua_type(L, argument)) {
    case LUA_TSTRING: {
        size_t length;
        const char *s = lua_tolstring(L, argument, &length);
        add_quoted(L, b, s, length);
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

int clua_sandbox_format(lua_State *L) {
    int top = lua_gettop(L);
    int argument = 1;
    size_t length;
    const char *format = luaL_checklstring(L, argument, &length);
    const char *end = format + length;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int steps = STEPS_BETWEEN_CLOCK_READS;
    while (format < end) {
        if (*format != ESCAPE) { /* the text up to the next conversion, a piece at a time */
            size_t left = (size_t)(end - format), piece = left > PIECE_BYTES ? PIECE_BYTES : left;
            const char *mark = memchr(format, ESCAPE, piece);
            size_t plain = mark == NULL ? piece : (size_t)(mark - format);
            luaL_addlstring(&b, format, plain);
            format += plain;
            count_steps(L, &steps, (int)(plain >> 6) + 1);
            continue;
        }
        count_steps(L, &steps, 1);
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
