-- A to-do list: editing, filters, props computed by a view module, persistence through effects.
local luastore = require("luastore")
local view = require("view")

local app = {}
app.schemaVersion = 1

-- The contract (docs/contracts.md): what the app's actions, state and props are, in LuaLS annotations.

---@class Todo
---@field id integer
---@field title string
---@field done boolean

---@class Saved
---@field todos Todo[]
---@field nextId integer

---@class State
---@field todos Todo[]
---@field nextId integer
---@field filter "all"|"active"|"done"
---@field loaded boolean

---@class AppStarted
---@field type "appStarted"

---@class TodosLoaded
---@field type "todosLoaded"
---@field key string
---@field value? Saved

---@class TodoAdded
---@field type "todoAdded"
---@field title string

---@class TodoToggled
---@field type "todoToggled"
---@field id integer

---@class TodoRenamed
---@field type "todoRenamed"
---@field id integer
---@field title string

---@class TodoRemoved
---@field type "todoRemoved"
---@field id integer

---@class CompletedCleared
---@field type "completedCleared"

---@class FilterChanged
---@field type "filterChanged"
---@field filter string

---@class DraftEdited
---@field type "draftEdited"
---@field text string

---@alias Action AppStarted|TodosLoaded|TodoAdded|TodoToggled|TodoRenamed|TodoRemoved|CompletedCleared|FilterChanged|DraftEdited

---@class Props
---@field filter "all"|"active"|"done"
---@field items Todo[]  The visible ones.
---@field left string
---@field canClear boolean

---@return State
function app.init()
  return { todos = {}, nextId = 1, filter = "all", loaded = false }
end

local function find(state, id)
  for index, todo in ipairs(state.todos) do
    if todo.id == id then return index, todo end
  end
end

local function saved(state)
  return { luastore.save("todos", { todos = state.todos, nextId = state.nextId }) }
end

local filters = { all = true, active = true, done = true }

---@param state State
---@param action Action
function app.reduce(state, action)
  local kind = action.type
  if kind == "appStarted" then
    return nil, { luastore.load("todos", "todosLoaded") }
  elseif kind == "todosLoaded" then
    state.loaded = true
    if action.value ~= nil then
      state.todos = action.value.todos or {}
      state.nextId = action.value.nextId or (#state.todos + 1)
    end
  elseif kind == "todoAdded" then
    local title = action.title
    if type(title) ~= "string" or title:match("^%s*$") then return end
    table.insert(state.todos, { id = state.nextId, title = title, done = false })
    state.nextId = state.nextId + 1
    return nil, saved(state)
  elseif kind == "todoToggled" then
    local _, todo = find(state, action.id)
    if todo then
      todo.done = not todo.done
      return nil, saved(state)
    end
  elseif kind == "todoRenamed" then
    local _, todo = find(state, action.id)
    if todo and type(action.title) == "string" and not action.title:match("^%s*$") then
      todo.title = action.title
      return nil, saved(state)
    end
  elseif kind == "todoRemoved" then
    local index = find(state, action.id)
    if index then
      table.remove(state.todos, index)
      return nil, saved(state)
    end
  elseif kind == "completedCleared" then
    local kept = {}
    for _, todo in ipairs(state.todos) do
      if not todo.done then kept[#kept + 1] = todo end
    end
    state.todos = kept
    return nil, saved(state)
  elseif kind == "filterChanged" then
    if filters[action.filter] then state.filter = action.filter end
  end
end

---@param state State
---@return Props
function app.props(state)
  return view.props(state)
end

return app
