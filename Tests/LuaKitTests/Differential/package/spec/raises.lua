-- A module that raises as it loads.
local M = {}
error("cannot start: " .. select(1, ...))
return M
