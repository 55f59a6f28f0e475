import Foundation
import LuaKit
import LuaStoreScripting
import LuaStoreTestSupport
import LuaStoreCore

/// What a store under test reported.
final class Recorder: Sendable {
    let props = Protected<[LuaValue]>([])
    let failures = Protected<[ScriptFailure]>([])
    let logs = Protected<[String]>([])

    var options: ScriptedStoreOptions {
        var options = ScriptedStoreOptions(
            log: { line in self.logs.withLock { $0.append(line) } },
            failures: { failure in self.failures.withLock { $0.append(failure) } })
        // (A budget a loaded machine cannot spend on the actions that return at once — 100 ms was, under busy
        // loops — so that only the endless loops the tests write run out of it.)
        options.limits.timeBudget = .seconds(1)
        options.limits.memoryBytes = 32 << 20
        return options
    }

    /// `options`, with observers told after every action (`.everyAction`).
    var everyActionOptions: ScriptedStoreOptions {
        var options = self.options
        options.notification = .everyAction
        return options
    }

    func observe(_ store: ScriptedStore) {
        store.observeProps { props in
            self.props.withLock { $0.append(props) }
            return .active
        }
    }
}

/// A small app exercising every part of the contract.
let testApp = #"""
local luastore = require("luastore")
local util = require("lib.util")

local app = {}
app.schemaVersion = 1

function app.init()
  return { count = 0, items = {}, nested = { deep = { value = 1 } }, requests = {}, log = {} }
end

function app.reduce(state, action)
  local kind = action.type
  if kind == "increment" then
    state.count = state.count + 1
  elseif kind == "add" then
    table.insert(state.items, { id = #state.items + 1, title = action.title, done = false })
  elseif kind == "toggle" then
    local item = state.items[action.id]
    item.done = not item.done
  elseif kind == "explode" then
    state.count = 999
    state.nested.deep.value = 42
    table.insert(state.items, { id = 0 })
    state.items[1] = nil
    state.nested.extra = { 1, 2, 3 }
    util.fail("exploded on purpose")
  elseif kind == "loop" then
    state.count = -1
    while true do end
  elseif kind == "hog" then
    state.count = -2
    local hoard = {}
    for i = 1, 64 do hoard[i] = string.rep("x", 1 << 26) .. i end
  elseif kind == "replace" then
    return { count = 100, items = {}, nested = state.nested, requests = {}, log = {} }
  elseif kind == "say" then
    return nil, { luastore.log("count is " .. state.count) }
  elseif kind == "later" then
    return nil, { luastore.delay(0.01, { type = "increment" }) }
  elseif kind == "fetch" then
    state.requests[action.id] = action.url
  elseif kind == "fetched" or kind == "fetchFailed" then
    state.requests[action.id] = nil
    table.insert(state.log, kind .. " " .. tostring(action.id) .. " " .. tostring(action.body or action.reason))
  elseif kind == "cancel" then
    state.requests[action.id] = nil
  elseif kind == "badcommand" then
    state.count = 555
    return nil, { { kind = "http", url = 42, success = "a", failure = "b" } }
  elseif kind == "halfbad" then
    state.count = 777
    return nil, { luastore.log("the valid command ran"), { kind = "http", url = 42, success = "a", failure = "b" } }
  end
end

function app.props(state)
  print("props ran")
  local done = 0
  for _, item in ipairs(state.items) do
    if item.done then done = done + 1 end
  end
  return { count = state.count, total = #state.items, done = done }
end

function app.subscriptions(state)
  local wanted = {}
  for id, url in pairs(state.requests) do
    wanted["request " .. id] = luastore.http { url = url, success = "fetched", failure = "fetchFailed", id = id, timeout = 30 }
  end
  return wanted
end

return app
"""#

let testUtil = #"""
local util = {}

function util.fail(message)
  error(message, 2)
end

return util
"""#
