-- expect: balance_bomb.lua:5: config script exceeded
-- expect: instructions
-- %b scans to the end of the subject from every start position: n^2/2 steps for unbalanced '('.
local s = string.rep("(", 200000)
return { s:find("%b()") }
