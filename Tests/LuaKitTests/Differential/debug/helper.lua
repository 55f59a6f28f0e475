-- A module that tells where it was called from, as logging helpers do.
local M = {}
function M.where(level)
  local info = debug.getinfo((level or 1) + 1, "Sl")
  return info.short_src .. ":" .. info.currentline
end
function M.dir() return debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./" end
return M
