-- Not a spec: its name does not match .busted's pattern.
error("helper.lua must not be run as a spec")
