local x = 1
error("broken on purpose: " .. x)
