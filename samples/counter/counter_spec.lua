local app = require("app")

describe("counter", function()
  local state

  before_each(function()
    state = app.init()
  end)

  it("starts at zero", function()
    expect(app.props(state)).to.equal({ count = 0, label = "0 clicks" })
  end)

  it("increments by one or by the given amount", function()
    app.reduce(state, { type = "increment" })
    app.reduce(state, { type = "increment", by = 4 })
    expect(state.count).to.be(5)
  end)

  it("decrements and resets", function()
    app.reduce(state, { type = "decrement" })
    expect(app.props(state).label).to.be("-1 clicks")
    app.reduce(state, { type = "reset" })
    expect(state.count).to.be(0)
  end)

  it("says 1 click, not 1 clicks", function()
    app.reduce(state, { type = "increment" })
    expect(app.props(state).label).to.be("1 click")
  end)

  it("ignores unknown actions and returns no commands", function()
    local result, commands = app.reduce(state, { type = "somethingElse" })
    expect(result).to.be_nil()
    expect(commands).to.be_nil()
    expect(state.count).to.be(0)
  end)
end)
