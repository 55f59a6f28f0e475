-- The smallest LuaStore app: a counter.
local app = {}

function app.init()
  return { count = 0 }
end

function app.reduce(state, action)
  if action.type == "increment" then
    state.count = state.count + (action.by or 1)
  elseif action.type == "decrement" then
    state.count = state.count - (action.by or 1)
  elseif action.type == "reset" then
    state.count = 0
  end
end

function app.props(state)
  return {
    count = state.count,
    label = state.count == 1 and "1 click" or (state.count .. " clicks"),
  }
end

return app
