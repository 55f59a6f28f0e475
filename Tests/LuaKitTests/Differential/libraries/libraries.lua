-- Debian's pure-Lua libraries (lua-dkjson, lua-argparse, lua-say, lua-penlight's modules that need no files or
-- clocks), loaded from /usr/share/lua/5.4 through the
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

-- Penlight: tables, lists, strings, classes, sets, ordered maps, sequences, templates, pretty-printing.
local tablex, List, stringx = require("pl.tablex"), require("pl.List"), require("pl.stringx")
local class, Set, OrderedMap = require("pl.class"), require("pl.Set"), require("pl.OrderedMap")
local seq, pretty, template = require("pl.seq"), require("pl.pretty"), require("pl.template")
local utils, text, operator = require("pl.utils"), require("pl.text"), require("pl.operator")
print(pretty.write(tablex.map(function(x) return x * x end, { 1, 2, 3 }), ""))
print(tablex.reduce(operator.add, { 1, 2, 3, 4 }), tablex.deepcompare({ a = { 1 } }, { a = { 1 } }))
print(List({ 3, 1, 2 }):sort():map(function(x) return x * 10 end):concat(","))
print(List.range(1, 5):filter(function(x) return x % 2 == 1 end))
print(stringx.split("a,b,,c", ","), #stringx.split("a,b,,c", ","), stringx.strip("  pad  "), stringx.title("hello world"))
local Animal = class()
function Animal:_init(name) self.name = name end
function Animal:speak() return self.name .. " makes a sound" end
local Dog = class(Animal)
function Dog:speak() return self.name .. " barks" end
print(Dog("Rex"):speak(), Animal("Cat"):speak(), Dog:class_of(Dog("x")), Dog("y"):is_a(Animal))
print(Set({ 1, 2, 3 }) * Set({ 2, 3, 4 }) == Set({ 2, 3 }), #Set.values(Set({ "x", "y" })))
local ordered = OrderedMap()
ordered:set("z", 1); ordered:set("a", 2); ordered:set("m", 3)
for key, value in ordered:iter() do io.write(key, "=", value, " ") end
io.write("\n")
print(seq.sum(seq.map(function(x) return x * 2 end, seq.list({ 1, 2, 3 }))))
print(template.substitute("Hello $name, $(n + 1) items", { name = "you", n = 2, _parent = _G }))
print(pretty.write({ nested = { list = { 1, 2 }, flag = true } }))
print(text.indent("a\nb\n", 2), utils.split("x y z")[3], utils.quote_arg and "quote" or "none")
io.stdout:write("written ", 1, " ", 2.5, "\n")
