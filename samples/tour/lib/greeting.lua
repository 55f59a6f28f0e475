local greeting = {}

function greeting.hello(name)
  return "hello from " .. name .. ", inside the sandbox"
end

return greeting
