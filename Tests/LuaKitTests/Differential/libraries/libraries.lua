-- Debian's pure-Lua libraries (lua-dkjson, lua-argparse, lua-say), loaded from /usr/share/lua/5.4 through the
-- module path as stock lua5.4 loads them; DifferentialTests compares the output byte for byte.
local json = require("dkjson")
print(json.encode({ list = { 1, 2, 3 }, name = "x" }, { keyorder = { "list", "name" } }))
print(json.decode('{"a":[1,2,{"b":null}]}').a[2])
local argparse = require("argparse")
local parser = argparse("tool", "A tool.")
parser:argument("input", "Input file.")
parser:option("-o --output", "Output file.", "a.out")
local args = parser:parse({ "in.txt", "-o", "x" })
print(args.input, args.output)
local say = require("say")
say:set("greeting", "hello %s")
print(say("greeting", { "world" }))
