-- A before_each of the file that fails: the error in its test's place, named "before_each", as busted names it.
before_each(function() error("the file's hook failed") end)
it("never runs its body", function() end)
