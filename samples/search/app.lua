-- Type-ahead search: every query change replaces the request in flight (the old one is cancelled),
-- slow responses show as "searching…", failures are shown with their reason.
local luastore = require("luastore")
local config = require("config")

local app = {}

function app.init()
  return { query = "", status = "idle", results = {}, problem = nil }
end

function app.reduce(state, action)
  local kind = action.type
  if kind == "queryChanged" then
    state.query = action.query or ""
    state.problem = nil
    if state.query == "" then
      state.status, state.results = "idle", {}
    else
      state.status = "searching"
    end
  elseif kind == "resultsArrived" and action.id == state.query then
    local titles = {}
    for index, result in ipairs(action.json and action.json.results or {}) do titles[index] = result.title end
    state.status, state.results = "done", titles
  elseif kind == "searchFailed" and action.id == state.query then
    state.status, state.results = "failed", {}
    state.problem = action.reason .. (action.status and (" " .. action.status) or "")
  end
end

function app.props(state)
  local line = ({
    idle = "type to search",
    searching = "searching “" .. state.query .. "”…",
    done = #state.results .. " results for “" .. state.query .. "”",
    failed = "search failed: " .. tostring(state.problem),
  })[state.status]
  return { query = state.query, status = line, results = state.results }
end

local function encode(text)
  return (text:gsub("[^%w%-_%.~]", function(c) return string.format("%%%02X", c:byte()) end))
end

function app.subscriptions(state)
  if state.status ~= "searching" then return {} end
  return {
    search = luastore.http {
      url = config.api .. "/search?q=" .. encode(state.query),
      success = "resultsArrived", failure = "searchFailed", id = state.query, timeout = config.timeout,
    },
  }
end

return app
