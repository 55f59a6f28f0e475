-- A module found through .busted's lpath (./lib/?.lua).
local greeting = {}
function greeting.hello(name) return "hello, " .. name end
return greeting
