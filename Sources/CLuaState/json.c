// The session journal's changes, written as a recording's JSON, in C (`json.h` is the interface).
//
// The run loop (`runs.c`, through `changes_record` in `changes.c`) reads what each committed action changed while
// its journal is at hand and writes it here, straight into a byte buffer, as the JSON a recording holds for it
// (docs/recordings.md, "Recordings"; `RecordingLine.swift`): `[[path…], value]` per change, `[[path…]]` for a removal. The host takes the buffer once
// per run, so recording a session costs the store's thread what the action changed, encoded once, and nothing
// is converted into Swift values unless someone asks (`JournalEntry.changes`).
//
// The JSON is what `RecordingJSON.encode` writes for the same values: integers without a fraction or exponent,
// floats always with one (the shortest of 15, 16 or 17 significant digits that reads back exactly); a list
// `1..n` as an array; a table whose keys are all strings as an object, keys in byte order; any other table as
// `{"$map": [[key, value], …]}` (the list part first, then the other keys: booleans, numbers, strings, each in
// order); an empty table as `{}`. What JSON cannot hold exactly — a string that is not UTF-8, a number that is
// not finite, a value that is not data, tables nested deeper than `ENCODE_DEPTH` — is not written here: the
// caller drops what it wrote and leaves that action's changes to Swift, which converts them itself.
#include "json.h"

#include <math.h>
#include <stdio.h>

/// Deeper than any state converts to Swift (`LuaLimits.conversionDepth`): left to Swift, which says why.
#define ENCODE_DEPTH 200
/// Tables with at most this many keys to sort keep them on the stack; larger ones in a scratch table.
#define KEYS_ON_STACK 32
/// The buffer's first size.
#define BUFFER_START 4096

// MARK: The output

void clua_json_open(lua_State *L, CLuaJSON *o, int holder, size_t length) {
    o->L = L;
    o->holder = lua_absindex(L, holder);
    if (lua_rawgeti(L, o->holder, 1) != LUA_TUSERDATA) {
        lua_pop(L, 1);
        lua_newuserdatauv(L, BUFFER_START, 0);
        lua_pushvalue(L, -1);
        lua_rawseti(L, o->holder, 1);
        length = 0;
    }
    o->bytes = (unsigned char *)lua_touserdata(L, -1);
    o->capacity = lua_rawlen(L, -1);
    o->length = length <= o->capacity ? length : 0; /* (a buffer filled to the last byte keeps it all) */
    lua_pop(L, 1);
}

void clua_json_grow(CLuaJSON *o, size_t needed) {
    size_t capacity = o->capacity * 2;
    while (capacity - o->length < needed) {
        if (capacity > ((size_t)1 << 40)) luaL_error(o->L, "a journal entry too large to encode");
        capacity *= 2;
    }
    unsigned char *bytes = (unsigned char *)lua_newuserdatauv(o->L, capacity, 0);
    memcpy(bytes, o->bytes, o->length);
    lua_rawseti(o->L, o->holder, 1);
    o->bytes = bytes;
    o->capacity = capacity;
}

#define put clua_json_put
#define put_byte clua_json_byte
#define reserve clua_json_reserve
#define PUT_LITERAL(o, text) put((o), (text), sizeof(text) - 1)
// MARK: Scalars

size_t clua_json_integer_text(char *text, lua_Integer value) {
    char digits[24];
    size_t count = 0;
    lua_Unsigned magnitude = value < 0 ? (lua_Unsigned)0 - (lua_Unsigned)value : (lua_Unsigned)value;
    do {
        digits[count++] = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude != 0);
    if (value < 0) digits[count++] = '-';
    for (size_t i = 0; i < count; i++) text[i] = digits[count - 1 - i];
    return count;
}

/// [-0, +0, m] An integer, in decimal.
static void put_integer(CLuaJSON *o, lua_Integer value) {
    o->length += clua_json_integer_text((char *)reserve(o, 24), value);
}

/// [-0, +0, m] A finite float, with a fraction or an exponent; 0 (nothing written) when it is not finite.
static int put_float(CLuaJSON *o, lua_Number value) {
    if (!isfinite(value)) return 0;
    char text[48];
    int count = 0;
    for (int precision = 15; precision <= 17; precision++) {
        count = snprintf(text, sizeof text, "%.*g", precision, (double)value);
        if (strtod(text, NULL) == value) break;
    }
    int exact = 0;
    for (int i = 0; i < count; i++) {
        if (text[i] == ',') text[i] = '.'; /* a locale's decimal comma */
        if (text[i] == '.' || text[i] == 'e') exact = 1;
    }
    put(o, text, (size_t)count);
    if (!exact) PUT_LITERAL(o, ".0");
    return 1;
}

int clua_json_is_utf8(const unsigned char *bytes, size_t count) {
    size_t i = 0;
    while (i < count) {
        // (Eight ASCII bytes at a time: most strings of a state are ASCII.)
        if (count - i >= 8) {
            uint64_t word;
            memcpy(&word, bytes + i, sizeof word);
            if ((word & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char lead = bytes[i];
        if (lead < 0x80) {
            i++;
            continue;
        }
        size_t extra;
        uint32_t point;
        if (lead >= 0xC2 && lead <= 0xDF) {
            extra = 1;
            point = lead & 0x1F;
        } else if (lead >= 0xE0 && lead <= 0xEF) {
            extra = 2;
            point = lead & 0x0F;
        } else if (lead >= 0xF0 && lead <= 0xF4) {
            extra = 3;
            point = lead & 0x07;
        } else {
            return 0;
        }
        if (count - i <= extra) return 0;
        for (size_t k = 1; k <= extra; k++) {
            unsigned char next = bytes[i + k];
            if ((next & 0xC0) != 0x80) return 0;
            point = (point << 6) | (next & 0x3F);
        }
        if (extra == 2 && (point < 0x800 || (point >= 0xD800 && point <= 0xDFFF))) return 0;
        if (extra == 3 && (point < 0x10000 || point > 0x10FFFF)) return 0;
        i += extra + 1;
    }
    return 1;
}

/// [-0, +0, m] A string, quoted as `RecordingJSON.quote` does (`\"`, `\\`, `\n`, `\r`, `\t`, other control
/// characters as `\u00XX`); 0 (nothing written) when it is not UTF-8.
static int put_string(CLuaJSON *o, const char *text, size_t count) {
    const unsigned char *bytes = (const unsigned char *)text;
    if (clua_json_is_plain(bytes, count)) {
        unsigned char *out = reserve(o, count + 2);
        out[0] = '"';
        memcpy(out + 1, bytes, count);
        out[count + 1] = '"';
        o->length += count + 2;
        return 1;
    }
    if (!clua_json_is_utf8(bytes, count)) return 0;
    static const char hex[] = "0123456789abcdef";
    put_byte(o, '"');
    size_t run = 0;
    for (size_t i = 0; i < count; i++) {
        unsigned char byte = bytes[i];
        if (byte >= 0x20 && byte != '"' && byte != '\\') continue;
        put(o, bytes + run, i - run);
        run = i + 1;
        switch (byte) {
        case '"': PUT_LITERAL(o, "\\\""); break;
        case '\\': PUT_LITERAL(o, "\\\\"); break;
        case '\n': PUT_LITERAL(o, "\\n"); break;
        case '\r': PUT_LITERAL(o, "\\r"); break;
        case '\t': PUT_LITERAL(o, "\\t"); break;
        default: {
            char escape[6] = { '\\', 'u', '0', '0', hex[byte >> 4], hex[byte & 15] };
            put(o, escape, sizeof escape);
        }
        }
    }
    put(o, bytes + run, count - run);
    put_byte(o, '"');
    return 1;
}

// MARK: Scalars kept off the stack

int clua_scalar_read(lua_State *L, int index, int asKey, CLuaScalar *scalar) {
    scalar->type = lua_type(L, index);
    switch (scalar->type) {
    case LUA_TSTRING:
        scalar->as.string.text = lua_tolstring(L, index, &scalar->as.string.length);
        return 1;
    case LUA_TBOOLEAN:
        scalar->as.boolean = lua_toboolean(L, index);
        return 1;
    case LUA_TNUMBER: {
        int exact = 0;
        if (asKey || lua_isinteger(L, index)) {
            lua_Integer integer = lua_tointegerx(L, index, &exact); /* (a float only when it is an integer's value) */
            if (exact) {
                scalar->isInteger = 1;
                scalar->as.integer = integer;
                return 1;
            }
        }
        scalar->isInteger = 0;
        scalar->as.number = lua_tonumber(L, index);
        return 1;
    }
    default:
        return 0;
    }
}

int clua_scalar_same(const CLuaScalar *a, const CLuaScalar *b, int asKey) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case LUA_TSTRING:
        return a->as.string.length == b->as.string.length &&
               (a->as.string.text == b->as.string.text || memcmp(a->as.string.text, b->as.string.text, a->as.string.length) == 0);
    case LUA_TBOOLEAN:
        return a->as.boolean == b->as.boolean;
    default:
        if (a->isInteger != b->isInteger) return 0; /* (keys: a float key never has an integer's value) */
        if (a->isInteger) return a->as.integer == b->as.integer;
        return a->as.number == b->as.number && (asKey || a->as.number != 0 || signbit(a->as.number) == signbit(b->as.number));
    }
}

int clua_json_scalar(CLuaJSON *o, const CLuaScalar *scalar) {
    switch (scalar->type) {
    case LUA_TSTRING:
        return put_string(o, scalar->as.string.text, scalar->as.string.length);
    case LUA_TBOOLEAN:
        if (scalar->as.boolean) PUT_LITERAL(o, "true"); else PUT_LITERAL(o, "false");
        return 1;
    case LUA_TNUMBER:
        if (scalar->isInteger) {
            put_integer(o, scalar->as.integer);
            return 1;
        }
        return put_float(o, scalar->as.number);
    default:
        return 0;
    }
}

// MARK: Values


/// A key of a table that is not in its list part, for sorting: booleans, then numbers, then strings
/// (`LuaKey`'s order), and where it is (a stack slot, or a position in the scratch table).
typedef struct Key {
    int rank;
    int isInteger;
    lua_Integer integer;
    lua_Number number;
    const char *text;
    size_t length;
    int slot;
} Key;

static int compare_keys(const void *left, const void *right) {
    const Key *a = (const Key *)left, *b = (const Key *)right;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    switch (a->rank) {
    case 0:
        return (a->integer > b->integer) - (a->integer < b->integer);
    case 1:
        if (a->isInteger && b->isInteger) return (a->integer > b->integer) - (a->integer < b->integer);
        return (a->number > b->number) - (a->number < b->number);
    default: {
        size_t common = a->length < b->length ? a->length : b->length;
        int order = memcmp(a->text, b->text, common);
        if (order != 0) return order;
        return (a->length > b->length) - (a->length < b->length);
    }
    }
}

/// [-0, +0, -] Describes the key at `index` (a boolean, number or string); 0 for any other type.
static int describe_key(lua_State *L, int index, Key *key) {
    switch (lua_type(L, index)) {
    case LUA_TBOOLEAN:
        key->rank = 0;
        key->integer = lua_toboolean(L, index);
        return 1;
    case LUA_TNUMBER:
        key->rank = 1;
        key->isInteger = lua_isinteger(L, index);
        key->integer = lua_tointeger(L, index);
        key->number = lua_tonumber(L, index);
        return 1;
    case LUA_TSTRING:
        key->rank = 2;
        key->text = lua_tolstring(L, index, &key->length);
        return 1;
    default:
        return 0;
    }
}

/// [-1, +(1|0), -] `lua_next` over the table at `t`, past the keys of its list part (`1..sequence`), leaving only
/// the key: 0 at the end.
static int next_other_key(lua_State *L, int t, lua_Integer sequence) {
    while (lua_next(L, t) != 0) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1)) return 1;
        lua_Integer k = lua_tointeger(L, -1);
        if (k < 1 || k > sequence) return 1;
    }
    return 0;
}

/// [-0, +0, m] The table at `t`, as its shape says (the file's header). 0 when something in it is not encoded
/// here (the caller drops what was written).
static int put_table(CLuaJSON *o, int t, int depth) {
    lua_State *L = o->L;
    if (depth >= ENCODE_DEPTH || !lua_checkstack(L, KEYS_ON_STACK + 8)) return 0;
    int top = lua_gettop(L);
    lua_Integer border = (lua_Integer)lua_rawlen(L, t), sequence = 0;
    while (sequence < border) {
        int type = lua_rawgeti(L, t, sequence + 1);
        lua_pop(L, 1);
        if (type == LUA_TNIL) break;
        sequence++;
    }
    // The other keys: how many, whether all are strings, and whether the only one is "$map".
    size_t others = 0;
    int strings = 1, onlyMap = 0;
    lua_pushnil(L);
    while (next_other_key(L, t, sequence)) {
        others++;
        if (lua_type(L, -1) != LUA_TSTRING) {
            strings = 0;
        } else {
            size_t length;
            const char *text = lua_tolstring(L, -1, &length);
            onlyMap = length == 4 && memcmp(text, "$map", 4) == 0;
        }
    }
    if (others == 0 && sequence > 0) { /* a list */
        put_byte(o, '[');
        for (lua_Integer i = 1; i <= sequence; i++) {
            if (i > 1) put_byte(o, ',');
            lua_rawgeti(L, t, i);
            if (!clua_json_value(o, lua_gettop(L), depth + 1)) return lua_settop(L, top), 0;
            lua_pop(L, 1);
        }
        put_byte(o, ']');
        return 1;
    }
    int object = sequence == 0 && strings && !(others == 1 && onlyMap);
    // The other keys, sorted: on the stack when few, else in a scratch table; described in `keys`.
    Key small[KEYS_ON_STACK];
    Key *keys = small;
    int scratch = 0;
    if (others > KEYS_ON_STACK) {
        if (others > (size_t)INT32_MAX) return 0;
        keys = (Key *)lua_newuserdatauv(L, others * sizeof(Key), 0);
        lua_createtable(L, (int)others, 0);
        scratch = lua_gettop(L);
    }
    size_t count = 0;
    lua_pushnil(L);
    while (next_other_key(L, t, sequence)) {
        if (count == others) break; /* (cannot happen: the table is not written to meanwhile) */
        Key *key = &keys[count++];
        lua_pushvalue(L, -1);
        if (scratch != 0) {
            lua_rawseti(L, scratch, (lua_Integer)count);
            key->slot = (int)count;
        } else {
            lua_insert(L, -2); /* keep the copy below the key `next` goes on from */
            key->slot = lua_gettop(L) - 1;
        }
        if (!describe_key(L, scratch != 0 ? -1 : key->slot, key)) return lua_settop(L, top), 0;
    }
    qsort(keys, count, sizeof(Key), compare_keys);
    if (object) {
        put_byte(o, '{');
    } else {
        PUT_LITERAL(o, "{\"$map\":[");
        for (lua_Integer i = 1; i <= sequence; i++) {
            if (i > 1) put_byte(o, ',');
            put_byte(o, '[');
            put_integer(o, i);
            put_byte(o, ',');
            lua_rawgeti(L, t, i);
            if (!clua_json_value(o, lua_gettop(L), depth + 1)) return lua_settop(L, top), 0;
            lua_pop(L, 1);
            put_byte(o, ']');
        }
    }
    for (size_t i = 0; i < count; i++) {
        if (i > 0 || (!object && sequence > 0)) put_byte(o, ',');
        if (scratch != 0) lua_rawgeti(L, scratch, keys[i].slot); else lua_pushvalue(L, keys[i].slot);
        int key = lua_gettop(L);
        if (!object) put_byte(o, '[');
        if (!clua_json_value(o, key, depth + 1)) return lua_settop(L, top), 0;
        put_byte(o, object ? ':' : ',');
        lua_pushvalue(L, key);
        lua_rawget(L, t);
        if (!clua_json_value(o, key + 1, depth + 1)) return lua_settop(L, top), 0;
        if (!object) put_byte(o, ']');
        lua_settop(L, key - 1);
    }
    if (object) put_byte(o, '}'); else PUT_LITERAL(o, "]}");
    lua_settop(L, top);
    return 1;
}

int clua_json_value(CLuaJSON *o, int index, int depth) {
    lua_State *L = o->L;
    switch (lua_type(L, index)) {
    case LUA_TNIL:
        PUT_LITERAL(o, "null");
        return 1;
    case LUA_TBOOLEAN:
        if (lua_toboolean(L, index)) PUT_LITERAL(o, "true"); else PUT_LITERAL(o, "false");
        return 1;
    case LUA_TNUMBER:
        if (lua_isinteger(L, index)) {
            put_integer(o, lua_tointeger(L, index));
            return 1;
        }
        return put_float(o, lua_tonumber(L, index));
    case LUA_TSTRING: {
        size_t length;
        const char *text = lua_tolstring(L, index, &length);
        return put_string(o, text, length);
    }
    case LUA_TTABLE:
        return put_table(o, index, depth);
    default:
        return 0;
    }
}

// MARK: Records

/// [-0, +0, -] `list[at]` as an integer (0 when it is not one).
static lua_Integer integer_at(lua_State *L, int list, lua_Integer at) {
    lua_rawgeti(L, list, at);
    lua_Integer value = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return value;
}

int clua_json_end_change(CLuaJSON *o, int value) {
    put_byte(o, ']');
    if (!lua_isnil(o->L, value)) {
        put_byte(o, ',');
        if (!clua_json_value(o, value, 0)) return 0;
    }
    put_byte(o, ']');
    return 1;
}

int clua_json_changes(CLuaJSON *o, int collected, lua_Integer *cursor, lua_Integer changes) {
    lua_State *L = o->L;
    int ok = 1;
    put_byte(o, '[');
    for (lua_Integer j = 0; j < changes; j++) {
        lua_Integer signedDepth = integer_at(L, collected, (*cursor)++);
        lua_Integer depth = signedDepth < 0 ? -signedDepth : signedDepth;
        if (ok) {
            if (j > 0) put_byte(o, ',');
            PUT_LITERAL(o, "[[");
        }
        for (lua_Integer k = 0; k < depth; k++) {
            if (!ok) continue;
            if (k > 0) put_byte(o, ',');
            lua_rawgeti(L, collected, *cursor + k);
            ok = clua_json_value(o, lua_gettop(L), 0);
            lua_pop(L, 1);
        }
        *cursor += depth;
        if (ok) put_byte(o, ']');
        if (signedDepth >= 0) {
            if (ok) {
                put_byte(o, ',');
                lua_rawgeti(L, collected, *cursor);
                ok = clua_json_value(o, lua_gettop(L), 0);
                lua_pop(L, 1);
            }
            *cursor += 1;
        }
        if (ok) put_byte(o, ']');
    }
    if (ok) put_byte(o, ']');
    return ok;
}
