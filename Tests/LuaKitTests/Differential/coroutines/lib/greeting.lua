-- Required from inside a coroutine by coroutines.lua.
print("greeting loads")
return { text = "hello from a module" }
