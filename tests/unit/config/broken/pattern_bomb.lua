-- expect: config script exceeded
-- expect: instructions
-- Backtracking patterns are charged by their worst case before they run.
local s = string.rep("a", 5000)
return { s:find(string.rep("a*", 30) .. "b") }
