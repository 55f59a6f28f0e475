-- The folder's own util: found by ./?.lua only while no earlier template finds one.
return { name = "root util" }
