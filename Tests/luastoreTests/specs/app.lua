local app = {}
function app.init() return { count = 0 } end
function app.reduce(state, action) if action.type == "increment" then state.count = state.count + 1 end end
function app.props(state) return { count = state.count } end
return app
