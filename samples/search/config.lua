-- Where the search API runs: start it with `swift run luastore-demo-api` (port 8765).
return {
  api = "http://127.0.0.1:8765",
  timeout = 1.5,
}
