error("in fails")
