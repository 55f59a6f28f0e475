return { name = ..., file = select(2, ...) }
