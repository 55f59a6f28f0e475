---@meta luastore
-- Editor definitions for LuaStore apps (lua-language-server / LuaLS). Add this folder to your workspace's
-- `Lua.workspace.library` and editors complete and check the `luastore` module, the app contract, the sandbox's
-- additions and the spec API. Nothing here runs.

---@class luastore.Action
---@field type string The action's kind, such as "todoAdded".

---@class luastore.Effect
---@field kind "http"|"delay"|"timer"|"log"|"save"|"load"

---@class luastore.HTTPRequest
---@field url string Absolute URL; its host must be allowed by the host (loopback by default).
---@field method? string "GET" (default), "POST", …
---@field headers? table<string, string>
---@field body? string
---@field timeout? number Seconds for the whole exchange.
---@field success string Action type dispatched with {id, status, headers, body, json}.
---@field failure string Action type dispatched with {id, reason, message, status?, body?}.
---@field id? string|number Echoed back in the result action.

---@class luastore
local luastore = {}

---An HTTP request, as a command (returned from reduce) or a subscription (cancelled when it disappears).
---@param request luastore.HTTPRequest
---@return luastore.Effect
function luastore.http(request) end

---Dispatches `action` once, after `seconds`.
---@param seconds number
---@param action luastore.Action
---@return luastore.Effect
function luastore.delay(seconds, action) end

---Dispatches `action` every `seconds`, as long as `subscriptions` declares it.
---@param seconds number
---@param action luastore.Action
---@return luastore.Effect
function luastore.timer(seconds, action) end

---Writes `message` to the host's log.
---@param message string
---@return luastore.Effect
function luastore.log(message) end

---Saves `value` under `key` in the host's storage folder (nil deletes it).
---@param key string Letters, digits, "_" and "-".
---@param value any
---@return luastore.Effect
function luastore.save(key, value) end

---Loads what was saved under `key`; the store dispatches {type = success, key, value}.
---@param key string
---@param success string
---@return luastore.Effect
function luastore.load(key, success) end

---@class luastore.App
---@field schemaVersion? integer Raise it to run `migrate` on the next reload.
---@field init fun(): table The initial state.
---@field reduce fun(state: table, action: luastore.Action): table?, luastore.Effect[]? Change `state` in place or return a new one; commands second.
---@field props fun(state: table): table The view model.
---@field subscriptions? fun(state: table): table<string, luastore.Effect> Long-running effects by key.
---@field migrate? fun(state: table, fromSchema: integer, fromVersion: string?): table?

---A plugin an app mounts under a key of its state (`mounts` in the app's luastore.json): its slice instead of
---the whole state, and the slices its mount `reads`, read-only.
---@class luastore.Plugin
---@field schemaVersion? integer Raise it to run `migrate` when the new version is installed.
---@field init fun(): table Its slice.
---@field reduce fun(slice: table, action: luastore.Action, reads: table<string, table>?): table?, luastore.Effect[]? Change `slice` in place or return a new one; commands second.
---@field subscriptions? fun(slice: table, reads: table<string, table>?): table<string, luastore.Effect> Long-running effects by key (named "KEY/<key>").
---@field migrate? fun(slice: table, fromSchema: integer, fromVersion: string?): table?

---Iterates a table in key order: booleans, numbers, strings.
---@generic K, V
---@param t table<K, V>
---@return fun(): K, V
function sortedpairs(t) end

---@class luastore.Expectation
---@field to luastore.Matchers
---@field to_not luastore.Matchers

---@class luastore.Matchers
---@field equal fun(expected: any) Deep equality.
---@field be fun(expected: any) `==`.
---@field be_nil fun()
---@field be_truthy fun()
---@field be_falsy fun()
---@field contain fun(item: any)
---@field fail fun(text?: string) The value is a function that raises (an error containing `text`).

---(specs) A group of specs.
---@param name string
---@param body fun()
function describe(name, body) end

---(specs) One spec.
---@param name string
---@param body fun()
function it(name, body) end

---(specs) Runs before every spec of the enclosing describe.
---@param body fun()
function before_each(body) end

---(specs) Expectations on `value`.
---@param value any
---@return luastore.Expectation
function expect(value) end

---(specs) A group of specs (busted's names for it).
context, insulate, expose = describe, describe, describe

---(specs) One spec (busted's names for it).
spec, test = it, it

---(specs) A spec not written yet: reported as pending.
---@param name string
---@param body? fun()
function pending(name, body) end

---(specs) Hooks of the enclosing describe: after every spec; when the block is entered and left (strict_ forms
---alike); lazily, only if one of its specs runs.
---@param body fun()
function after_each(body) end
---@param body fun()
function setup(body) end
---@param body fun()
function teardown(body) end
---@param body fun()
function lazy_setup(body) end
---@param body fun()
function lazy_teardown(body) end
strict_setup, strict_teardown = setup, teardown

---(specs) Inside a spec: runs after it, even when it fails.
---@param body fun()
function finally(body) end

---(specs) Shuffles the enclosing describe's specs (a fixed shuffle: runs stay repeatable).
---@param on? boolean
function randomize(on) end

---(specs) luassert: `assert.are.same(expected, actual)`, `assert.is_not_nil(v)`, `assert.has_no.errors(fn)`,
---`assert.spy(s).was.called(2)`, … — and still Lua's `assert(v, message)`.
---@type table|fun(v: any, message?: any, ...): any
assert = assert

---(specs) Spies: `spy.new(fn)`, `spy(fn)`, `spy.on(t, key)`.
---@type table|fun(fn?: function): table
spy = {}

---(specs) Stubs: `stub(t, key, returns…)`, `stub.new()`; `s.returns(…)`, `s.invokes(fn)`, `s.on_call_with(…)`.
---@type table|fun(t?: table, key?: any, ...): table
stub = {}

---(specs) `mock(t [, stubbed])` makes every function of `t` a spy (or a stub); `mock.revert(t)`, `mock.clear(t)`.
---@type table|fun(t: table, stubbed?: boolean): table
mock = {}

---(specs) Matchers for `same` and `called_with`: `match._`, `match.is_string()`, `match.none_of(…)`, …
---@type table
match = {}

---(specs) A store of the app `require("luastore.store").open()` made: its barrier, rules and budget.
---@class luastore.SpecStore
---@field dispatch fun(self: luastore.SpecStore, action: table): boolean, luastore.SpecFailure? true once applied; else false and why (the state as it was)
---@field state fun(self: luastore.SpecStore): table a copy of the state
---@field props fun(self: luastore.SpecStore): table the props
---@field close fun(self: luastore.SpecStore) stops it (also `local s <close> = …`)

---(specs) Why a store refused an action.
---@class luastore.SpecFailure
---@field stage string
---@field message string
---@field location? string `app.lua:7`

---(specs) `require("luastore.store")`: `open([{ state = …, time_budget_ms = … }])`, from the app's `init` unless a state is given.
---@class luastore.SpecStores
---@field open fun(options?: { state?: table, time_budget_ms?: number }): luastore.SpecStore

return luastore
