-- A spec that can also run stand-alone under `lua` starts the runner itself; under a runner the call does nothing.
require("busted.runner")()

describe("a stand-alone spec", function()
  it("runs under the runner too", function()
    assert.are.equal("x", ("x"):lower())
  end)
end)
