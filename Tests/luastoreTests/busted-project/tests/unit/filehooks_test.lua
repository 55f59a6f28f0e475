-- Hooks a spec file registers outside any describe: the file is the outermost block, as busted has it.
local log = {}
setup(function() log[#log + 1] = "setup" end)
before_each(function() log[#log + 1] = "before" end)
after_each(function() log[#log + 1] = "after" end)

it("runs the file's setup and before_each first", function()
  assert.are.same({ "setup", "before" }, log)
end)

describe("a block of the file", function()
  it("runs them around its tests too", function()
    assert.are.same({ "setup", "before", "after", "before" }, log)
  end)
end)
