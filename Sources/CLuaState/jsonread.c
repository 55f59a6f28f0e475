// A recording's JSON read in C (`jsonread.c`), straight into the VM: whether a value there is the one the text
// holds, read off the text with nothing built (a replay checks its app's `init` against the recorded state so);
// and the value itself, built as tables (a durable store resumes its snapshot so), with the changes of the entries
// after it applied (a 100,000-item state: one pass over the text, not two trees made in Swift and converted). The
// format is docs/recordings.md's: integers without a fraction or exponent, floats with one; a list `1..n` as an
// array, a table of string keys as an object, any other as `{"$map": [[key, value], …]}`, an empty table as `{}`;
// a change `[path, value]`, or `[path]` for a removal.
//
// Each answers only when sure: text it does not take — malformed, a number it does not read exactly, a form the
// writer does not make — is "not the same", or no value, and the host's own reader then decides, and names what
// is wrong or where two values differ.
#include "barrier.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#define READ_DEPTH_MAX 256  /* deeper text is left to the host's reader */
#define READ_NUMBER_MAX 64  /* so is a number written longer than this */
#define READ_FIELDS_HELD 32 /* an object of at most this many fields is made with room for them */

#define NAME_SLOTS 64      /* field names met lately, by their length and ends (most objects repeat the last ones') */
#define NAME_LENGTH_MAX 40 /* (a longer name is made as a string each time) */

/// A field name met lately: its bytes, those of the string the reader's names table holds at its slot.
typedef struct NameSlot {
    const char *bytes;
    size_t length;
} NameSlot;

typedef struct Reader {
    lua_State *L;
    const unsigned char *at, *end;
    unsigned char *scratch; /* the string read last (its memory: the userdata at stack index `scratchIndex`) */
    size_t capacity;
    int scratchIndex;
    int namesIndex; /* a table holding the strings of `names`, so that they live while the reader does */
    NameSlot names[NAME_SLOTS];
} Reader;

static void skip_space(Reader *r) {
    while (r->at < r->end && (*r->at == ' ' || *r->at == '\t' || *r->at == '\n' || *r->at == '\r')) r->at++;
}

static int literal(Reader *r, const char *word, size_t count) {
    if ((size_t)(r->end - r->at) < count || memcmp(r->at, word, count) != 0) return 0;
    r->at += count;
    return 1;
}

/// [-0, +2, m] A reader of `text` whose scratch buffer and table of names are pushed now.
static void open_reader(Reader *r, lua_State *L, const char *text, size_t length) {
    memset(r, 0, sizeof *r);
    r->L = L;
    r->at = (const unsigned char *)text;
    r->end = r->at + length;
    r->capacity = 256;
    r->scratch = (unsigned char *)lua_newuserdatauv(L, r->capacity, 0);
    r->scratchIndex = lua_gettop(L);
    lua_createtable(L, NAME_SLOTS, 0);
    r->namesIndex = lua_gettop(L);
}

/// Whether a value was `read` and nothing but space follows it.
static int read_whole(Reader *r, int read) {
    if (!read) return 0;
    skip_space(r);
    return r->at == r->end;
}

/// [-0, +0, m] Room for `needed` bytes in the scratch buffer, what it holds kept.
static unsigned char *scratch_reserve(Reader *r, size_t needed) {
    if (needed <= r->capacity) return r->scratch;
    size_t capacity = 2 * r->capacity > needed ? 2 * r->capacity : needed;
    unsigned char *fresh = (unsigned char *)lua_newuserdatauv(r->L, capacity, 0);
    memcpy(fresh, r->scratch, r->capacity);
    lua_replace(r->L, r->scratchIndex);
    r->scratch = fresh;
    r->capacity = capacity;
    return fresh;
}

static int hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// The four hex digits of a `\u` escape (after the `u`).
static int read_hex4(Reader *r, unsigned *value) {
    if (r->end - r->at < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_digit(r->at[i]);
        if (digit < 0) return 0;
        v = v * 16 + (unsigned)digit;
    }
    r->at += 4;
    *value = v;
    return 1;
}

/// [-0, +0, m] Reads the string at the opening quote into the scratch buffer; `*length` its bytes. 0 when the text
/// is not a JSON string, or the string not UTF-8 text (a lone surrogate escaped, say).
static int read_string(Reader *r, size_t *length) {
    r->at++;
    size_t n = 0;
    for (;;) {
        if (r->at >= r->end) return 0;
        unsigned char c = *r->at;
        if (c == '"') {
            r->at++;
            break;
        }
        if (c < 0x20) return 0;
        if (c != '\\') {
            const unsigned char *start = r->at;
            while (r->at < r->end && *r->at != '"' && *r->at != '\\' && *r->at >= 0x20) r->at++;
            size_t run = (size_t)(r->at - start);
            memcpy(scratch_reserve(r, n + run) + n, start, run);
            n += run;
            continue;
        }
        r->at++;
        if (r->at >= r->end) return 0;
        unsigned char escaped = *r->at++;
        unsigned char utf8[4];
        size_t count = 1;
        switch (escaped) {
        case '"': case '\\': case '/': utf8[0] = escaped; break;
        case 'b': utf8[0] = '\b'; break;
        case 'f': utf8[0] = '\f'; break;
        case 'n': utf8[0] = '\n'; break;
        case 'r': utf8[0] = '\r'; break;
        case 't': utf8[0] = '\t'; break;
        case 'u': {
            unsigned code;
            if (!read_hex4(r, &code)) return 0;
            if (code >= 0xDC00 && code <= 0xDFFF) return 0;
            if (code >= 0xD800 && code <= 0xDBFF) {
                unsigned low;
                if (!literal(r, "\\u", 2) || !read_hex4(r, &low) || low < 0xDC00 || low > 0xDFFF) return 0;
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            }
            if (code < 0x80) {
                utf8[0] = (unsigned char)code;
            } else if (code < 0x800) {
                utf8[0] = (unsigned char)(0xC0 | (code >> 6));
                utf8[1] = (unsigned char)(0x80 | (code & 0x3F));
                count = 2;
            } else if (code < 0x10000) {
                utf8[0] = (unsigned char)(0xE0 | (code >> 12));
                utf8[1] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
                utf8[2] = (unsigned char)(0x80 | (code & 0x3F));
                count = 3;
            } else {
                utf8[0] = (unsigned char)(0xF0 | (code >> 18));
                utf8[1] = (unsigned char)(0x80 | ((code >> 12) & 0x3F));
                utf8[2] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
                utf8[3] = (unsigned char)(0x80 | (code & 0x3F));
                count = 4;
            }
            break;
        }
        default:
            return 0;
        }
        memcpy(scratch_reserve(r, n + count) + n, utf8, count);
        n += count;
    }
    if (!clua_json_is_utf8(r->scratch, n)) return 0;
    *length = n;
    return 1;
}

static int is_digit(const Reader *r, const unsigned char *p) { return p < r->end && *p >= '0' && *p <= '9'; }

/// Reads a JSON number: an integer (no fraction, no exponent) into `*integer`, any other into `*number`. 0 when the
/// text is not a JSON number, or not one read exactly here (an integer out of range, a float that is not finite).
static int read_number(Reader *r, int *isInteger, lua_Integer *integer, lua_Number *number) {
    const unsigned char *p = r->at;
    if (p < r->end && *p == '-') p++;
    if (!is_digit(r, p)) return 0;
    if (*p == '0') {
        p++;
    } else {
        while (is_digit(r, p)) p++;
    }
    int whole = 1;
    if (p < r->end && *p == '.') {
        p++;
        if (!is_digit(r, p)) return 0;
        while (is_digit(r, p)) p++;
        whole = 0;
    }
    if (p < r->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < r->end && (*p == '+' || *p == '-')) p++;
        if (!is_digit(r, p)) return 0;
        while (is_digit(r, p)) p++;
        whole = 0;
    }
    size_t count = (size_t)(p - r->at);
    if (count > READ_NUMBER_MAX) return 0;
    char text[READ_NUMBER_MAX + 1];
    memcpy(text, r->at, count);
    text[count] = 0;
    char *stop = NULL;
    errno = 0;
    if (whole) {
        long long value = strtoll(text, &stop, 10);
        if (errno != 0 || stop != text + count) return 0;
        *isInteger = 1;
        *integer = (lua_Integer)value;
    } else {
        double value = strtod(text, &stop);
        // (ERANGE with a result other than 0 is a subnormal, correctly rounded: `5e-324` is such a float.)
        if ((errno != 0 && (errno != ERANGE || value == 0)) || stop != text + count || !isfinite(value)) return 0;
        *isInteger = 0;
        *number = (lua_Number)value;
    }
    r->at = p;
    return 1;
}

/// [-0, +0, -] Whether the table at `index` holds exactly `count` entries.
static int holds_entries(lua_State *L, int index, lua_Integer count) {
    lua_Integer seen = 0;
    lua_pushnil(L);
    while (lua_next(L, index) != 0) {
        lua_pop(L, 1);
        if (++seen > count) {
            lua_pop(L, 1);
            return 0;
        }
    }
    return seen == count;
}

static int match_value(Reader *r, int index, int depth);

/// After `,` or the closing bracket: 1 to go on, 0 at the end, -1 for anything else.
static int next_item(Reader *r, unsigned char close) {
    skip_space(r);
    if (r->at >= r->end) return -1;
    if (*r->at == ',') {
        r->at++;
        return 1;
    }
    if (*r->at == close) {
        r->at++;
        return 0;
    }
    return -1;
}

/// After an opening bracket: 1 when items follow, 0 when `close` does (read past it).
static int opened(Reader *r, unsigned char close) {
    skip_space(r);
    if (r->at < r->end && *r->at == close) {
        r->at++;
        return 0;
    }
    return 1;
}

/// The start of a list, `[`: 1 when items follow, 0 for an empty list (read past it), -1 for anything else.
static int list_start(Reader *r) {
    skip_space(r);
    return literal(r, "[", 1) ? opened(r, ']') : -1;
}

/// [-0, +0, m] The value of the table at `index` under the key on top of the stack (popped), matched.
static int match_field(Reader *r, int index, int depth) {
    lua_rawget(r->L, index);
    int same = match_value(r, lua_gettop(r->L), depth + 1);
    lua_pop(r->L, 1);
    return same;
}

/// [-0, +(0|1), m] Pushes the string, boolean or number at the reader; 0, nothing pushed, for anything else — and,
/// `asKey`, for a float with an integer's value (a table holds such a key as the integer, and it is written so).
static int push_scalar(Reader *r, int asKey) {
    lua_State *L = r->L;
    if (r->at >= r->end) return 0;
    if (*r->at == '"') {
        size_t length;
        if (!read_string(r, &length)) return 0;
        lua_pushlstring(L, (const char *)r->scratch, length);
    } else if (literal(r, "true", 4)) {
        lua_pushboolean(L, 1);
    } else if (literal(r, "false", 5)) {
        lua_pushboolean(L, 0);
    } else {
        int isInteger;
        lua_Integer integer;
        lua_Number number;
        if (!read_number(r, &isInteger, &integer, &number)) return 0;
        if (isInteger) {
            lua_pushinteger(L, integer);
        } else {
            lua_Integer exact;
            if (asKey && lua_numbertointeger(number, &exact) && (lua_Number)exact == number) return 0;
            lua_pushnumber(L, number);
        }
    }
    return 1;
}

/// [-0, +(0|1), m] Pushes the key at the reader (see `push_scalar`).
static int push_key(Reader *r) { return push_scalar(r, 1); }

/// [-0, +(0|1), m] The start of a `$map` pair, `[key,`: pushes the key; 0, nothing pushed, for anything else.
static int pair_key(Reader *r) {
    skip_space(r);
    if (!literal(r, "[", 1)) return 0;
    skip_space(r);
    if (!push_key(r)) return 0;
    skip_space(r);
    if (literal(r, ",", 1)) return 1;
    lua_pop(r->L, 1);
    return 0;
}

/// The end of a `$map` pair, `]`, then `,` (1) or the end of the pairs (0); -1 for anything else.
static int pair_end(Reader *r) {
    skip_space(r);
    if (!literal(r, "]", 1)) return -1;
    return next_item(r, ']');
}

/// The start of the pairs of a `$map`, `[` (an empty list is never written: an empty table is `{}`).
static int pairs_start(Reader *r) { return list_start(r) == 1; }

/// [-0, +0, m] An object's field name and its colon, `"name":` (the name in the scratch buffer, `*length` bytes).
static int field_name(Reader *r, size_t *length) {
    skip_space(r);
    if (r->at >= r->end || *r->at != '"' || !read_string(r, length)) return 0;
    skip_space(r);
    return literal(r, ":", 1);
}

/// [-0, +1, m] Pushes the field name just read (`length` bytes of the scratch buffer) as a string: the one made
/// for it lately when there is one (a state's objects repeat their names: 100,000 items, three names), which spares
/// making — hashing and looking up — the same string again.
static void push_name(Reader *r, size_t length) {
    lua_State *L = r->L;
    if (length == 0 || length > NAME_LENGTH_MAX) {
        lua_pushlstring(L, (const char *)r->scratch, length);
        return;
    }
    unsigned slot = (unsigned)(length * 31 + r->scratch[0] * 7 + r->scratch[length - 1]) & (NAME_SLOTS - 1);
    NameSlot *name = &r->names[slot];
    if (name->length == length && memcmp(name->bytes, r->scratch, length) == 0) {
        lua_rawgeti(L, r->namesIndex, slot + 1);
        return;
    }
    lua_pushlstring(L, (const char *)r->scratch, length);
    lua_pushvalue(L, -1);
    lua_rawseti(L, r->namesIndex, slot + 1);
    name->bytes = lua_tostring(L, -1);
    name->length = length;
}

// MARK: Names given twice

/// The names (or `$map` keys) of one object read so far, by a hash of their bytes, to find one given twice: JSON
/// leaves open which value counts, and the host's reader refuses such text, so this one never takes it. Up to
/// `NAMES_SCANNED` are scanned; past them they are hashed into a table of their own. A hash met twice, whether
/// the name was or not, is "not taken" — the host's reader then decides, and names what is wrong.
#define NAMES_SCANNED 16
typedef struct NameSet {
    uint64_t scanned[NAMES_SCANNED];
    uint64_t *slots; /* (malloc'd: open addressing, `mask + 1` slots, 0 free) */
    size_t count, mask;
} NameSet;

static uint64_t hash_bytes(uint64_t hash, const void *bytes, size_t length) {
    const unsigned char *at = bytes;
    for (size_t i = 0; i < length; i++) hash = (hash ^ at[i]) * 0x100000001b3ULL;
    return hash;
}

/// The hash of the name just read (the scratch buffer's `length` bytes); never 0.
static uint64_t name_hash(const Reader *r, size_t length) {
    return hash_bytes(0xcbf29ce484222325ULL, r->scratch, length) | 1;
}

/// The hash of the scalar key at `index` (a `$map` key: its type and its bytes); never 0.
static uint64_t key_hash(lua_State *L, int index) {
    int type = lua_type(L, index);
    uint64_t hash = hash_bytes(0xcbf29ce484222325ULL, &type, sizeof type);
    if (type == LUA_TSTRING) {
        size_t length;
        const char *bytes = lua_tolstring(L, index, &length);
        hash = hash_bytes(hash, bytes, length);
    } else if (type == LUA_TNUMBER && lua_isinteger(L, index)) {
        lua_Integer integer = lua_tointeger(L, index);
        hash = hash_bytes(hash ^ 1, &integer, sizeof integer);
    } else if (type == LUA_TNUMBER) {
        lua_Number number = lua_tonumber(L, index);
        hash = hash_bytes(hash ^ 2, &number, sizeof number);
    } else {
        hash = hash_bytes(hash, "", lua_toboolean(L, index) ? 1 : 0);
    }
    return hash | 1;
}

/// Adds `hash`: 1, or 0 when the set holds it already (or its table cannot grow).
static int name_set_add(NameSet *set, uint64_t hash) {
    if (set->slots == NULL) {
        for (size_t i = 0; i < set->count; i++) {
            if (set->scanned[i] == hash) return 0;
        }
        if (set->count < NAMES_SCANNED) {
            set->scanned[set->count++] = hash;
            return 1;
        }
    }
    if (set->slots == NULL || 2 * (set->count + 1) > set->mask + 1) { /* (re)made with room for twice as many */
        size_t capacity = set->slots == NULL ? 4 * NAMES_SCANNED : 2 * (set->mask + 1);
        uint64_t *slots = calloc(capacity, sizeof *slots);
        if (slots == NULL) return 0;
        uint64_t *old = set->slots;
        size_t oldCount = old == NULL ? set->count : set->mask + 1;
        set->slots = slots;
        set->mask = capacity - 1;
        set->count = 0;
        for (size_t i = 0; i < oldCount; i++) {
            uint64_t each = old == NULL ? set->scanned[i] : old[i];
            if (each != 0) name_set_add(set, each);
        }
        free(old);
    }
    for (size_t i = (size_t)(hash ^ (hash >> 29)) & set->mask;; i = (i + 1) & set->mask) {
        if (set->slots[i] == hash) return 0;
        if (set->slots[i] == 0) {
            set->slots[i] = hash;
            set->count++;
            return 1;
        }
    }
}

static void name_set_free(NameSet *set) { free(set->slots); }

/// Whether the field name just read is `$map` (the map form, when it is the object's only field).
static int is_map(const Reader *r, size_t length) { return length == 4 && memcmp(r->scratch, "$map", 4) == 0; }

/// The start of an object (at its `{`): 1 when fields follow, 0 for an empty object (read past it).
static int object_start(Reader *r) {
    r->at++;
    return opened(r, '}');
}

/// The pairs of a `$map` (at its `[`), against the table at `index`.
static int match_pairs(Reader *r, int index, int depth) {
    if (!pairs_start(r)) return 0;
    NameSet keys = { .slots = NULL, .count = 0 };
    lua_Integer count = 0;
    int more = 1;
    while (more == 1) {
        if (!pair_key(r)) break;
        if (!name_set_add(&keys, key_hash(r->L, -1))) { /* (a key given twice) */
            lua_pop(r->L, 1);
            break;
        }
        if (!match_field(r, index, depth)) break;
        count++;
        more = pair_end(r);
    }
    name_set_free(&keys);
    return more == 0 && holds_entries(r->L, index, count);
}

static int match_object(Reader *r, int index, int depth) {
    if (!object_start(r)) return holds_entries(r->L, index, 0);
    NameSet names = { .slots = NULL, .count = 0 };
    lua_Integer count = 0;
    int more = 1;
    while (more == 1) {
        size_t length;
        if (!field_name(r, &length)) break;
        if (count == 0 && is_map(r, length)) {
            name_set_free(&names);
            if (!match_pairs(r, index, depth)) return 0;
            skip_space(r);
            return literal(r, "}", 1);
        }
        if (!name_set_add(&names, name_hash(r, length))) break; /* (a name given twice) */
        push_name(r, length);
        if (!match_field(r, index, depth)) break;
        count++;
        more = next_item(r, '}');
    }
    name_set_free(&names);
    return more == 0 && holds_entries(r->L, index, count);
}

static int match_array(Reader *r, int index, int depth) {
    lua_State *L = r->L;
    r->at++;
    if (!opened(r, ']')) return 0; /* (an empty table is written `{}`) */
    lua_Integer count = 0;
    int more = 1;
    while (more == 1) {
        lua_pushinteger(L, ++count);
        if (!match_field(r, index, depth)) return 0;
        more = next_item(r, ']');
    }
    return more == 0 && holds_entries(L, index, count);
}

/// [-0, +0, m] Whether the value at `index` (absolute) is the one the text at the reader holds (read past it).
static int match_value(Reader *r, int index, int depth) {
    lua_State *L = r->L;
    if (depth > READ_DEPTH_MAX || !lua_checkstack(L, 4)) return 0;
    skip_space(r);
    if (r->at >= r->end) return 0;
    int type = lua_type(L, index);
    switch (*r->at) {
    case '{':
        return type == LUA_TTABLE && match_object(r, index, depth);
    case '[':
        return type == LUA_TTABLE && match_array(r, index, depth);
    case '"': {
        size_t length, held;
        if (type != LUA_TSTRING || !read_string(r, &length)) return 0;
        const char *text = lua_tolstring(L, index, &held);
        return held == length && memcmp(text, r->scratch, length) == 0;
    }
    case 't':
        return literal(r, "true", 4) && type == LUA_TBOOLEAN && lua_toboolean(L, index);
    case 'f':
        return literal(r, "false", 5) && type == LUA_TBOOLEAN && !lua_toboolean(L, index);
    default: {
        int isInteger;
        lua_Integer integer;
        lua_Number number;
        if (type != LUA_TNUMBER || !read_number(r, &isInteger, &integer, &number)) return 0;
        if (isInteger) return lua_isinteger(L, index) && lua_tointeger(L, index) == integer;
        if (lua_isinteger(L, index)) return 0;
        lua_Number held = lua_tonumber(L, index);
        return memcmp(&held, &number, sizeof held) == 0; /* (the same bits: -0.0 is not 0.0 here) */
    }
    }
}

/// `matchesjson(value, text)` [-2, +1, m]: whether `value` is exactly the value the recording's JSON `text` holds;
/// false also when unsure (see above).
int clua_state_matches_json(lua_State *L) {
    size_t length;
    const char *text = luaL_checklstring(L, 2, &length);
    lua_settop(L, 2);
    Reader r;
    open_reader(&r, L, text, length);
    lua_pushboolean(L, read_whole(&r, match_value(&r, 1, 1)));
    return 1;
}

// MARK: Building the value

static int read_value(Reader *r, int depth);

/// [-0, +1, m] The pairs of a `$map` (at its `[`), as a new table. (Here and below, a reader that answers 0 may
/// leave what it pushed: the entry point drops it.)
static int read_pairs(Reader *r, int depth) {
    if (!pairs_start(r)) return 0;
    lua_createtable(r->L, 0, 0);
    int table = lua_gettop(r->L);
    int more = 1;
    while (more == 1) {
        if (!pair_key(r) || !read_value(r, depth + 1)) return 0;
        lua_pushvalue(r->L, -2);
        if (lua_rawget(r->L, table) != LUA_TNIL) return 0; /* (a key given twice: see `NameSet`) */
        lua_pop(r->L, 1);
        lua_rawset(r->L, table);
        more = pair_end(r);
    }
    return more == 0;
}

/// [-0, +0, -] Whether the `count` names held at `first`, `first + 2`, … (each followed by its value) hold one twice
/// (see `NameSet`): told by where their strings' bytes lie — Lua 5.4 keeps one string of each text of at most
/// `SHORT_STRING_MAX` bytes while it lives, so two such names are the same text only at the same address; longer ones
/// are compared — no lookup.
#define SHORT_STRING_MAX 40 /* (Lua 5.4's LUAI_MAXSHORTLEN) */
static int holds_a_name_twice(lua_State *L, int first, int count) {
    const char *bytes[READ_FIELDS_HELD];
    size_t lengths[READ_FIELDS_HELD];
    for (int i = 0; i < count; i++) {
        bytes[i] = lua_tolstring(L, first + 2 * i, &lengths[i]);
        for (int j = 0; j < i; j++) {
            if (lengths[j] != lengths[i]) continue;
            if (bytes[j] == bytes[i] || (lengths[i] > SHORT_STRING_MAX && memcmp(bytes[j], bytes[i], lengths[i]) == 0)) return 1;
        }
    }
    return 0;
}

/// [-0, +0, m] Sets the field whose name is at `name` (its value just above it) in the table at `table`; 0, nothing
/// set, when the table has that name already (a name given twice: see `NameSet`).
static int set_new_field(lua_State *L, int table, int name) {
    lua_pushvalue(L, name);
    if (lua_rawget(L, table) != LUA_TNIL) return 0;
    lua_pop(L, 1);
    lua_pushvalue(L, name);
    lua_pushvalue(L, name + 1);
    lua_rawset(L, table);
    return 1;
}

/// [-0, +1, m] The object at the reader (at its `{`), as a new table: its first `READ_FIELDS_HELD` fields are held
/// on the stack, so that a small object — most of a state — is made with room for them and filled without a rehash.
static int read_object(Reader *r, int depth) {
    lua_State *L = r->L;
    if (!object_start(r)) {
        lua_createtable(L, 0, 0);
        return 1;
    }
    int base = lua_gettop(L);
    int held = 0, table = 0;
    int more = 1;
    while (more == 1) {
        size_t length;
        if (!field_name(r, &length)) return 0;
        if (held == 0 && table == 0 && is_map(r, length)) {
            // The map form, when it is the object's only field (an object whose first field is `$map` among others
            // is left to the host's reader).
            if (!read_pairs(r, depth)) return 0;
            skip_space(r);
            return literal(r, "}", 1);
        }
        if (!lua_checkstack(L, 4)) return 0;
        push_name(r, length);
        if (!read_value(r, depth + 1)) return 0;
        if (table == 0 && held < READ_FIELDS_HELD) {
            held++;
        } else {
            if (table == 0) { /* more fields than are held: the table now, with the held ones */
                lua_createtable(L, 0, 2 * held);
                lua_insert(L, base + 1);
                table = base + 1;
                for (int i = 0; i < held; i++) {
                    if (!set_new_field(L, table, base + 2 + 2 * i)) return 0;
                }
                lua_rotate(L, base + 2, -2 * held); /* (the key and value just read to the bottom of the held) */
                lua_settop(L, base + 3);
                held = 0;
            }
            if (!set_new_field(L, table, lua_gettop(L) - 1)) return 0;
            lua_pop(L, 2);
        }
        more = next_item(r, '}');
    }
    if (more != 0) return 0;
    if (table == 0) {
        if (holds_a_name_twice(L, base + 1, held)) return 0;
        lua_createtable(L, 0, held);
        table = lua_gettop(L);
        for (int i = 0; i < held; i++) {
            lua_pushvalue(L, base + 1 + 2 * i);
            lua_pushvalue(L, base + 2 + 2 * i);
            lua_rawset(L, table);
        }
        lua_replace(L, base + 1);
        lua_settop(L, base + 1);
    }
    return 1;
}

/// [-0, +1, m] The array at the reader (at its `[`), as a new table: the list `1..n`.
static int read_array(Reader *r, int depth) {
    lua_State *L = r->L;
    r->at++;
    lua_createtable(L, 4, 0);
    int table = lua_gettop(L);
    if (!opened(r, ']')) return 1;
    lua_Integer count = 0;
    int more = 1;
    while (more == 1) {
        if (!read_value(r, depth + 1)) return 0;
        lua_rawseti(L, table, ++count);
        more = next_item(r, ']');
    }
    return more == 0;
}

/// [-0, +1, m] Pushes the value the text at the reader holds (read past it).
static int read_value(Reader *r, int depth) {
    lua_State *L = r->L;
    if (depth > READ_DEPTH_MAX || !lua_checkstack(L, 4)) return 0;
    skip_space(r);
    if (r->at >= r->end) return 0;
    switch (*r->at) {
    case '{':
        return read_object(r, depth);
    case '[':
        return read_array(r, depth);
    default:
        return push_scalar(r, 0);
    }
}

/// `decodejson(text)` [-1, +1, m]: the value a recording's JSON `text` holds, built; nil where this reader does
/// not take the text (see above).
int clua_state_decode_json(lua_State *L) {
    size_t length;
    const char *text = luaL_checklstring(L, 1, &length);
    lua_settop(L, 1);
    Reader r;
    open_reader(&r, L, text, length);
    if (!read_whole(&r, read_value(&r, 1))) lua_pushnil(L);
    return 1;
}

/// `applyjson(state, text)` [-2, +1, m]: the state after the changes a recording's entry lists in `text` (its
/// `changes`: `[[path…], value]`, or `[[path…]]` for a removal) — `state` changed in place, or the value of a change
/// of the whole state; nil where this reader does not take the text or a path does not lead through tables (the
/// changes read so far may have been made: the caller starts over the host's way).
int clua_state_apply_json(lua_State *L) {
    size_t length;
    const char *text = luaL_checklstring(L, 2, &length);
    lua_settop(L, 2);
    lua_pushvalue(L, 1); /* 3: the state */
    Reader r;
    open_reader(&r, L, text, length); /* 4, 5: its scratch, its names */
    const int base = lua_gettop(L);
    int more = list_start(&r);
    while (more == 1) {
        // The path's keys, pushed at base + 1 …
        skip_space(&r);
        if (!literal(&r, "[", 1)) goto refused;
        int keys = 0;
        int moreKeys = list_start(&r);
        while (moreKeys == 1) {
            skip_space(&r);
            if (keys >= READ_DEPTH_MAX || !lua_checkstack(L, 4) || !push_key(&r)) goto refused;
            keys++;
            moreKeys = next_item(&r, ']');
        }
        if (moreKeys != 0) goto refused;
        // … then the table that holds the last one (each key before it leads to a table), or nothing for the
        // whole state.
        int holder = 0;
        if (keys > 0) {
            lua_pushvalue(L, 3);
            for (int i = 1; i < keys; i++) {
                lua_pushvalue(L, base + i);
                if (lua_rawget(L, -2) != LUA_TTABLE) goto refused;
                lua_remove(L, -2);
            }
            if (lua_type(L, -1) != LUA_TTABLE) goto refused;
            holder = lua_gettop(L);
        }
        skip_space(&r);
        if (literal(&r, ",", 1)) {
            if (!read_value(&r, keys + 1)) goto refused;
        } else if (keys > 0) {
            lua_pushnil(L); /* (a removal) */
        } else {
            goto refused; /* (the whole state removed: never written) */
        }
        if (holder == 0) {
            lua_replace(L, 3);
        } else {
            lua_pushvalue(L, base + keys);
            lua_insert(L, -2);
            lua_rawset(L, holder);
        }
        lua_settop(L, base);
        skip_space(&r);
        if (!literal(&r, "]", 1)) goto refused;
        more = next_item(&r, ']');
    }
    if (!read_whole(&r, more == 0)) goto refused;
    lua_pushvalue(L, 3);
    return 1;
refused:
    lua_pushnil(L);
    return 1;
}
