-- The editor of a new to-do, as a child store: its draft is local state; the list is the root's.
local editor = {}

function editor.init()
  return { text = "" }
end

function editor.reduce(draft, action)
  if action.type == "draftEdited" then
    draft.text = action.text or ""
  elseif action.type == "todoAdded" then
    draft.text = ""
  end
end

function editor.props(draft, root)
  return {
    text = draft.text,
    canSubmit = not draft.text:match("^%s*$"),
    hint = #root.todos == 0 and "What needs to be done?" or "Add another",
  }
end

return editor
