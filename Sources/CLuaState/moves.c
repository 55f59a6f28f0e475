// The tables a transaction moved (`moves_`): a table already in the state stored somewhere new is a move, which is
// fine as long as, when the transaction commits, the table is in one place and not inside itself (`table.remove`,
// `table.insert` at a position, `table.sort` and `a[i], a[j] = a[j], a[i]` move tables one write at a time, and a
// table is in two places in between). Each moved table is kept once, with the place it was in before its first
// move (`MOVED`), and each place a table left once (`LEFT`); the Lua side's `settleMoves` (state_data.lua) checks
// them at commit. Kept once each, so that draining a list of 2,000 tables with `table.remove(list, 1)` (two
// million moves) keeps what it touched, not every move. `__newindex` records the moves it makes itself here; the
// Lua half records the others through `recordmove`. The barrier as a whole: docs/design.md, "The write barrier".
#include "barrier.h"

/// [-0, +0, m] Notes that the table at `t`, recorded at (`oldParent`, `oldKey`) (nil, nil: nowhere), is about to
/// move: the table, once per transaction, with that place (its place before its first move), and that place, once.
/// Raises (memory) before anything is counted; the caller then points the table's records at its new place.
/// Indices are absolute.
void moves_note(lua_State *L, Barrier *b, int t, int oldParent, int oldKey) {
    luaL_checkstack(L, 4, NULL);
    lua_pushvalue(L, t);
    if (lua_rawget(L, UPVALUE(MOVED_INDEX)) == LUA_TNIL) {
        lua_Integer at = CLUA_MOVED_ENTRY_LENGTH * b->movedCount;
        lua_pushvalue(L, t);
        lua_rawseti(L, UPVALUE(MOVED), at + CLUA_MOVED_TABLE);
        lua_pushvalue(L, oldParent);
        lua_rawseti(L, UPVALUE(MOVED), at + CLUA_MOVED_PARENT);
        lua_pushvalue(L, oldKey);
        lua_rawseti(L, UPVALUE(MOVED), at + CLUA_MOVED_KEY);
        lua_pushvalue(L, t);
        lua_pushinteger(L, b->movedCount + 1);
        lua_rawset(L, UPVALUE(MOVED_INDEX));
        b->movedCount++;
    }
    lua_pop(L, 1);
    if (lua_isnil(L, oldParent) || lua_isnil(L, oldKey)) return;
    lua_pushvalue(L, oldParent);
    if (lua_rawget(L, UPVALUE(LEFT_SEEN)) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, oldParent);
        lua_pushvalue(L, -2);
        lua_rawset(L, UPVALUE(LEFT_SEEN));
    }
    lua_pushvalue(L, oldKey);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_Integer at = CLUA_LEFT_ENTRY_LENGTH * b->leftCount;
        lua_pushvalue(L, oldParent);
        lua_rawseti(L, UPVALUE(LEFT), at + CLUA_LEFT_PARENT);
        lua_pushvalue(L, oldKey);
        lua_rawseti(L, UPVALUE(LEFT), at + CLUA_LEFT_KEY);
        lua_pushvalue(L, oldKey);
        lua_pushboolean(L, 1);
        lua_rawset(L, -4);
        b->leftCount++;
    }
    lua_pop(L, 2);
}

/// [-0, +0, -] Points the records of the table at `t` (noted by `moves_note`) at its new place, (`parent`, `key`):
/// the records hold the table already, so this never allocates. Indices are absolute.
void moves_point(lua_State *L, Barrier *b, int t, int parent, int key) {
    lua_pushvalue(L, t);
    lua_pushvalue(L, parent);
    lua_rawset(L, UPVALUE(PARENTS));
    lua_pushvalue(L, t);
    lua_pushvalue(L, key);
    lua_rawset(L, UPVALUE(PARENT_KEYS));
    b->moved = 1;
}

// MARK: The functions

/// `recordmove(t, oldParent, oldKey, newParent, newKey)` [-5, +0, m]: the Lua side stored the table `t`, which was
/// at (`oldParent`, `oldKey`), at (`newParent`, `newKey`): noted (`moves_note`), and its records point at the new
/// place.
int moves_record(lua_State *L) {
    Barrier *b = barrier(L);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 5);
    moves_note(L, b, 1, 2, 3);
    moves_point(L, b, 1, 4, 5);
    return 0;
}

/// `movecounts()` [-0, +2, -]: how many tables the open transaction moved (triples in `moved`) and how many
/// places they left (pairs in `left`).
int moves_counts(lua_State *L) {
    Barrier *b = barrier(L);
    lua_pushinteger(L, b->movedCount);
    lua_pushinteger(L, b->leftCount);
    return 2;
}

/// `clearmoves()` [-0, +0, -]: forgets the moves of the transaction (checked, or undone). (Assigning nil to an
/// existing slot never allocates.)
int moves_clear(lua_State *L) {
    Barrier *b = barrier(L);
    for (lua_Integer i = 0; i < b->movedCount; i++) {
        lua_Integer at = CLUA_MOVED_ENTRY_LENGTH * i;
        lua_rawgeti(L, UPVALUE(MOVED), at + CLUA_MOVED_TABLE);
        lua_pushnil(L);
        lua_rawset(L, UPVALUE(MOVED_INDEX));
        for (int slot = 1; slot <= CLUA_MOVED_ENTRY_LENGTH; slot++) {
            lua_pushnil(L);
            lua_rawseti(L, UPVALUE(MOVED), at + slot);
        }
    }
    for (lua_Integer i = 0; i < b->leftCount; i++) {
        lua_Integer at = CLUA_LEFT_ENTRY_LENGTH * i;
        lua_rawgeti(L, UPVALUE(LEFT), at + CLUA_LEFT_PARENT);
        lua_pushnil(L);
        lua_rawset(L, UPVALUE(LEFT_SEEN));
        for (int slot = 1; slot <= CLUA_LEFT_ENTRY_LENGTH; slot++) {
            lua_pushnil(L);
            lua_rawseti(L, UPVALUE(LEFT), at + slot);
        }
    }
    b->movedCount = 0;
    b->leftCount = 0;
    return 0;
}
