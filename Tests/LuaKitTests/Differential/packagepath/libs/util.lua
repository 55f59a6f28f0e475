-- Found through a template the script put in front of package.path.
local M = {}
M.name, M.where = ...
function M.shout(text) return text:upper() .. "!" end
return M
