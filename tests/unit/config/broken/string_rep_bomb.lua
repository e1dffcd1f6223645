-- expect: string_rep_bomb.lua:3: config script exceeded
-- string.rep is charged by its count, so a huge repetition fails before it allocates or loops.
local s = string.rep("phub", 1e12)
return { eal_args = s }
