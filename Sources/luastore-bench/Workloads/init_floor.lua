-- The floor of `init.vs_floor_ratio` and `persist.resume_vs_floor_ratio` in stock Lua (docs/benchmarks.md): what
-- Debian's `lua5.4` needs to start the very app the store's rows start — load its file, run its `init` (100,000
-- items), answer its first props. `scripts/bench` times the whole process, as it times the store from nothing to
-- its first props; by hand: `lua5.4 init_floor.lua APP.lua`. It prints `items=N` (what the props counted).
local app = dofile(assert(arg[1], "the app's file"))
local state = app.init()
local props = app.props(state)
print("items=" .. tostring(props.size))
