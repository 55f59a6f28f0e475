-- A module whose path is longer than Lua shows whole in a message.
error("raised far down")
