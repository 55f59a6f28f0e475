-- .busted's helper: run before the spec files, with their globals (not a spec: its name does not match the pattern).
HELPED = "by the helper"
function double(n) return 2 * n end
