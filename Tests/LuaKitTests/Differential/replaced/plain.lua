local M = { ok = true }
function M.fail() error("failed in plain") end
return M
