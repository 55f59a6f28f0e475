-- A module whose main chunk raises at level 2: that level is `require`'s (a C function: no line), as in Lua.
error("raised at level 2", 2)
