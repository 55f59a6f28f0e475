coroutine.yield("from the module")
return { loaded = true }
