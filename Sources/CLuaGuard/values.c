// Copying converted values inside the VM.
#include "clua_guard.h"

void clua_copy_plain_table(lua_State *L, int index) {
    index = lua_absindex(L, index);
    // Sized before it is filled (growing a table rehashes it): the sequence part, and the other keys counted.
    lua_Unsigned length = lua_rawlen(L, index);
    lua_Unsigned entries = 0;
    lua_pushnil(L);
    while (lua_next(L, index) != 0) {
        lua_pop(L, 1);
        entries++;
    }
    lua_Unsigned others = entries > length ? entries - length : 0;
    lua_createtable(L, length > INT32_MAX ? INT32_MAX : (int)length, others > INT32_MAX ? INT32_MAX : (int)others);
    lua_pushnil(L);
    while (lua_next(L, index) != 0) {
        if (lua_type(L, -1) == LUA_TTABLE) {
            clua_copy_plain_table(L, -1);
            lua_remove(L, -2);
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
}
