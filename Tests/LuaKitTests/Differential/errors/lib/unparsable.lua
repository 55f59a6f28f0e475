local M = {}
x = = 1
return M
