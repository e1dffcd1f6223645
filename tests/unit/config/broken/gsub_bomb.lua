-- expect: gsub_bomb.lua:5: config script exceeded
-- expect: instructions
-- Backtracking in gsub: every a* tries every split of the a's, from every position.
local s = string.rep("a", 300)
return { s:gsub(string.rep("a*", 8) .. "b", "") }
