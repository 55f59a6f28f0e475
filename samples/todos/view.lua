-- The props of the to-do list, built from parts a host can also observe on their own.
local view = {}

function view.visible(state)
  local items = {}
  for _, todo in ipairs(state.todos) do
    if state.filter == "all" or (state.filter == "done") == todo.done then
      items[#items + 1] = { id = todo.id, title = todo.title, done = todo.done }
    end
  end
  return items
end

function view.counts(state)
  local done = 0
  for _, todo in ipairs(state.todos) do
    if todo.done then done = done + 1 end
  end
  return { total = #state.todos, done = done, left = #state.todos - done }
end

function view.props(state)
  local counts = view.counts(state)
  return {
    filter = state.filter,
    items = view.visible(state),
    left = counts.left == 1 and "1 item left" or (counts.left .. " items left"),
    canClear = counts.done > 0,
  }
end

return view
