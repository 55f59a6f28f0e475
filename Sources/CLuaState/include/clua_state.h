// The scripted store's state engine in C: the hot paths of the journaling write barrier over the state's proxy
// tables — `barrier.c` (the barrier's functions), `proxies.c`, `journal.c` (the undo journal), `reads.c` (read
// tracking, readers due), `runs.c` (the run loop), `changes.c` (what each action changed) — and the recording's
// JSON of its changes (`json.c`); the contract is docs/design.md, "The write barrier". Only `LuaStoreScripting`
// depends on it, and sees no more of it than this header: its functions reach the state runtime's trusted Lua
// (`state_runtime.lua`) through `LuaVM.defineTrusted(library:)`, so that no Lua type crosses into that module
// (LuaKit stays the one layer that handles Lua's pointers).
#ifndef CLUA_STATE_H
#define CLUA_STATE_H

#include "clua_state_layouts.h"

/// The engine's functions for trusted host Lua, as LuaKit registers them: an opaque list (a `luaL_Reg` array
/// ending in `{NULL, NULL}`) — `makebarrier{…}`, a journaling write barrier over proxy tables (`barrier.c` says
/// more).
const void *clua_state_library(void);

#endif
