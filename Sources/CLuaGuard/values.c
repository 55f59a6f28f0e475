// Copying converted values inside the VM.
#include "clua_guard.h"

static int clamp_size(lua_Unsigned size) { return size > INT32_MAX ? INT32_MAX : (int)size; }

void clua_copy_plain_table(lua_State *L, int index, int *sequence, int *others) {
    index = lua_absindex(L, index);
    // Sized before it is filled (growing a table rehashes it): the sequence part and the other keys, counted
    // unless the caller knows them from an earlier copy of the same table.
    if (*sequence < 0 || *others < 0) {
        lua_Unsigned length = lua_rawlen(L, index);
        lua_Unsigned entries = 0;
        lua_pushnil(L);
        while (lua_next(L, index) != 0) {
            lua_pop(L, 1);
            entries++;
        }
        *sequence = clamp_size(length);
        *others = clamp_size(entries > length ? entries - length : 0);
    }
    lua_createtable(L, *sequence, *others);
    lua_pushnil(L);
    while (lua_next(L, index) != 0) { /* table, key, value */
        if (lua_type(L, -1) == LUA_TTABLE) {
            int nestedSequence = -1, nestedOthers = -1;
            clua_copy_plain_table(L, -1, &nestedSequence, &nestedOthers);
            lua_remove(L, -2);
        }
        lua_pushvalue(L, -2); /* table, key, value, key */
        lua_pushvalue(L, -2); /* table, key, value, key, value */
        lua_rawset(L, -5);
        lua_pop(L, 1);
    }
}
