-- A module saved with a byte-order mark.
return "bom"
