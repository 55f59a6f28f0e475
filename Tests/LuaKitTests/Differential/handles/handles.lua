-- The standard files and the raw functions given what is not a table, `io`'s arguments (a number for a name or a
-- mode, an explicit nil, no value), the standard output as the default input and the standard input as the default
-- output, as Lua's C functions take and refuse them. (Files and functions are shown by kind: addresses differ.)
local function show(...)
  local shown = table.pack(...)
  for i = 1, shown.n do
    local value = shown[i]
    if io.type(value) then shown[i] = io.type(value) elseif type(value) == "function" then shown[i] = "function" end
    shown[i] = tostring(shown[i])
  end
  print(table.concat(shown, "\t", 1, shown.n))
end
show(pcall(rawget, io.stdout, "x"))
show(pcall(rawset, io.stdout, "x", 1))
show(pcall(rawget, io.stderr))
show(pcall(next, io.stdout))
show(pcall(rawlen, io.stdout))
show(pcall(pairs, io.stdout))
show(pcall(debug.getmetatable))
show(pcall(io.open))
show(pcall(io.close, nil))
show(pcall(io.close, {}))
show(pcall(io.close))
show(pcall(io.close, io.stdin))
show(pcall(loadfile, "data.txt", 2))
show(pcall(loadfile, "data.txt", "t"))
show(pcall(io.input, 123))
show(pcall(io.read, "l"))
show(pcall(io.input, io.stdout))
show(pcall(io.read))
show(pcall(io.input, io.stdin))
show(pcall(io.output, io.stdin))
show(pcall(io.write, "lost"))
show(pcall(io.output, io.stdout))
show(pcall(io.input, {}))
show(pcall(io.output, true))
