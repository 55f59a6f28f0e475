-- Blocks run when busted reaches them: a block's body sees what the tests and hooks before it did.
local greeting = require("greeting")

describe("greeting", function()
  local calls = 0
  local made
  before_each(function() calls = calls + 1; made = greeting.hello("before") end)

  it("greets", function()
    assert.are.equal("hello, you", greeting.hello("you"))
  end)

  describe("a block after one test", function()
    -- Runs after the test above and its before_each: calls is 1 here, made is set.
    local seen, seenMade = calls, made
    it("saw the hooks of the test before it", function()
      assert.are.equal(1, seen)
      assert.are.equal("hello, before", seenMade)
    end)
    for i = 1, 2 do
      it("made in a loop " .. i, function() assert.is_true(i <= 2) end)
    end
  end)

  describe("a block whose body fails", function()
    it("is never registered", function() end)
    error("the body failed")
  end)

  it("runs after a failed block", function()
    assert.are.equal(5, calls)
  end)

  it("fails on purpose", function()
    assert.are.equal("hello, me", greeting.hello("you"))
  end)
end)

describe("globals in spec files", function()
  it("reads an unset global as nil and may set one", function()
    assert.is_nil(never_set_anywhere)
    made_here = 1
    assert.are.equal(1, made_here)
  end)

  it("has debug.traceback", function()
    assert.is_truthy(debug.traceback("x"):find("^x\nstack traceback:"))
  end)
end)
