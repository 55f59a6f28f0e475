-- What .busted's helper defined, the spec sees, as under busted.
describe("the helper", function()
  it("ran first", function()
    assert.are.equal("by the helper", HELPED)
    assert.are.equal(6, double(3))
  end)
end)
