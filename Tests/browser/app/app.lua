-- The app the devtools browser test runs: a short to-do list whose `rename` fails for a missing item.
local app = {}

function app.init()
  return { todos = {}, nextId = 1 }
end

function app.reduce(state, action)
  if action.type == "add" then
    state.todos[#state.todos + 1] = { id = state.nextId, title = action.title, done = false }
    state.nextId = state.nextId + 1
  elseif action.type == "toggle" then
    local todo = state.todos[action.id]
    todo.done = not todo.done
  elseif action.type == "rename" then
    local todo = state.todos[action.id]
    if not todo then error("no to-do number " .. tostring(action.id)) end
    todo.title = action.title
  end
end

function app.props(state)
  local titles = {}
  for index, todo in ipairs(state.todos) do
    titles[index] = (todo.done and "[x] " or "[ ] ") .. todo.title
  end
  return { titles = titles, count = #state.todos }
end

return app
