-- A module that does not compile (DifferentialTests: require raises it as Lua does).
local M = {}
function M.f()
  return 1 +
end
return M
