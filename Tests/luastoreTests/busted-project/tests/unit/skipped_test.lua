-- Left out by .busted's exclude-pattern.
error("skipped_test.lua must not be run")
