-- A reducer run by a store and by stock lua5.4 on plain tables (stock.lua): every border it reads (`#`, where
-- table.insert appends) must be the same. A table stored in the state is the state's own copy of it, made with
-- the array part Lua gave the table, so its borders — which the manual leaves to the table's layout once it has
-- holes — are the ones the script's table would have had.
local app = {}

local function made(shape)
  if shape == 1 then local t = {} for i = 1, 6 do t[i] = i end return t
  elseif shape == 2 then return { 1, 2, 3, 4, 5, 6 }
  elseif shape == 3 then local t = {} for i = 1, 10 do t[i] = i end return t
  elseif shape == 4 then local t = {} for i = 6, 1, -1 do t[i] = i end return t
  elseif shape == 5 then local t = { a = 1, b = 2 } for i = 1, 6 do t[i] = i end t.c = 3 return t
  elseif shape == 6 then local t = {} for i = 1, 6 do t[i] = i end t[20] = 20 t[9] = 9 return t
  else return table.pack(1, 2, 3, 4, 5, 6) end
end

-- Each of the 64 ways of taking some of the first six out, stored, then appended to three times.
local function borders(state, shape)
  local out = {}
  for holes = 0, 63 do
    local t = made(shape)
    for bit = 0, 5 do if holes & (1 << bit) ~= 0 then t[bit + 1] = nil end end
    local key = "s" .. shape .. "h" .. holes
    state[key] = t
    local list = state[key]
    local first = #list
    table.insert(list, 7)
    local second = #list
    table.insert(list, 8)
    list[#list + 1] = 9
    out[#out + 1] = first .. "," .. second .. "," .. #list .. "," .. #t
  end
  return table.concat(out, " ")
end

function app.init() return { log = "", kept = made(1) } end

function app.reduce(state, action)
  if action.type == "borders" then
    state.log = borders(state, action.shape)
  elseif action.type == "kept" then -- (a table init made, holes taken out in a later action)
    state.kept[2], state.kept[3] = nil, nil
    table.insert(state.kept, 7)
    state.log = #state.kept .. "," .. rawlen(state.kept)
  end
end

function app.props(state) return { log = state.log } end

return app
