// Writing Lua values as a recording's JSON into a byte buffer: `json.c`, used by the changes of each committed
// action (`changes.c`, called from the run loop in `runs.c`). Internal to CLuaState (not in `include/`: Swift never sees it).
#ifndef CLUA_JSON_H
#define CLUA_JSON_H

#include "clua_guard.h"

/// A byte buffer being written. It lives in a full userdata at `[1]` of a table (the holder, at a stack index
/// that stays valid while writing), so a Lua error — out of memory — leaks nothing and the buffer is reused;
/// growing replaces it there.
typedef struct CLuaJSON {
    lua_State *L;
    int holder;
    unsigned char *bytes;
    size_t length;
    size_t capacity;
} CLuaJSON;

/// [-0, +0, m] Opens the buffer held at `[1]` of the table at `holder` (made now if missing), its first
/// `length` bytes kept.
void clua_json_open(lua_State *L, CLuaJSON *o, int holder, size_t length);

/// [-0, +0, m] Makes room for `needed` more bytes.
void clua_json_grow(CLuaJSON *o, size_t needed);

static inline unsigned char *clua_json_reserve(CLuaJSON *o, size_t needed) {
    if (o->capacity - o->length < needed) clua_json_grow(o, needed);
    return o->bytes + o->length;
}

/// [-0, +0, m] Appends bytes.
static inline void clua_json_put(CLuaJSON *o, const void *data, size_t count) {
    memcpy(clua_json_reserve(o, count), data, count);
    o->length += count;
}

/// [-0, +0, m] Appends one byte.
static inline void clua_json_byte(CLuaJSON *o, unsigned char byte) {
    *clua_json_reserve(o, 1) = byte;
    o->length += 1;
}

/// A string, boolean or number read off Lua's stack by `clua_scalar_read`, kept to be written later without the
/// stack: a string by the address of its bytes, which stay where they are while the string lives (Lua's
/// collector does not move objects), so only while something holds the string.
typedef struct CLuaScalar {
    int type;      /* LUA_TSTRING, LUA_TBOOLEAN or LUA_TNUMBER */
    int isInteger; /* for a number */
    union {
        lua_Integer integer;
        lua_Number number;
        int boolean;
        struct {
            const char *text;
            size_t length;
        } string;
    } as;
} CLuaScalar;
/// [-0, +0, -] Reads the string, boolean or number at `index` into `*scalar`; returns 0 (nothing read) for any
/// other value. A float with an integer's value is read as that integer when `asKey` (as a table stores the key).
int clua_scalar_read(lua_State *L, int index, int asKey, CLuaScalar *scalar);
/// Whether two scalars are the same value to a table: equal keys (`rawequal`) when `asKey`; otherwise also the
/// same number subtype and, for a zero, the same sign (what the barrier's `is_same` says of values).
int clua_scalar_same(const CLuaScalar *a, const CLuaScalar *b, int asKey);
/// Whether `count` bytes are plain ASCII a JSON string holds as they are (no control character, `"` or `\`).
static inline int clua_json_is_plain(const unsigned char *bytes, size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (bytes[i] < 0x20 || bytes[i] == '"' || bytes[i] == '\\' || bytes[i] >= 0x80) return 0;
    }
    return 1;
}
/// Whether `count` bytes are UTF-8 as JSON text must be (RFC 3629: no overlong forms, no surrogates, at most
/// U+10FFFF) — what the state's strings must be (`is_plain_data`, barrier.h), and what Swift's strings are.
int clua_json_is_utf8(const unsigned char *bytes, size_t count);
/// [-0, +0, -] Writes an integer in decimal to `text` (room for 21 bytes); returns the bytes written.
size_t clua_json_integer_text(char *text, lua_Integer value);
/// [-0, +0, m] Appends a scalar as `clua_json_value` would. Returns 0 when it cannot be written exactly.
int clua_json_scalar(CLuaJSON *o, const CLuaScalar *scalar);
/// [-0, +0, m] Appends the value at `index` (absolute), `depth` tables deep. Returns 0 when it cannot be written
/// exactly (the caller drops what was written since it began).
int clua_json_value(CLuaJSON *o, int index, int depth);

/// [-0, +0, m] Ends a change whose path is written: `]`, the new value at `value` (none when nil: a removal),
/// `]`. Returns 0 when the value cannot be written.
int clua_json_end_change(CLuaJSON *o, int value);

/// [-0, +0, m] Appends the `changes` changes at `*cursor` of the list at `list` (the runtime's `collected`
/// layout: depth, keys, value) as a recording's `changes` array, moving the cursor past them. Returns 0 when
/// something in them cannot be written (the cursor moves all the same).
int clua_json_changes(CLuaJSON *o, int list, lua_Integer *cursor, lua_Integer changes);

#endif
