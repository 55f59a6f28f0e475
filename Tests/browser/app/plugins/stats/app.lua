-- A plugin the browser test's app mounts at state.stats: counts the actions it sees, by type.
local stats = {}

function stats.init()
  return { seen = 0, byType = {} }
end

function stats.reduce(slice, action)
  slice.seen = slice.seen + 1
  slice.byType[action.type] = (slice.byType[action.type] or 0) + 1
end

return stats
