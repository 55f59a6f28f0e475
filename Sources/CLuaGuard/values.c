// Copying converted values inside the VM.
#include "clua_guard.h"
#include <string.h>

static int clamp_size(lua_Unsigned size) { return size > INT32_MAX ? INT32_MAX : (int)size; }

/// [-0, +1] The general copy: entry by entry, nested tables copied in turn.
static void copy_entries(lua_State *L, int index, int sequence, int others) {
    lua_createtable(L, sequence, others);
    lua_pushnil(L);
    while (lua_next(L, index) != 0) { /* copy, key, value */
        if (lua_type(L, -1) == LUA_TTABLE) {
            CLuaCopyShape nested = { -1, -1, 0, 0 };
            clua_copy_plain_table(L, -1, 0, &nested);
            lua_remove(L, -2);
        }
        lua_pushvalue(L, -2); /* copy, key, value, key */
        lua_pushvalue(L, -2); /* copy, key, value, key, value */
        lua_rawset(L, -5);
        lua_pop(L, 1);
    }
}

void clua_copy_plain_table(lua_State *L, int index, int scratch, CLuaCopyShape *shape) {
    index = lua_absindex(L, index);
    if (shape->sequence < 0) {
        // Sized before it is filled (growing a table rehashes it): the sequence part and the other keys,
        // counted. A flat table (no table inside) also leaves its keys and values in a list at `scratch`,
        // from which the next copies of it are made without walking it again.
        lua_Unsigned length = lua_rawlen(L, index);
        lua_Unsigned entries = 0;
        int flat = 1;
        lua_pushnil(L);
        while (lua_next(L, index) != 0) {
            if (lua_type(L, -1) == LUA_TTABLE) flat = 0;
            lua_pop(L, 1);
            entries++;
        }
        shape->sequence = clamp_size(length);
        shape->others = clamp_size(entries > length ? entries - length : 0);
        shape->entries = clamp_size(entries);
        shape->flat = 0;
        if (flat && scratch != 0 && entries <= 64) {
            lua_createtable(L, 2 * (int)entries, 0);
            int position = 1;
            lua_pushnil(L);
            while (lua_next(L, index) != 0) { /* pairs, key, value */
                lua_rawseti(L, -3, position + 1);
                lua_pushvalue(L, -1);
                lua_rawseti(L, -3, position);
                position += 2;
            }
            lua_replace(L, scratch);
            shape->flat = 1;
        }
    }
    if (!shape->flat) {
        copy_entries(L, index, shape->sequence, shape->others);
        return;
    }
    lua_createtable(L, shape->sequence, shape->others);
    for (int position = 1; position < 2 * shape->entries; position += 2) {
        lua_rawgeti(L, scratch, position);
        lua_rawgeti(L, scratch, position + 1);
        lua_rawset(L, -3);
    }
}

/// [-0, +1] A deep copy of the table at `index` (plain data), made in one pass: sized as the table copied before it at
/// this depth was (`sizes`, updated to this one's), so that a run of actions of one shape are each copied into a
/// table of the right size without counting their keys first.
static void copy_data(lua_State *L, int index, int depth, int (*sizes)[2]) {
    index = lua_absindex(L, index);
    int sequence = sizes[depth][0], others = sizes[depth][1];
    lua_createtable(L, sequence, others);
    int seen = 0, counted = 0;
    lua_pushnil(L);
    while (lua_next(L, index) != 0) { /* copy, key, value */
        if (lua_type(L, -2) == LUA_TNUMBER && lua_isinteger(L, -2) && lua_tointeger(L, -2) == counted + 1) counted++;
        seen++;
        if (lua_type(L, -1) == LUA_TTABLE) {
            if (depth + 1 >= CLUA_COPY_DEPTH) luaL_error(L, "a table nested deeper than %d levels cannot be copied", CLUA_COPY_DEPTH);
            copy_data(L, -1, depth + 1, sizes);
            lua_remove(L, -2);
        }
        lua_pushvalue(L, -2); /* copy, key, value, key */
        lua_insert(L, -2);    /* copy, key, key, value */
        lua_rawset(L, -4);
    }
    sizes[depth][0] = counted;
    sizes[depth][1] = seen - counted;
}

/// Whether the table at `index` holds no tables (as keys or values) and has no metatable: nothing a function that
/// only reads its fields could change.
static int holds_no_tables(lua_State *L, int index) {
    if (lua_getmetatable(L, index)) {
        lua_pop(L, 1);
        return 0;
    }
    lua_pushnil(L);
    while (lua_next(L, index) != 0) {
        if (lua_type(L, -1) == LUA_TTABLE || lua_type(L, -2) == LUA_TTABLE) {
            lua_pop(L, 2);
            return 0;
        }
        lua_pop(L, 1);
    }
    return 1;
}

/// Whether none of the fields of the table at `index` named in the list at `keys` holds a table (and the table has
/// no metatable): nothing a function that reads only those fields could change.
static int holds_no_tables_at(lua_State *L, int index, int keys) {
    if (lua_getmetatable(L, index)) {
        lua_pop(L, 1);
        return 0;
    }
    lua_Integer count = (lua_Integer)lua_rawlen(L, keys);
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, keys, i);
        int type = lua_rawget(L, index);
        lua_pop(L, 1);
        if (type == LUA_TTABLE) return 0;
    }
    return 1;
}

int clua_copy_data(lua_State *L) {
    int shared = lua_type(L, 2) == LUA_TTABLE ? holds_no_tables_at(L, 1, 2) : lua_toboolean(L, 2) && holds_no_tables(L, 1);
    if (lua_type(L, 1) != LUA_TTABLE || shared) {
        lua_settop(L, 1);
        return 1;
    }
    luaL_checkstack(L, 4 * CLUA_COPY_DEPTH + 8, "a table nested too deep to copy");
    // The sizes of the tables copied last, per depth: the closure's upvalue (a full userdata).
    int (*sizes)[2] = lua_touserdata(L, lua_upvalueindex(1));
    copy_data(L, 1, 0, sizes);
    return 1;
}

int clua_push_copy_data(lua_State *L) {
    int (*sizes)[2] = lua_newuserdatauv(L, sizeof(int[CLUA_COPY_DEPTH][2]), 0);
    memset(sizes, 0, sizeof(int[CLUA_COPY_DEPTH][2]));
    lua_pushcclosure(L, clua_copy_data, 1);
    return 1;
}

void clua_repeat_in_list(lua_State *L, int list, lua_Integer first, lua_Integer last, int scratch, CLuaCopyShape *shape,
                         int shareFlat) {
    list = lua_absindex(L, list);
    int copies = lua_rawgeti(L, list, first - 1) == LUA_TTABLE; /* the value repeated */
    if (copies && shareFlat) copies = !holds_no_tables(L, lua_gettop(L));
    for (lua_Integer position = first; position <= last; position++) {
        if (copies) clua_copy_plain_table(L, -1, scratch, shape);
        else lua_pushvalue(L, -1);
        lua_rawseti(L, list, position);
    }
    lua_pop(L, 1);
}

int clua_read_flat_fields(lua_State *L, int index, CLuaFlatField *fields, int capacity) {
    if (!lua_checkstack(L, 2)) return -1; /* (the key and the value `lua_next` pushes) */
    index = lua_absindex(L, index);
    int count = 0;
    lua_pushnil(L);
    while (lua_next(L, index) != 0) { /* key, value */
        int type = lua_type(L, -1);
        if (count == capacity || lua_type(L, -2) != LUA_TSTRING
            || (type != LUA_TBOOLEAN && type != LUA_TNUMBER && type != LUA_TSTRING)) {
            lua_pop(L, 2);
            return -1;
        }
        CLuaFlatField *field = &fields[count++];
        field->key = lua_tolstring(L, -2, &field->keyLength); /* (a string key: no conversion) */
        field->type = type;
        switch (type) {
        case LUA_TBOOLEAN:
            field->boolean = lua_toboolean(L, -1);
            break;
        case LUA_TNUMBER:
            field->isInteger = lua_isinteger(L, -1);
            if (field->isInteger) field->integer = lua_tointeger(L, -1);
            else field->number = lua_tonumber(L, -1);
            break;
        default:
            field->string = lua_tolstring(L, -1, &field->stringLength);
            break;
        }
        lua_pop(L, 1);
    }
    return count;
}

// MARK: Short strings

void clua_push_short_string(lua_State *L, uint64_t low, uint64_t high, const char *bytes, size_t length) {
    CLuaGuard *g = clua_guard(L);
    uint64_t mixed = (low ^ (high * 0x9E3779B97F4A7C15u)) * 0xD6E8FEB86659FD93u;
    // Two slots a string may be in (a pair): the one its form names, where the string pushed last of the two
    // goes, and its neighbour, where the one it displaced goes.
    unsigned slot = (unsigned)(mixed >> 58) & (CLUA_SHORT_STRING_SLOTS - 1);
    const unsigned pair[2] = { slot, slot ^ 1u };
    for (int i = 0; i < 2; i++) {
        unsigned probe = pair[i];
        int ref = g->shortStringRefs[probe];
        if (ref > 0 && g->shortStringForms[probe][0] == low && g->shortStringForms[probe][1] == high) {
            lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
            return;
        }
    }
    lua_pushlstring(L, bytes, length);
    lua_pushvalue(L, -1);
    unsigned other = pair[1];
    int ref = g->shortStringRefs[other]; /* (the registry slot the neighbour's string held is reused) */
    g->shortStringRefs[other] = g->shortStringRefs[slot];
    g->shortStringForms[other][0] = g->shortStringForms[slot][0];
    g->shortStringForms[other][1] = g->shortStringForms[slot][1];
    g->shortStringRefs[slot] = 0; /* (empty until the string is in the registry) */
    if (ref > 0) {
        lua_rawseti(L, LUA_REGISTRYINDEX, ref); /* (the key exists: no allocation) */
    } else {
        ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    g->shortStringRefs[slot] = ref;
    g->shortStringForms[slot][0] = low;
    g->shortStringForms[slot][1] = high;
}

/// [-0, +1, -] Pushes the key of `field` (from the cache of short strings).
static void push_small_key(lua_State *L, const CLuaSmallField *field) {
    clua_push_short_string(L, field->key[0], field->key[1], (const char *)field->key, (size_t)((field->key[1] >> 56) & 0xF));
}

/// [-0, +1, -] Pushes the value of `field`.
static void push_small_value(lua_State *L, const CLuaSmallField *field) {
    switch (field->type) {
    case LUA_TBOOLEAN: lua_pushboolean(L, field->integer != 0); break;
    case LUA_TNUMBER:
        if (field->isInteger) lua_pushinteger(L, field->integer);
        else lua_pushnumber(L, field->number);
        break;
    default:
        clua_push_short_string(L, field->string[0], field->string[1], (const char *)field->string,
                               (size_t)((field->string[1] >> 56) & 0xF));
    }
}

void clua_push_small_fields(lua_State *L, const CLuaSmallField *fields, int count) {
    lua_createtable(L, 0, count);
    for (int i = 0; i < count; i++) {
        const CLuaSmallField *field = &fields[i];
        push_small_key(L, field);
        push_small_value(L, field);
        lua_rawset(L, -3);
    }
}

/// The most distinct keys `clua_push_small_tables` keeps on the stack for the tables of one call.
#define SMALL_TABLE_KEYS 8

int clua_push_small_tables(lua_State *L, int list, lua_Integer position, const CLuaSmallField *fields,
                           const int *counts, int tables) {
    if (!lua_checkstack(L, SMALL_TABLE_KEYS + 3)) return 0;
    list = lua_absindex(L, list);
    int base = lua_gettop(L), keys = 0;
    uint64_t forms[SMALL_TABLE_KEYS][2];
    int lastSlot[SMALL_TABLE_KEYS] = { 0 }; /* the stack slot of the key the table before had at each place */
    const CLuaSmallField *field = fields;
    for (int t = 0; t < tables; t++) {
        lua_createtable(L, 0, counts[t]);
        for (int i = 0; i < counts[t]; i++, field++) {
            // The key: the one the table before had here, or another of the call's, or a new one kept on the stack
            // (past `SMALL_TABLE_KEYS` of them, from the VM's cache each time).
            int slot = i < SMALL_TABLE_KEYS ? lastSlot[i] : 0;
            if (slot == 0 || forms[slot - base - 1][0] != field->key[0] || forms[slot - base - 1][1] != field->key[1]) {
                slot = 0;
                for (int k = 0; k < keys && slot == 0; k++) {
                    if (forms[k][0] == field->key[0] && forms[k][1] == field->key[1]) slot = base + 1 + k;
                }
                if (slot == 0 && keys < SMALL_TABLE_KEYS) {
                    push_small_key(L, field);
                    lua_insert(L, base + 1 + keys); /* below the table being made */
                    forms[keys][0] = field->key[0];
                    forms[keys][1] = field->key[1];
                    keys++;
                    slot = base + keys;
                }
                if (i < SMALL_TABLE_KEYS) lastSlot[i] = slot;
            }
            if (slot != 0) lua_pushvalue(L, slot);
            else push_small_key(L, field);
            push_small_value(L, field);
            lua_rawset(L, -3);
        }
        lua_rawseti(L, list, position + t);
    }
    lua_settop(L, base);
    return 1;
}
