-- busted and luassert features `luastore test` must report as busted 2.1.1 does, test by test (BustedDifferentialTests
-- runs this file under both, with TAP output, and compares each test's name and outcome).
describe("a block", function()
  local count = 0
  before_each(function() count = count + 1 end)

  it("passes", function()
    assert.are.equal(1, count)
  end)

  it("fails", function()
    assert.are.equal(1, 2)
  end)

  it("has no body")

  pending("is pending at block level")

  it("calls pending inside", function()
    pending("later")
    error("not reached")
  end)

  it("raises an error that is not an assertion", function()
    local t = nil
    return t.field
  end)

  describe("nested", function()
    it("sees the outer before_each", function()
      assert.is_true(count > 0)
    end)
  end)
end)

describe("setup and teardown", function()
  local log = {}
  setup(function() log[#log + 1] = "setup" end)
  teardown(function() log[#log + 1] = "teardown" end)
  after_each(function() log[#log + 1] = "after" end)

  it("runs setup once", function()
    assert.are.same({ "setup" }, log)
  end)

  it("runs after_each between tests", function()
    assert.are.same({ "setup", "after" }, log)
  end)

  it("runs finally", function()
    finally(function() log[#log + 1] = "finally" end)
    assert.is_not_nil(log)
  end)
end)

describe("spies and stubs", function()
  it("keep what they were called with", function()
    local s = spy.new(function() end)
    local t = { 1 }
    s(t)
    t[1] = 2
    assert.spy(s).was.called_with({ 1 })
  end)

  it("count calls", function()
    local s = spy.new(function() end)
    s(); s()
    assert.spy(s).was.called(2)
    assert.spy(s).was_not.called(3)
  end)

  it("stub and revert", function()
    local target = { greet = function() return "hi" end }
    local st = stub(target, "greet").returns("stubbed")
    assert.are.equal("stubbed", target.greet())
    st:revert()
    assert.are.equal("hi", target.greet())
  end)

  it("match arguments", function()
    local s = spy.new(function() end)
    s("text", 3)
    assert.spy(s).was.called_with(match.is_string(), match._)
  end)
end)

describe("assertions", function()
  it("errors and their messages", function()
    assert.has_error(function() error("boom") end, "boom")
    assert.has_no.errors(function() end)
    assert.error_matches(function() error("code 42") end, "%d+")
  end)

  it("truthiness and types", function()
    assert.is_truthy(0)
    assert.is_falsy(nil)
    assert.is_string("s")
    assert.is_table({})
    assert.is_not.number("1")
  end)

  it("same and unique", function()
    assert.are.same({ a = { 1, 2 } }, { a = { 1, 2 } })
    assert.is_unique({ 1, 2, 3 })
    assert.are_not.same({ 1 }, { 2 })
  end)

  it("near", function()
    assert.is.near(1.0, 1.05, 0.1)
  end)

  it("fails with a message", function()
    assert.is_true(false, "custom message")
  end)
end)

describe("luassert and busted as modules", function()
  local luassert = require("luassert")
  local busted = require("busted")

  it("are the same assert and blocks", function()
    assert.are.equal(assert, luassert)
    assert.is_function(busted.describe)
    assert.is_function(busted.it)
  end)

  it("register an assertion", function()
    local function has_property(state, arguments)
      return type(arguments[1]) == "table" and arguments[1][arguments[2]] ~= nil
    end
    assert:register("assertion", "has_property", has_property, "expected a property", "expected no property")
    assert.has_property({ name = "x" }, "name")
    assert.has_no.property({ name = "x" }, "other")
  end)

  it("fails a registered assertion", function()
    assert:register("assertion", "always_false", function() return false end, "never holds", "never fails")
    assert.always_false(1)
  end)
end)

describe("names in any case, as luassert reads them", function()
  it("finds assertions, modifiers and matchers whatever their case", function()
    assert.is.Nil(nil)
    assert.True(true)
    assert.Is_Not.False(true)
    assert.Are.Same({ 1, { 2 } }, { 1, { 2 } })
    assert.IS_NOT.equal(1, 2)
    local s = spy.new(function() end)
    s("x")
    assert.Spy(s).Was.Called_With(match.Is_String())
    assert:register("assertion", "Has_Key", function(state, arguments) return arguments[1][arguments[2]] ~= nil end, "no key", "a key")
    assert.has_key({ a = 1 }, "a")
    assert.HAS_KEY({ b = 1 }, "b")
  end)

  it("fails in any case too", function()
    assert.Is.True(false)
  end)
end)
