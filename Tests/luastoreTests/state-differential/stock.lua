-- What stock lua5.4 makes of app.lua's actions on plain tables: the `log` of each, a line each.
local app = dofile("app.lua")
local state = app.init()
for shape = 1, 7 do
  app.reduce(state, { type = "borders", shape = shape })
  print(app.props(state).log)
end
app.reduce(state, { type = "kept" })
print(app.props(state).log)
